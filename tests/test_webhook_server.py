"""The webhook server picks up renewed keys without a restart."""

from __future__ import annotations

import ssl

from kubernetes import client

from harness.process import free_port
from rebalancer.clients.hints import HintStore
from rebalancer.webhook.server import WebhookServer
from rebalancer.webhook.tls import issue_serving_keys, renewed


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
