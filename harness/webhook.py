"""The webhook configuration the local control plane's tests and trials install."""

from __future__ import annotations

from typing import Any


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
                "sideEffects": "NoneOnDryRun",
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
