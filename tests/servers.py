"""Real servers for integration tests: a Hubble-style exporter and Debian's Prometheus.

The exporter is the test's ground truth: its counters grow at exactly the configured rate per pod
pair, so whatever rate Prometheus computes from scraping it can be checked against the truth.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

HUBBLE_LABELS = [
    "source_namespace",
    "source_pod",
    "destination_namespace",
    "destination_pod",
    "type",
    "verdict",
    "traffic_direction",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class HubbleFlows(Collector):
    """`hubble_flows_processed_total` with pod labels, each series growing at its pair's rate."""

    def __init__(self, rates: Mapping[tuple[str, str], float]) -> None:
        self.rates = dict(rates)
        self.started = time.monotonic()

    def collect(self) -> Iterator[CounterMetricFamily]:
        elapsed = time.monotonic() - self.started
        family = CounterMetricFamily(
            "hubble_flows_processed", "Total number of flows processed", labels=HUBBLE_LABELS
        )
        for (source, destination), rate in sorted(self.rates.items()):
            source_namespace, _, source_pod = source.partition("/")
            destination_namespace, _, destination_pod = destination.partition("/")
            family.add_metric(
                [
                    source_namespace,
                    source_pod,
                    destination_namespace,
                    destination_pod,
                    "L3_L4",
                    "FORWARDED",
                    "egress",
                ],
                rate * elapsed,
            )
        yield family


@contextmanager
def hubble_exporter(rates: Mapping[tuple[str, str], float]) -> Iterator[str]:
    registry = CollectorRegistry()
    registry.register(HubbleFlows(rates))
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


class PrometheusServer:
    """Debian's `prometheus` on a free loopback port, scraping the given targets every second."""

    def __init__(self, workdir: Path, targets: list[str]) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("the prometheus server is not installed (make test installs it)")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "scrape_configs:\n"
            f"  - job_name: hubble\n    static_configs: [{{targets: {targets!r}}}]\n"
        )
        self.log = (workdir / "prometheus.log").open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 30) -> None:
        self._wait(lambda: requests.get(f"{self.url}/-/ready", timeout=1).ok, timeout, "ready")

    def wait_for(self, promql: str, series: int, timeout: float = 30) -> None:
        """Until `promql` returns at least `series` series."""

        def answered() -> bool:
            body: Any = requests.get(
                f"{self.url}/api/v1/query", params={"query": promql}, timeout=2
            ).json()
            return len(body["data"]["result"]) >= series

        self._wait(answered, timeout, f"{series} series of {promql}")

    def _wait(self, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.process.returncode}")
            try:
                if check():
                    return
            except (requests.RequestException, KeyError, ValueError):
                pass
            time.sleep(0.25)
        raise TimeoutError(f"prometheus not {what} after {timeout}s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
