"""The webhook server: renewed keys without a restart, no stall on a silent client, and an
answer to every request."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from kubernetes import client

from harness import builders as b
from harness.process import free_port
from rebalancer.clients.hints import HintStore
from rebalancer.planning.landing import Hint
from rebalancer.webhook.server import WebhookServer
from rebalancer.webhook.tls import issue_serving_keys, renewed
from tests.conftest import zone_hint


def _served_certificate(port: int) -> bytes:
    return ssl.get_server_certificate(("127.0.0.1", port)).encode()


def test_loaded_keys_are_served_from_the_next_handshake() -> None:
    keys = issue_serving_keys([], ["127.0.0.1"])
    hints = HintStore(client.ApiClient(), "ops", "hints")  # never read: no request is a review
    server = WebhookServer(hints, keys, port=free_port(), address="127.0.0.1").start()
    try:
        assert _served_certificate(server.port) == keys.certificate
        fresh = renewed(keys, [], ["127.0.0.1"])
        server.load(fresh)
        assert _served_certificate(server.port) == fresh.certificate
        assert server.keys == fresh
    finally:
        server.stop()


class NoHints(HintStore):
    def __init__(self) -> None:
        self.asked = 0

    def take(self, owner: tuple[str, str, str], now: float, rank: str | None = None) -> Hint | None:
        self.asked += 1
        return None


REVIEW = b.admission_review()


@pytest.fixture
def served() -> Iterator[tuple[WebhookServer, ssl.SSLContext]]:
    keys = issue_serving_keys([], ["127.0.0.1"])
    server = WebhookServer(NoHints(), keys, port=free_port(), address="127.0.0.1").start()
    trusted = ssl.create_default_context(cadata=keys.ca.decode())
    try:
        yield server, trusted
    finally:
        server.stop()


def post(
    server: WebhookServer, trusted: ssl.SSLContext, path: str, body: bytes, **headers: str
) -> tuple[int, bytes]:
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=trusted, timeout=10)
    try:
        connection.request("POST", path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_a_silent_connection_holds_up_no_review(
    served: tuple[WebhookServer, ssl.SSLContext],
) -> None:
    """Before, the TLS handshake ran in the accept loop: one client that connected and sent
    nothing kept every later review waiting for as long as it stayed."""
    server, trusted = served
    silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(5)]
    try:
        status, body = post(server, trusted, "/mutate", json.dumps(REVIEW).encode())
    finally:
        for connection in silent:
            connection.close()
    assert status == 200
    assert json.loads(body)["response"] == {"uid": "u1", "allowed": True}
    assert server.hints.asked == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("path", "body", "headers", "expected"),
    [
        ("/other", json.dumps(REVIEW).encode(), {}, 404),
        ("/mutate", b"{not json", {}, 200),
        ("/mutate", b"[1, 2]", {}, 200),
        ("/mutate", b"{}", {"Content-Length": str(64 * 1024 * 1024)}, 200),
        ("/mutate", b"[" * 100_000 + b"]" * 100_000, {}, 200),
    ],
    ids=["other-path", "not-json", "not-an-object", "too-large", "nested-100000-deep"],
)
def test_every_request_gets_an_answer_and_every_review_an_allowed_one(
    served: tuple[WebhookServer, ssl.SSLContext],
    path: str,
    body: bytes,
    headers: dict[str, str],
    expected: int,
) -> None:
    server, trusted = served
    status, answer = post(server, trusted, path, body, **headers)
    assert status == expected
    if expected == 200:
        assert json.loads(answer) == {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": {"uid": "", "allowed": True},
        }
    assert server.hints.asked == 0  # type: ignore[attr-defined]


class EveryOtherOwnerHinted(HintStore):
    """A hint for every second owner asked about, counted under a lock: the reviews come from
    many threads at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hinted: set[str] = set()

    def take(self, owner: tuple[str, str, str], now: float, rank: str | None = None) -> Hint | None:
        if int(owner[2].rsplit("-", 1)[1]) % 2:
            return None
        with self.lock:
            self.hinted.add(owner[2])
        return zone_hint(owner, "b", now, required=False)


def _review_of(number: int) -> bytes:
    return json.dumps(b.admission_review(f"uid-{number}", f"web-{number}")).encode()


def test_a_thousand_reviews_beside_two_hundred_silent_connections_are_each_answered_right() -> None:
    """The loopback load of issue 24, as a test of correctness (figures: make bench-webhook):
    every review answered 200 with its own uid, patched exactly when its owner had a hint."""
    keys = issue_serving_keys([], ["127.0.0.1"])
    hints = EveryOtherOwnerHinted()
    server = WebhookServer(hints, keys, port=free_port(), address="127.0.0.1").start()
    trusted = ssl.create_default_context(cadata=keys.ca.decode())
    silent = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(200)]
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(
                pool.map(
                    lambda n: (n, post(server, trusted, "/mutate", _review_of(n))), range(1000)
                )
            )
    finally:
        for connection in silent:
            connection.close()
        server.stop()
    for number, (status, body) in answers:
        assert status == 200
        response = json.loads(body)["response"]
        assert response["uid"] == f"uid-{number}" and response["allowed"] is True
        assert ("patch" in response) == (number % 2 == 0)
    assert len(hints.hinted) == 500


class BrokenHints(HintStore):
    def __init__(self) -> None:
        """No API client: take() fails before any would be used."""

    def take(self, owner: tuple[str, str, str], now: float, rank: str | None = None) -> Hint | None:
        raise RuntimeError("a fault nobody foresaw")


def test_a_fault_while_reviewing_still_answers_allowed_with_the_requests_uid() -> None:
    keys = issue_serving_keys([], ["127.0.0.1"])
    server = WebhookServer(BrokenHints(), keys, port=free_port(), address="127.0.0.1").start()
    trusted = ssl.create_default_context(cadata=keys.ca.decode())
    try:
        status, body = post(server, trusted, "/mutate", json.dumps(REVIEW).encode())
    finally:
        server.stop()
    assert status == 200
    assert json.loads(body)["response"] == {"uid": "u1", "allowed": True}


def test_a_pod_whose_affinity_no_pod_can_have_spends_no_hint(
    served: tuple[WebhookServer, ssl.SSLContext],
) -> None:
    """The fuzzer's find: `affinity: true` raised inside the patch, after the hint was taken."""
    server, trusted = served
    review = b.admission_review(pod_spec={"affinity": True})
    status, body = post(server, trusted, "/mutate", json.dumps(review).encode())
    assert status == 200
    assert json.loads(body)["response"] == {"uid": "u1", "allowed": True}
    assert server.hints.asked == 0  # type: ignore[attr-defined]
