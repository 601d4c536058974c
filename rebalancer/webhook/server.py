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
from rebalancer.errors import SourceUnavailableError
from rebalancer.webhook.review import review_response
from rebalancer.webhook.tls import ServingKeys

_log = logging.getLogger(__name__)


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
            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: one line per pod creation would drown the log."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                try:
                    review = json.loads(self.rfile.read(length))
                    body = review_response(review, hints, now)
                except (ValueError, AttributeError) as error:
                    _log.warning("malformed admission review: %s", error)
                    self.send_response(400)
                    self.end_headers()
                    return
                payload = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer((address, port), Handler)
        self.server.daemon_threads = True
        self.server.socket = self._context.wrap_socket(self.server.socket, server_side=True)
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
