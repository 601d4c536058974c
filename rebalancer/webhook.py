"""The mutating admission webhook of migrate mode: it steers each replacement pod to its target.

On pod CREATE it looks for a live hint for the pod's controller and, if there is one, adds node
affinity for the target domain and consumes the hint. It never blocks a pod: anything unexpected
is answered "allowed, unchanged", and the webhook configuration has failurePolicy Ignore, so pods
are created even when the controller is down.

TLS is self-signed: a CA and serving certificate are made at start, and the caBundle of the
controller's own MutatingWebhookConfiguration is patched to trust them.
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

from rebalancer.errors import SourceUnavailableError
from rebalancer.hints import HintStore, affinity_patch
from rebalancer.tls import make_ca, pem, serving_certificate, write_key, write_pem

_log = logging.getLogger(__name__)


def review_response(
    review: dict[str, Any], hints: HintStore, now: Callable[[], float]
) -> dict[str, Any]:
    """The AdmissionReview answer for one request: allowed, with a patch when a hint applies."""
    request = review.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    pod = request.get("object") or {}
    if request.get("operation") != "CREATE" or request.get("kind", {}).get("kind") != "Pod":
        return answer
    metadata = pod.get("metadata") or {}
    owner = next((o for o in metadata.get("ownerReferences") or () if o.get("controller")), None)
    if owner is None:
        return answer
    namespace = request.get("namespace") or metadata.get("namespace", "")
    try:
        hint = hints.take((namespace, owner.get("kind", ""), owner.get("name", "")), now())
    except SourceUnavailableError as error:
        _log.warning("hint lookup failed, pod left as it is: %s", error)
        return answer
    if hint is None:
        return answer
    patch = affinity_patch(pod, hint)
    response["patchType"] = "JSONPatch"
    response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    _log.info(
        "steering a new pod of %s/%s %s to %s (%s)",
        namespace,
        owner.get("kind"),
        owner.get("name"),
        hint.domain,
        "required" if hint.required else f"preferred, weight {hint.weight}",
    )
    return answer


class WebhookServer:
    """HTTPS on a port of its own, answering POST /mutate."""

    def __init__(
        self,
        hints: HintStore,
        *,
        port: int,
        dns_names: list[str],
        ip_addresses: list[str],
        address: str = "0.0.0.0",
        now: Callable[[], float] = time.time,
    ) -> None:
        self.hints = hints
        ca, ca_key = make_ca("topology-rebalancer-webhook-ca")
        certificate, key = serving_certificate(ca, ca_key, dns_names, ip_addresses)
        self.ca_bundle = pem(ca)
        directory = Path(tempfile.mkdtemp(prefix="rebalancer-webhook-"))
        write_pem(certificate, directory / "tls.crt")
        write_key(key, directory / "tls.key")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(directory / "tls.crt", directory / "tls.key")

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
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_port

    def start(self) -> WebhookServer:
        threading.Thread(target=self.server.serve_forever, name="webhook", daemon=True).start()
        return self

    def publish_ca(self, api: client.ApiClient, configuration: str) -> None:
        """Trust our CA in every webhook of our own MutatingWebhookConfiguration."""
        admission = client.AdmissionregistrationV1Api(api)
        current = admission.read_mutating_webhook_configuration(configuration)
        bundle = base64.b64encode(self.ca_bundle).decode()
        # A JSON patch per webhook: a merge patch would replace the whole webhooks list.
        patch = [
            {"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": bundle}
            for index in range(len(current.webhooks or ()))
        ]
        admission.patch_mutating_webhook_configuration(configuration, patch)

    def stop(self) -> None:
        self.server.shutdown()


def webhook_configuration(name: str, url: str, namespaces: list[str]) -> dict[str, Any]:
    """A MutatingWebhookConfiguration reaching the webhook by URL, for `namespaces` only.

    In a cluster deploy/ reaches it through a Service instead; the URL form serves the local
    control plane, whose API server runs on the same machine.
    """
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "steer.topology-rebalancer.io",
                "clientConfig": {"url": url},
                "rules": [
                    {
                        "operations": ["CREATE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                    }
                ],
                "failurePolicy": "Ignore",
                "timeoutSeconds": 5,
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": namespaces,
                        }
                    ]
                },
            }
        ],
    }
