"""The sections on Service routing weighed against moves, and on the price of the cross-zone
traffic both save."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rebalancer.strict import Strict


class Routing(Strict):
    """Service routing weighed against moves: `spec.trafficDistribution: PreferSameZone` keeps a
    Service's calls in their zone without moving a pod, wherever a client's zone has a ready
    endpoint."""

    advise: bool = True
    """Weigh routing: say per Service what PreferSameZone would keep in its zone (the plan's
    routing section, Events on the Service, metrics), and plan around it as below. False:
    none of it."""
    plan_around: bool = False
    """Plan moves on the traffic as the recommended routing would send it, so no move is spent
    on what a routing change removes. Turn it on once the recommended routing is being set
    (by hand, or by `apply`): until it is, moves are planned for traffic that does not exist.
    A Service annotated `topology-rebalancer.io/routing: keep` may not have its routing
    changed: its traffic is planned for as it is routed today."""
    max_endpoint_load: Annotated[float, Field(ge=1)] = 2.0
    """Advise it only where no ready endpoint would get more than this many times an even share
    of the Service's calls: unlike Topology Aware Routing, the field has no safeguard for a zone
    with many clients and few endpoints."""
    apply: bool = False
    """Let the controller set the recommended trafficDistribution itself, in evict and migrate
    modes, on Services in scope annotated `topology-rebalancer.io/routing: apply`; never on
    others. Needs the right to patch Services, which the default install does not grant
    (deploy/components/routing, or the chart with this switch on)."""
    changes_per_cycle: Annotated[int, Field(ge=1)] = 5
    """Routing changes made in one cycle at most, heaviest saving first: each one shifts a
    Service's load between its endpoints, so a few at a time, like evictions."""
    event_every_seconds: Annotated[float, Field(ge=0)] = 3600
    """A Service's recommendation Event is repeated at most this often while it stands; a
    changed recommendation is said at once."""


class CrossZonePrice(Strict):
    per_gb_cross_zone: Annotated[float, Field(ge=0)] = 0.02
    """Billed per GB that crosses a zone, both sides counted (AWS: $0.01 each way)."""
    currency: str = "USD"
    """Label of the cost metrics; the price above is in it."""
