"""Service routing changes, made as the policy and each Service's own annotation allow, and the
Events that say them.

A change is a merge patch of `spec.trafficDistribution` alone, at the resourceVersion the cycle
read: a Service edited since (its annotation withdrawn, say) gets a conflict, and a later cycle
reads it again. In dry-run the same patch goes to the API server as a server-side dry-run, so
what it would refuse (the right to patch, an API server too old for the value) shows before it
matters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rebalancer.clients.events import EventRecorder
from rebalancer.clients.kube_api import ApiClient
from rebalancer.planning.routing import (
    CHANGED,
    WOULD_CHANGE,
    Announcement,
    RoutingChange,
)

ChangeResult = Literal["set", "would-set", "conflict", "refused", "not-kept", "failed"]
NOT_SET = "TrafficDistributionNotSet"
"""Event reason, a warning: the Service opted in, and the change could not be made."""


@dataclass(frozen=True)
class Changed:
    change: RoutingChange
    result: ChangeResult
    detail: str = ""


class RoutingClient:
    def __init__(self, api: ApiClient, recorder: EventRecorder, *, dry_run: bool) -> None:
        self.core = client.CoreV1Api(api)
        self.recorder = recorder
        self.dry_run = dry_run

    def announce(self, announcement: Announcement) -> None:
        namespace, name = announcement.service.split("/", 1)
        self.recorder.record(
            "Service", namespace, name, reason=announcement.reason, message=announcement.message
        )

    def change(self, change: RoutingChange) -> Changed:
        namespace, name = change.service.split("/", 1)
        if not change.resource_version:
            return self._not_set(change, "failed", "no resourceVersion was read to make it at")
        body = {
            "metadata": {"resourceVersion": change.resource_version},
            "spec": {"trafficDistribution": change.distribution},
        }
        try:
            answer: Any = self.core.patch_namespaced_service(
                name,
                namespace,
                body,
                dry_run="All" if self.dry_run else None,
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
        except ApiException as error:
            if error.status == 409:
                # Changed since the cycle read it: nothing said, the next cycle decides again.
                return Changed(
                    change, "conflict", "HTTP 409: the Service changed since it was read"
                )
            result: ChangeResult = "refused" if error.status in (401, 403) else "failed"
            return self._not_set(change, result, f"HTTP {error.status} {error.reason}")
        except (HTTPError, OSError) as error:
            return Changed(change, "failed", type(error).__name__)
        try:
            kept = json.loads(answer.data).get("spec", {}).get("trafficDistribution")
        except (ValueError, AttributeError):
            kept = None
        if kept != change.distribution:
            detail = (
                f"the API server answered trafficDistribution {kept!r}: its version or "
                "feature gates do not take the value"
            )
            return self._not_set(change, "not-kept", detail)
        reason, result = (WOULD_CHANGE, "would-set") if self.dry_run else (CHANGED, "set")
        self.recorder.record("Service", namespace, name, reason=reason, message=change.message)
        return Changed(change, result)

    def _not_set(self, change: RoutingChange, result: ChangeResult, detail: str) -> Changed:
        namespace, name = change.service.split("/", 1)
        message = f"{change.distribution} not set: {detail}"
        self.recorder.record(
            "Service", namespace, name, reason=NOT_SET, message=message, warning=True
        )
        return Changed(change, result, detail)
