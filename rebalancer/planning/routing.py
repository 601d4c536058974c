"""What a cycle says and does about Service routing: Events on the Services whose routing would
keep traffic in its zone, and the routing changes the policy lets the controller make itself.

Pure: the controller's client makes the changes and records the Events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from rebalancer.cluster.model import Service, Snapshot
from rebalancer.config.policy import Policy
from rebalancer.cost.routing import ROUTING_ANNOTATION, SAME_ZONE, RoutingAdvice, topology_mode

RECOMMENDED: Final = "TrafficDistributionRecommended"
"""Event reason: setting trafficDistribution would keep this Service's calls in their zone."""
NO_ENDPOINT: Final = "NoEndpointInZone"
"""Event reason: calls from a zone without a ready endpoint cross zones whatever the routing."""
CHANGED = "TrafficDistributionSet"
"""Event reason: the controller set trafficDistribution, as the Service's annotation allows."""
WOULD_CHANGE = "WouldSetTrafficDistribution"
"""Event reason, in dry-run: the API server accepted the change as a server-side dry-run."""
EVENTS_PER_CYCLE = 20
"""Recommendation Events recorded in one cycle at most, heaviest first: on a large cluster's first
cycle the rest follow in the next ones, rather than a burst of thousands to the API server."""

Reason = Literal["TrafficDistributionRecommended", "NoEndpointInZone"]


@dataclass(frozen=True)
class Announcement:
    service: str
    """namespace/name"""
    reason: Reason
    message: str
    said: str
    """What is said, without the figures that change every cycle: when it changes, the Event
    is recorded again at once."""


@dataclass(frozen=True)
class RoutingChange:
    service: str
    """namespace/name"""
    distribution: str
    resource_version: str
    """The Service as read: a change is made at it, so a Service changed since is left for a
    later cycle."""
    message: str

    @property
    def said(self) -> str:
        return f"set {self.distribution}"


@dataclass(frozen=True)
class RoutingActions:
    announcements: tuple[Announcement, ...]
    changes: tuple[RoutingChange, ...]
    announced: dict[str, tuple[str, float]]
    """For the next cycle: per Service, what was last said and when."""


def routing_actions(
    advice: Sequence[RoutingAdvice],
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    announced: Mapping[str, tuple[str, float]],
) -> RoutingActions:
    """The routing changes to make now (in dry-run, to send as server-side dry-runs), and the
    Events due: each Service's at most once per `routing.event_every_seconds` unless what it
    says changes. `advice` comes heaviest first, so the cap on changes keeps the largest."""
    settings = policy.routing
    kept = {
        key: (said, at)
        for key, (said, at) in announced.items()
        if now - at < settings.event_every_seconds
    }
    changes: list[RoutingChange] = []
    due: list[tuple[float, Announcement]] = []
    for item in advice:
        service = snapshot.services[item.service]
        opted_in = service.annotations.get(ROUTING_ANNOTATION) == "apply"
        may_change = settings.apply and opted_in and _in_scope(service, policy)
        if item.recommended is not None and item.kept_local > 0:
            if may_change and topology_mode(service) is None:
                changes.append(_change(item, service))
            else:
                due.append((item.kept_local, _recommended(item, policy, may_change)))
        elif item.zones_without_endpoint and item.crossing_today > 0:
            due.append((item.crossing_today, _no_endpoint(item)))
    if policy.mode == "dry-run":
        # A dry-run change changes nothing, so it would be due again every cycle: it is said
        # as often as an Event.
        changes = [c for c in changes if kept.get(c.service, ("", 0.0))[0] != c.said]
    changes = changes[: settings.changes_per_cycle]
    fresh = [
        announcement
        for _weight, announcement in sorted(due, key=lambda pair: -pair[0])
        if kept.get(announcement.service, ("", 0.0))[0] != announcement.said
    ][:EVENTS_PER_CYCLE]
    kept |= {a.service: (a.said, now) for a in fresh}
    kept |= {c.service: (c.said, now) for c in changes if policy.mode == "dry-run"}
    return RoutingActions(tuple(fresh), tuple(changes), kept)


def _in_scope(service: Service, policy: Policy) -> bool:
    namespaces = policy.scope.namespaces
    if namespaces.include and service.namespace not in namespaces.include:
        return False
    opted_out = service.annotations.get(policy.scope.opt_out_annotation, "").lower() == "true"
    return service.namespace not in namespaces.exclude and not opted_out


def _saving(item: RoutingAdvice, currency: str) -> str:
    kept = f"{item.kept_local:.4g} of the {item.crossing_today:.4g} crossing zones"
    money = "" if item.monthly_saved is None else f", {item.monthly_saved:.2f} {currency}/month"
    return kept + money


def _recommended(item: RoutingAdvice, policy: Policy, may_change: bool) -> Announcement:
    routing = f"spec.trafficDistribution: {item.recommended}"
    if may_change:  # opted in, but an annotation overrides the field: its owner decides
        action = "the rebalancer leaves it to you while the annotation overrides it"
    elif policy.routing.apply:
        action = f"set it, or annotate {ROUTING_ANNOTATION}=apply to let the rebalancer set it"
    else:
        action = "set it"
    notes = [item.note] if item.note else []
    if item.zones_without_endpoint:
        notes.append(f"no ready endpoint in {', '.join(item.zones_without_endpoint)}")
    message = f"{routing} would keep {_saving(item, policy.price.currency)} in their zone: {action}"
    said = f"{item.recommended} {action} {item.zones_without_endpoint}"
    return Announcement(item.service, RECOMMENDED, "; ".join([message, *notes]), said)


def _no_endpoint(item: RoutingAdvice) -> Announcement:
    zones = ", ".join(item.zones_without_endpoint)
    message = (
        f"calls from {zones} cross zones whatever the routing: no ready endpoint there; "
        f"a replica or a move there would let {SAME_ZONE} keep them local"
    )
    return Announcement(item.service, NO_ENDPOINT, message, zones)


def _change(item: RoutingAdvice, service: Service) -> RoutingChange:
    assert item.recommended is not None
    message = (
        f"set spec.trafficDistribution: {item.recommended} ({ROUTING_ANNOTATION}=apply): it "
        f"keeps {item.kept_local:.4g} of the {item.crossing_today:.4g} crossing zones local"
    )
    return RoutingChange(item.service, item.recommended, service.resource_version, message)
