"""A fault-injecting proxy in front of a real Prometheus, for the fault tests and `make soak`.

The faults are the ways a production Prometheus lets a controller down: it is down, slow, answers
with an error, or answers "successfully" with data that must not be acted on. Each fault is either
an HTTP behaviour of the proxy or a rewrite of the real server's real answer, so everything else in
the answer (labels, timestamps, series counts) stays what Prometheus said.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, get_args
from urllib.parse import parse_qs, urlsplit

import requests

PrometheusFault = Literal[
    "none",
    "down",
    "slow",
    "http-500",
    "http-503",
    "bad-query",
    "not-json",
    "no-result",
    "empty",
    "nan",
    "inf",
    "negative",
    "duplicate",
    "gone-pods",
    "odd-labels",
    "stale",
]
FAULTS: tuple[PrometheusFault, ...] = get_args(PrometheusFault)
ANSWER_FAULTS = ("empty", "nan", "inf", "negative", "duplicate", "gone-pods", "odd-labels")
"""Faults that rewrite the traffic answer; `stale` rewrites the freshness answer instead."""
STALE_AGE_SECONDS = 900.0
_ERRORS: dict[PrometheusFault, tuple[int, str]] = {
    "http-500": (500, "internal"),
    "http-503": (503, "unavailable"),
    "bad-query": (400, "bad_data"),
}


def is_freshness_query(promql: str) -> bool:
    """The freshness query is the one that dates the newest sample (see traffic/queries.py)."""
    return promql.replace(" ", "").startswith("time()-max(timestamp(")


def rewrite(fault: PrometheusFault, promql: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The real answer to `promql` as it reads under `fault`; pure, so each rewrite is testable."""
    changed = copy.deepcopy(answer)
    result: list[dict[str, Any]] = changed.get("data", {}).get("result", [])
    if fault == "stale":
        if is_freshness_query(promql):
            for sample in result:
                sample["value"] = [sample["value"][0], f"{STALE_AGE_SECONDS:g}"]
        return changed
    if fault not in ANSWER_FAULTS or is_freshness_query(promql):
        return changed
    if fault == "empty":
        result.clear()
    elif fault in {"nan", "inf", "negative"} and result:
        # One bad series among good ones: the whole answer must be refused, not just that series.
        value = {"nan": "NaN", "inf": "+Inf", "negative": "-1"}[fault]
        result[0]["value"] = [result[0]["value"][0], value]
    elif fault == "duplicate" and result:
        result.append(copy.deepcopy(result[0]))
    elif fault == "gone-pods":
        for sample in result:
            for label, value in sample["metric"].items():
                if label.endswith("_pod") or label in {"source", "destination"}:
                    sample["metric"][label] = f"{value}-gone"
    elif fault == "odd-labels":
        # Namespaces no cluster can have, and names that are empty or hold slashes and emoji.
        for index, sample in enumerate(result):
            for label in sample["metric"]:
                if label.endswith("namespace"):
                    sample["metric"][label] = "Not A Namespace \u2713"
                else:
                    sample["metric"][label] = "" if index % 2 else f"a/b/{index}/\U0001f643"
    return changed


class FaultyPrometheus:
    """Forwards `/api/v1/query` to `upstream` with the current `fault` applied. Set `fault` at
    any time; the next request sees it."""

    def __init__(self, upstream: str, slow_seconds: float = 3.0) -> None:
        self.upstream = upstream
        self.slow_seconds = slow_seconds
        self.fault: PrometheusFault = "none"
        self.requests = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                proxy.answer(self, parse_qs(urlsplit(self.path).query))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                proxy.answer(self, {**parse_qs(urlsplit(self.path).query), **form})

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests read what the controller saw, not the proxy's access log."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="faulty-prometheus", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def answer(self, handler: BaseHTTPRequestHandler, params: dict[str, list[str]]) -> None:
        self.requests += 1
        fault = self.fault
        promql = (params.get("query") or [""])[0]
        if fault == "down":
            handler.close_connection = True  # no answer at all, as a dead server gives
            return
        if fault == "slow":
            time.sleep(self.slow_seconds)
        if fault in _ERRORS:
            status, error_type = _ERRORS[fault]
            body = {"status": "error", "errorType": error_type, "error": f"injected {fault}"}
            self._send(handler, status, json.dumps(body).encode())
            return
        if fault == "not-json":
            self._send(handler, 200, b"<html>502 Bad Gateway</html>")
            return
        if fault == "no-result":
            self._send(handler, 200, b'{"status": "success"}')
            return
        try:
            upstream = requests.get(
                f"{self.upstream}/api/v1/query", params={"query": promql}, timeout=10
            )
            answer = upstream.json()
        except (requests.RequestException, ValueError) as error:
            self._send(handler, 502, json.dumps({"status": "error", "error": str(error)}))
            return
        self._send(handler, upstream.status_code, json.dumps(rewrite(fault, promql, answer)))

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes | str) -> None:
        data = body.encode() if isinstance(body, str) else body
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first (its timeout): what a slow server does too

    def start(self) -> FaultyPrometheus:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def faulty_prometheus(upstream: str, slow_seconds: float = 3.0) -> Iterator[FaultyPrometheus]:
    proxy = FaultyPrometheus(upstream, slow_seconds).start()
    try:
        yield proxy
    finally:
        proxy.stop()
