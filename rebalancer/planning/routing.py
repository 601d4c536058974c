"""What a cycle says and does about Service routing: Events on the Services whose routing would
keep traffic in its zone, and the routing changes the policy lets the controller make itself.

Pure: the controller's client makes the changes and records the Events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from rebalancer.cluster.model import Service, Snapshot
from rebalancer.config.policy import Policy
from rebalancer.cost.kube_proxy import SAME_ZONE, topology_mode
from rebalancer.cost.routing import ROUTING_ANNOTATION, RoutingAdvice

RECOMMENDED: Final = "TrafficDistributionRecommended"
"""Event reason: setting trafficDistribution would keep this Service's calls in their zone."""
NO_ENDPOINT: Final = "NoEndpointInZone"
"""Event reason: calls from a zone without a ready endpoint cross zones whatever the routing."""
REVERTED: Final = "TrafficDistributionReverted"
"""Event reason, a warning: the field the controller set was changed back, so something else
(a GitOps tool, a Helm upgrade) owns it, and the controller stops setting it."""
CHANGED: Final = "TrafficDistributionSet"
"""Event reason: the controller set trafficDistribution, as the Service's annotation allows."""
WOULD_CHANGE: Final = "WouldSetTrafficDistribution"
"""Event reason, in dry-run: the API server accepted the change as a server-side dry-run."""
EVENTS_PER_CYCLE = 20
"""Recommendation Events recorded in one cycle at most, heaviest first: on a large cluster's first
cycle the rest follow in the next ones, rather than a burst of thousands to the API server."""

Reason = Literal[
    "TrafficDistributionRecommended", "NoEndpointInZone", "TrafficDistributionReverted"
]


@dataclass(frozen=True)
class Announcement:
    """An Event due on a Service."""

    service: str
    """namespace/name"""
    reason: Reason
    message: str
    said: str
    """What is said, without the figures that change every cycle: when it changes, the Event
    is recorded again at once."""
    warning: bool = False


@dataclass(frozen=True)
class RoutingChange:
    """A Service's trafficDistribution to set, and at which version of the Service."""

    service: str
    """namespace/name"""
    distribution: str
    resource_version: str
    """The Service as read: a change is made at it, so a Service changed since is left for a
    later cycle."""
    message: str
    """What it is predicted to keep local, for the Event that records it."""

    @property
    def said(self) -> str:
        return f"set {self.distribution}"


@dataclass(frozen=True)
class RoutingMemory:
    """What earlier cycles of this process said and did, so Events are not repeated every
    cycle and a change is not fought over. Kept in memory: a new leader starts afresh."""

    said: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Per Service, what was last said (or tried and not made) and when."""
    changed: dict[str, RoutingChange] = field(default_factory=dict)
    """Per Service, the routing change this process made."""

    def tried(self, change: RoutingChange, now: float) -> RoutingMemory:
        """A change not made: it waits as long as an Event would before it is tried again."""
        return replace(self, said={**self.said, change.service: (change.said, now)})

    def made(self, change: RoutingChange) -> RoutingMemory:
        return replace(self, changed={**self.changed, change.service: change})


@dataclass(frozen=True)
class RoutingActions:
    announcements: tuple[Announcement, ...]
    changes: tuple[RoutingChange, ...]
    memory: RoutingMemory
    """For the next cycle, with the Events due now said."""


def routing_actions(
    advice: Sequence[RoutingAdvice],
    snapshot: Snapshot,
    policy: Policy,
    now: float,
    memory: RoutingMemory,
) -> RoutingActions:
    """The routing changes to make now (in dry-run, to send as server-side dry-runs), largest
    saving first, and the Events due: each Service's at most once per
    `routing.event_every_seconds` unless what it says changes. Services outside the policy's
    scope, opted out, or annotated `keep` hear nothing."""
    settings = policy.routing
    said = {
        key: (what, at)
        for key, (what, at) in memory.said.items()
        if now - at < settings.event_every_seconds
    }

    def waiting(service: str, what: str) -> bool:
        return said.get(service, ("", 0.0))[0] == what

    changes: list[tuple[float, RoutingChange]] = []
    due: list[tuple[float, Announcement]] = []
    for item in advice:
        service = snapshot.services[item.service]
        choice = service.annotations.get(ROUTING_ANNOTATION)
        if choice == "keep" or not _in_scope(service, policy):
            continue
        may_change = settings.apply and choice == "apply"
        if item.recommended is not None and item.kept_local > 0:
            made = memory.changed.get(item.service) if may_change else None
            if made is not None and made.resource_version == service.resource_version:
                continue  # made, and not yet in the snapshot: the watch lags a moment
            if made is not None:
                due.append((item.kept_local, _reverted(item, made.distribution)))
            elif may_change and topology_mode(service) is None:
                changes.append((item.kept_local, _change(item, service, policy)))
            else:
                due.append((item.kept_local, _recommended(item, policy, may_change)))
        elif item.zones_without_endpoint and item.crossing_today > 0:
            due.append((item.crossing_today, _no_endpoint(item)))
    chosen = [
        change
        for _saving, change in sorted(changes, key=lambda pair: -pair[0])
        if not waiting(change.service, change.said)
    ][: settings.changes_per_cycle]
    fresh = [
        announcement
        for _weight, announcement in sorted(due, key=lambda pair: -pair[0])
        if not waiting(announcement.service, announcement.said)
    ][:EVENTS_PER_CYCLE]
    said |= {a.service: (a.said, now) for a in fresh}
    if policy.mode == "dry-run":
        # A dry-run change changes nothing, so it would be due again every cycle: it is said
        # as often as an Event.
        said |= {c.service: (c.said, now) for c in chosen}
    return RoutingActions(tuple(fresh), tuple(chosen), replace(memory, said=said))


def _in_scope(service: Service, policy: Policy) -> bool:
    scope = policy.scope
    return scope.namespaces.refusal(service.namespace) is None and not scope.opted_out(
        service.annotations
    )


def _amount(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"


def _kept_local(item: RoutingAdvice, currency: str) -> str:
    """What the recommended routing would keep in its zone, in words."""
    kept = f"{_amount(item.kept_local)} of the {_amount(item.crossing_today)} now crossing zones"
    money = "" if item.monthly_saved is None else f" (about {item.monthly_saved:.2f} {currency}"
    return kept + (money and money + " a month)")


def _recommended(item: RoutingAdvice, policy: Policy, may_change: bool) -> Announcement:
    if may_change:  # opted in, but an annotation overrides the field: its owner decides
        action = f"remove {item.today.split('=')[0]}, which overrides the field"
    elif policy.routing.apply:
        action = f"set it, or annotate {ROUTING_ANNOTATION}=apply to let the rebalancer set it"
    else:
        action = "set it"
    notes = [item.note] if item.note and not may_change else []
    if item.zones_without_endpoint:
        notes.append(f"no ready endpoint in {', '.join(item.zones_without_endpoint)}")
    message = (
        f"spec.trafficDistribution: {item.recommended} would keep "
        f"{_kept_local(item, policy.price.currency)} in their zone: {action}"
    )
    said = f"{item.recommended} {action} {item.zones_without_endpoint}"
    return Announcement(item.service, RECOMMENDED, "; ".join([message, *notes]), said)


def _no_endpoint(item: RoutingAdvice) -> Announcement:
    zones = ", ".join(item.zones_without_endpoint)
    message = (
        f"calls from {zones} cross zones whatever the routing: no ready endpoint there; "
        f"a replica or a move there would let {SAME_ZONE} keep them local"
    )
    return Announcement(item.service, NO_ENDPOINT, message, zones)


def _reverted(item: RoutingAdvice, distribution: str) -> Announcement:
    message = (
        f"the rebalancer set spec.trafficDistribution: {distribution} and it was changed back: "
        "something else owns the field (a GitOps tool, a Helm release), so the rebalancer "
        f"leaves it; set it there, or remove {ROUTING_ANNOTATION}"
    )
    return Announcement(item.service, REVERTED, message, f"reverted {distribution}", True)


def _change(item: RoutingAdvice, service: Service, policy: Policy) -> RoutingChange:
    assert item.recommended is not None
    message = f"predicted to keep {_kept_local(item, policy.price.currency)} in their zone"
    return RoutingChange(item.service, item.recommended, service.resource_version, message)
