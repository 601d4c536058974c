"""The API edge: reads retry through 429 and 5xx, an eviction's 429 is never repeated, a dead API
server is an unavailable source, not a traceback, and only a UID precondition's 409 means the
pod was replaced."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness.process import free_port
from rebalancer.clients.eviction import _names_the_uid_precondition
from rebalancer.clients.kube_api import api_client, list_raw, read_snapshot
from rebalancer.clients.watch_cache import WatchCache
from rebalancer.errors import InputError, SourceUnavailableError


class FlakyApi(BaseHTTPRequestHandler):
    """Fails the first two LISTs with 503 and 429, refuses every eviction with 429."""

    requests: ClassVar[list[str]] = []

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def _answer(self, status: int, body: dict[str, object]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self) -> None:
        FlakyApi.requests.append(f"GET {self.path.split('?')[0]}")
        failures = {1: 503, 2: 429}
        status = failures.get(len(FlakyApi.requests))
        if status:
            self._answer(status, {"kind": "Status", "code": status})
        else:
            self._answer(200, {"kind": "NodeList", "items": [], "metadata": {}})

    def do_POST(self) -> None:
        FlakyApi.requests.append(f"POST {self.path}")
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer(429, {"kind": "Status", "code": 429, "reason": "TooManyRequests"})


def _kubeconfig(directory: Path, port: int) -> Path:
    """A kubeconfig for a plain-HTTP API server on a loopback port."""
    path = directory / "kubeconfig"
    cluster = {"server": f"http://127.0.0.1:{port}"}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "t",
                "clusters": [{"name": "t", "cluster": cluster}],
                "users": [{"name": "t", "user": {"token": "x"}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
            }
        )
    )
    return path


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Iterator[Path]:
    FlakyApi.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FlakyApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    path = _kubeconfig(tmp_path, server.server_port)
    yield path
    server.shutdown()


def test_reads_retry_through_429_and_5xx(kubeconfig: Path) -> None:
    api = api_client(str(kubeconfig))
    assert list_raw("Node", client.CoreV1Api(api).list_node) == []
    assert FlakyApi.requests == ["GET /api/v1/nodes"] * 3


def test_an_eviction_refused_with_429_is_not_repeated(kubeconfig: Path) -> None:
    core = client.CoreV1Api(api_client(str(kubeconfig)))
    body = client.V1Eviction(metadata=client.V1ObjectMeta(name="p", namespace="d"))
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod_eviction("p", "d", body)
    assert refused.value.status == 429
    assert FlakyApi.requests == ["POST /api/v1/namespaces/d/pods/p/eviction"]


def test_a_dead_api_server_is_an_unavailable_source(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, free_port())
    with pytest.raises(SourceUnavailableError, match=r"^Kubernetes API: list Node: "):
        read_snapshot(api_client(str(path)))


def test_a_missing_kubeconfig_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot load Kubernetes config"):
        api_client(str(tmp_path / "absent"))


def test_a_watch_cache_that_never_synced_refuses_to_give_a_snapshot(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path, free_port())
    cache = WatchCache(api_client(str(path))).start()
    try:
        assert not cache.wait_synced(timeout=0.5)
        with pytest.raises(SourceUnavailableError, match="watch cache not synced"):
            cache.snapshot()
    finally:
        cache.stop()


def test_only_a_uid_precondition_conflict_counts_as_a_replaced_pod() -> None:
    """The body the API server sent in tests/e2e/test_pod_replaced.py, against another 409."""
    replaced = ApiException(status=409, reason="Conflict")
    replaced.body = (
        '{"message":"Operation cannot be fulfilled on Pod \\"a-0\\": the UID in the precondition '
        "(29e1) does not match the UID in record (c26f). The object might have been deleted and "
        'then recreated","reason":"Conflict","code":409}'
    )
    modified = ApiException(status=409, reason="Conflict")
    modified.body = (
        '{"message":"Operation cannot be fulfilled on pods \\"a-0\\": the object has been '
        'modified; please apply your changes to the latest version","code":409}'
    )
    assert _names_the_uid_precondition(replaced)
    assert not _names_the_uid_precondition(modified)
