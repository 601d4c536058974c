"""The webhook under load, on loopback: review latency with and without silent connections open,
peak RSS under a 3 MiB review, and the time to answer when the API server hangs. Run with
`make bench-webhook`; writes bench/results/webhook.md and webhook.json.

The server runs in a child process of its own (so its peak RSS is its own), with a hint store
that answers at once, except for the last figure, where its store talks to an "API server" that
accepts connections and never answers. Each review is a new TLS connection, as a conservative
stand-in for the API server, which keeps connections open."""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from harness.paths import REPO
from harness.process import free_port, peak_rss_mib
from rebalancer.clients.hints import HintStore
from rebalancer.planning.landing import Hint
from rebalancer.webhook.server import WebhookServer
from rebalancer.webhook.tls import ServingKeys, issue_serving_keys

REVIEWS = 1000
SILENT = 200
LARGE_BYTES = 3 * 1024 * 1024


class NoHints(HintStore):
    """A store that answers at once: what is measured is the server."""

    def __init__(self) -> None:
        """No API client: nothing is read."""

    def take(self, owner: tuple[str, str, str], now: float, rank: str | None = None) -> Hint | None:
        return None


def review(padding: int = 0) -> bytes:
    pod: dict[str, Any] = {
        "metadata": {
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "controller": True}],
            "annotations": {"padding": "x" * padding},
        }
    }
    request = {
        "uid": "u1",
        "operation": "CREATE",
        "namespace": "shop",
        "kind": {"kind": "Pod"},
        "object": pod,
    }
    document = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(document).encode()


def serve(keys_dir: Path, port: int, hanging_api: int | None) -> None:
    """The child: serves until its stdin closes, then prints its peak RSS."""
    keys = ServingKeys(
        ca=(keys_dir / "ca.crt").read_bytes(),
        ca_key=b"",
        certificate=(keys_dir / "tls.crt").read_bytes(),
        key=(keys_dir / "tls.key").read_bytes(),
    )
    hints: HintStore = NoHints()
    if hanging_api is not None:
        configuration = client.Configuration(host=f"http://127.0.0.1:{hanging_api}")
        configuration.retries = False
        hints = HintStore(client.ApiClient(configuration), "ops", "hints")
    server = WebhookServer(hints, keys, port=port, address="127.0.0.1").start()
    print("ready", flush=True)
    sys.stdin.read()
    server.stop()
    print(json.dumps({"peak_rss_mib": peak_rss_mib()}), flush=True)


class Child:
    def __init__(self, keys_dir: Path, hanging_api: int | None = None) -> None:
        self.port = free_port()
        argv = [sys.executable, __file__, "--serve", str(keys_dir), str(self.port)]
        if hanging_api is not None:
            argv.append(str(hanging_api))
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise SystemExit("bench: the webhook did not start")

    def stop(self) -> float:
        out, _err = self.process.communicate("", timeout=30)
        rss: float = json.loads(out.strip().splitlines()[-1])["peak_rss_mib"]
        return rss


def post(port: int, trusted: ssl.SSLContext, body: bytes) -> float:
    started = time.perf_counter()
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=trusted, timeout=30)
    try:
        connection.request("POST", "/mutate", body=body)
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise SystemExit(f"bench: HTTP {answer.status}")
    finally:
        connection.close()
    return time.perf_counter() - started


def latencies(port: int, trusted: ssl.SSLContext) -> dict[str, float]:
    body = review()
    times = sorted(post(port, trusted, body) for _ in range(REVIEWS))
    return {
        "p50_ms": 1000 * statistics.median(times),
        "p99_ms": 1000 * times[int(0.99 * len(times)) - 1],
        "max_ms": 1000 * times[-1],
    }


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        hanging_api = int(sys.argv[4]) if len(sys.argv) > 4 else None
        serve(Path(sys.argv[2]), int(sys.argv[3]), hanging_api)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    keys = issue_serving_keys([], ["127.0.0.1"])
    trusted = ssl.create_default_context(cadata=keys.ca.decode())
    figures: dict[str, Any] = {"reviews": REVIEWS, "silent_connections": SILENT}
    with tempfile.TemporaryDirectory() as directory:
        keys_dir = Path(directory)
        for name, value in (("ca.crt", keys.ca), ("tls.crt", keys.certificate)):
            (keys_dir / name).write_bytes(value)
        (keys_dir / "tls.key").write_bytes(keys.key)

        child = Child(keys_dir)
        figures["quiet"] = latencies(child.port, trusted)
        silent = [socket.create_connection(("127.0.0.1", child.port)) for _ in range(SILENT)]
        try:
            figures["with_silent"] = latencies(child.port, trusted)
        finally:
            for connection in silent:
                connection.close()
        figures["peak_rss_small_mib"] = child.stop()

        child = Child(keys_dir)
        post(child.port, trusted, review())
        figures["large_review_seconds"] = post(child.port, trusted, review(LARGE_BYTES - 4096))
        figures["peak_rss_large_mib"] = child.stop()

        with socket.create_server(("127.0.0.1", 0)) as hanging:  # accepts, never answers
            child = Child(keys_dir, hanging_api=hanging.getsockname()[1])
            figures["hanging_api_seconds"] = post(child.port, trusted, review())
            child.stop()
    lines = [
        "# Webhook on loopback (`make bench-webhook`)",
        "",
        f"{REVIEWS} reviews, each on a new TLS connection, one at a time.",
        "",
        "| | p50 | p99 | max |",
        "|---|---:|---:|---:|",
    ]
    for key, label in (("quiet", "no other connection"), ("with_silent", f"{SILENT} silent ones")):
        row = figures[key]
        cells = [f"{row[name]:.1f} ms" for name in ("p50_ms", "p99_ms", "max_ms")]
        lines.append(f"| {label} | {' | '.join(cells)} |")
    lines += [
        "",
        f"- Peak RSS of the server: {figures['peak_rss_small_mib']:.0f} MiB after the reviews "
        f"above; {figures['peak_rss_large_mib']:.0f} MiB after one review of about 3 MiB "
        f"(answered in {figures['large_review_seconds']:.2f} s).",
        f"- API server that accepts and never answers: the review is answered, allowed and "
        f"unchanged, in {figures['hanging_api_seconds']:.2f} s.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "webhook.md").write_text(text)
    (args.results / "webhook.json").write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
