"""The webhook server picks up renewed keys without a restart."""

from __future__ import annotations

import ssl

from kubernetes import client

from rebalancer.hints import HintStore
from rebalancer.testing.process import free_port
from rebalancer.tls import issue_serving_keys, renewed
from rebalancer.webhook import WebhookServer


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
