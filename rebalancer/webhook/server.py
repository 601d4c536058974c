"""The mutating admission webhook of migrate mode: it steers each replacement pod to its target.

On pod CREATE it looks for a live hint for the pod's controller and, if there is one, adds node
affinity for the target domain and consumes the hint. It never blocks a pod: anything unexpected
is answered "allowed, unchanged", and the webhook configuration has failurePolicy Ignore, so pods
are created even when the controller is down.

TLS: either the replicas share a self-signed CA and serving certificate through a Secret
(`serving_keys`) and patch the caBundle of the controller's own MutatingWebhookConfiguration to
trust that CA, or an outside issuer (cert-manager) keeps the Secret and fills caBundle.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rebalancer.clients.hints import HintStore
from rebalancer.errors import SourceUnavailableError, one_line
from rebalancer.webhook.review import allowed_unchanged, review_response
from rebalancer.webhook.tls import ServingKeys

_log = logging.getLogger(__name__)


MAX_BODY_BYTES = 3 * 1024 * 1024 + 64 * 1024
"""A review is at most what the API server accepts in a request (3 MiB), plus its envelope."""
CONNECTION_SECONDS = 5.0
"""For a TLS handshake, and then for each read of the request: the API server gives up on the
webhook after its `timeoutSeconds` (5 here) anyway."""
MAX_CONNECTIONS = 256
"""Connections served at once; more are closed at once rather than queued."""


class _TlsServer(ThreadingHTTPServer):
    """Accepts plain TCP and does the TLS handshake in the connection's own thread, with a
    timeout: done in the accept loop, one client that connects and sends nothing held up every
    other admission request."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        context: ssl.SSLContext,
    ) -> None:
        super().__init__(address, handler)
        self.context = context
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: the API server retries or ignores
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(CONNECTION_SECONDS)
            try:
                tls = self.context.wrap_socket(request, server_side=True)
            except (OSError, ValueError):  # a failed or timed-out handshake: nothing to answer
                self.shutdown_request(request)
                return
            super().process_request_thread(tls, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line, where the standard library prints a traceback to stderr."""
        _log.warning("webhook connection ended early: %s", one_line(sys.exc_info()[1], 200))


class WebhookServer:
    """HTTPS on a port of its own, answering POST /mutate."""

    def __init__(
        self,
        hints: HintStore,
        keys: ServingKeys,
        *,
        port: int,
        address: str = "0.0.0.0",
        now: Callable[[], float] = time.time,
    ) -> None:
        self.hints = hints
        self._context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._stopped = threading.Event()
        self.keys = keys
        self.load(keys)

        class Handler(BaseHTTPRequestHandler):
            timeout = CONNECTION_SECONDS

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: one line per pod creation would drown the log."""

            def do_POST(self) -> None:
                if self.path.partition("?")[0] != "/mutate":
                    self.send_error(404)
                    return
                review = self._review()
                try:
                    answer = review_response(review, hints, now)
                except Exception as error:  # a review is always answered, allowed on doubt
                    _log.error("admission review not understood: %s", one_line(error, 300))
                    answer = allowed_unchanged(review)
                self._answer(answer)

            def _review(self) -> Any:
                """The review sent, or None when it cannot be read: too large, cut short, not
                JSON, nested too deep to decode. Such a request is still answered, "allowed,
                unchanged"."""
                try:
                    length = int(self.headers.get("Content-Length", ""))
                except ValueError:
                    length = -1
                if not 0 <= length <= MAX_BODY_BYTES:
                    _log.warning("admission review refused unread: Content-Length %s", length)
                    self.close_connection = True
                    return None
                try:
                    return json.loads(self.rfile.read(length))
                except (OSError, ValueError, RecursionError) as error:  # arrays 100,000 deep
                    _log.warning("malformed admission review: %s", one_line(error, 200))
                    self.close_connection = True
                    return None

            def _answer(self, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = _TlsServer((address, port), Handler, self._context)
        self.port = self.server.server_port

    def load(self, keys: ServingKeys) -> None:
        """Serve `keys` from the next TLS handshake on; connections already open keep theirs."""
        # ssl loads a certificate chain from files only; they live as long as this call.
        with tempfile.TemporaryDirectory(prefix="rebalancer-webhook-") as directory:
            certificate, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
            certificate.write_bytes(keys.certificate)
            key.touch(mode=0o600)
            key.write_bytes(keys.key)
            self._context.load_cert_chain(certificate, key)
        self.keys = keys

    def start(self) -> WebhookServer:
        threading.Thread(target=self.server.serve_forever, name="webhook", daemon=True).start()
        return self

    def keep_fresh(
        self,
        source: Callable[[], ServingKeys],
        *,
        every_seconds: float,
        publish_to: tuple[client.ApiClient, str] | None,
    ) -> None:
        """Reload from `source` now and then, so a certificate renewed in the shared Secret (by
        any replica, or by an outside issuer) is served here before the old one expires. A new
        CA is published to the webhook configuration `publish_to` names, if any: with an outside
        issuer its CA injector does that instead."""

        def refresh() -> None:
            while not self._stopped.wait(every_seconds):
                try:
                    keys = source()
                    if keys == self.keys:
                        continue
                    new_ca = keys.ca != self.keys.ca
                    self.load(keys)
                    if new_ca and publish_to is not None:
                        self.publish_ca(*publish_to)
                    _log.info("webhook serving a renewed certificate (new CA: %s)", new_ca)
                except (SourceUnavailableError, OSError) as error:
                    _log.warning("webhook keys not refreshed: %s", str(error).splitlines()[0])

        threading.Thread(target=refresh, name="webhook-keys", daemon=True).start()

    def publish_ca(self, api: client.ApiClient, configuration: str) -> None:
        """Trust our CA in every webhook of our own MutatingWebhookConfiguration."""
        admission = client.AdmissionregistrationV1Api(api)
        try:
            current = admission.read_mutating_webhook_configuration(configuration)
            bundle = base64.b64encode(self.keys.ca).decode()
            # A JSON patch per webhook: a merge patch would replace the whole webhooks list.
            patch = [
                {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": bundle}
                for index in range(len(current.webhooks or ()))
            ]
            admission.patch_mutating_webhook_configuration(configuration, patch)
        except ApiException as error:
            raise SourceUnavailableError(
                f"MutatingWebhookConfiguration {configuration}: HTTP {error.status}"
            ) from None
        except (HTTPError, OSError) as error:
            raise SourceUnavailableError(
                f"MutatingWebhookConfiguration {configuration}: {type(error).__name__}"
            ) from None

    def stop(self) -> None:
        self._stopped.set()
        self.server.shutdown()
