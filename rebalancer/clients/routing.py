"""Service routing changes, made as the policy and each Service's own annotation allow, and the
Events that say them.

A change is a merge patch of `spec.trafficDistribution` alone, at the resourceVersion the cycle
read: a Service edited since (its annotation withdrawn, say) gets a conflict, and a later cycle
reads it again. In dry-run the same patch goes to the API server as a server-side dry-run, so
what it would refuse (the right to patch, a value it does not take) shows before it matters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rebalancer.clients.events import EventRecorder
from rebalancer.clients.kube_api import ApiClient, transport_problem
from rebalancer.cost.routing import ROUTING_ANNOTATION
from rebalancer.errors import one_line
from rebalancer.planning.routing import CHANGED, WOULD_CHANGE, Announcement, RoutingChange

ChangeResult = Literal["set", "would-set", "conflict", "refused", "not-kept", "failed"]
NOT_SET = "TrafficDistributionNotSet"
"""Event reason, a warning: the Service opted in, and the change could not be made."""
OLDER_NAMES = {"PreferSameZone": "PreferClose"}
"""The name an API server before 1.34 (where the PreferSameTrafficDistribution gate is off by
default) takes for the same routing, tried when it refuses the newer one as invalid."""


@dataclass(frozen=True)
class Changed:
    """How a change went; `distribution` is what was set, which may be the value's older name."""

    result: ChangeResult
    detail: str = ""
    distribution: str = ""


class RoutingClient:
    """The routing Events and changes of one cycle, with the mode's dry-run flag."""

    def __init__(self, api: ApiClient, recorder: EventRecorder, *, dry_run: bool) -> None:
        self.core = client.CoreV1Api(api)
        self.recorder = recorder
        self.dry_run = dry_run

    def announce(self, announcement: Announcement) -> None:
        namespace, name = announcement.service.split("/", 1)
        self.recorder.record(
            "Service",
            namespace,
            name,
            reason=announcement.reason,
            message=announcement.message,
            warning=announcement.warning,
        )

    def change(self, change: RoutingChange) -> Changed:
        if not change.resource_version:
            return self._not_set(change, "failed", "no resourceVersion was read to make it at")
        value = change.distribution
        while True:
            try:
                kept = self._patch(change, value)
            except ApiException as error:
                older = OLDER_NAMES.get(value)
                if error.status == 422 and older is not None:
                    value = older
                    continue
                return self._refused(change, error)
            except (HTTPError, OSError) as error:
                return Changed("failed", transport_problem(error))
            break
        if kept != value:
            detail = f"the API server answered trafficDistribution {kept!r}: it drops the field"
            return self._not_set(change, "not-kept", detail)
        namespace, name = change.service.split("/", 1)
        result: ChangeResult = "would-set" if self.dry_run else "set"
        verb = result.replace("-", " ")
        message = f"{verb} spec.trafficDistribution: {value} ({ROUTING_ANNOTATION}=apply), "
        reason = WOULD_CHANGE if self.dry_run else CHANGED
        self.recorder.record(
            "Service", namespace, name, reason=reason, message=message + change.message
        )
        return Changed(result, distribution=value)

    def _patch(self, change: RoutingChange, value: str) -> object:
        """The field alone, at the version read; what the API server then holds in it."""
        namespace, name = change.service.split("/", 1)
        body = {
            "metadata": {"resourceVersion": change.resource_version},
            "spec": {"trafficDistribution": value},
        }
        answer: Any = self.core.patch_namespaced_service(
            name,
            namespace,
            body,
            dry_run="All" if self.dry_run else None,
            _content_type="application/merge-patch+json",
            _preload_content=False,
        )
        try:
            return json.loads(answer.data).get("spec", {}).get("trafficDistribution")
        except (ValueError, AttributeError):
            return None

    def _refused(self, change: RoutingChange, error: ApiException) -> Changed:
        if error.status == 409:
            # Changed since the cycle read it: nothing said, the next cycle decides again.
            return Changed("conflict", "HTTP 409: the Service changed since it was read")
        detail = f"HTTP {error.status} {error.reason}"
        if error.status in (401, 403):
            grant = "may not patch Services (deploy/components/routing grants it)"
            return self._not_set(change, "refused", f"{detail}: the controller {grant}")
        if error.status == 422:
            return self._not_set(change, "not-kept", f"{detail}: {_message(error)}")
        return self._not_set(change, "failed", detail)

    def _not_set(self, change: RoutingChange, result: ChangeResult, detail: str) -> Changed:
        namespace, name = change.service.split("/", 1)
        message = f"{change.distribution} not set: {detail}"
        self.recorder.record(
            "Service", namespace, name, reason=NOT_SET, message=message, warning=True
        )
        return Changed(result, detail)


def _message(error: ApiException) -> str:
    """The API server's own words, from the Status it answered with."""
    try:
        return one_line(json.loads(error.body or "{}").get("message", ""), 300)
    except (ValueError, AttributeError):
        return ""
