"""Per Service, the routing that keeps most of its calls in their zone: what the plan's routing
section recommends, and which Services' routing may change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rebalancer.cluster.model import Service, Snapshot
from rebalancer.cost.figures import Price
from rebalancer.cost.kube_proxy import (
    SAME_ZONE,
    Call,
    Distribution,
    distribution_of,
    hinted,
    mesh_distribution,
    route,
    topology_mode,
)
from rebalancer.cost.service_calls import FOREIGN, Calls, CallTally, Routes

SAME = 1e-9
"""Savings below this share of a Service's calls are rounding, not a reason to change it."""


@dataclass(frozen=True)
class RoutingAdvice:
    """One Service's routing: today's, the one that keeps most traffic in its zone without
    overloading an endpoint, and what each sends across zones."""

    service: str
    today: str
    """trafficDistribution as set (Cluster when unset), or the annotation that overrides it."""
    recommended: str | None
    """PreferSameZone where it keeps more traffic in its zone than today; None otherwise."""
    calls: float
    crossing_today: float
    crossing_recommended: float
    zones_without_endpoint: tuple[str, ...]
    """Zones with clients but no ready endpoint: routing cannot keep their calls local; a move
    or a replica there would."""
    note: str = ""
    monthly_saved: float | None = None
    """What the rate kept local bills in a month; None when the unit is not bytes."""

    @property
    def kept_local(self) -> float:
        """Rate that the recommended routing keeps in its zone, which crosses today."""
        if self.recommended is None:
            return 0.0
        return max(0.0, self.crossing_today - self.crossing_recommended)


def advise(calls: Calls, max_endpoint_load: float, price: Price) -> list[RoutingAdvice]:
    """Every Service with calls, heaviest crossing first. PreferSameZone is recommended where
    it keeps traffic local and no ready endpoint would take more than `max_endpoint_load` times
    an even share of the calls: unlike Topology Aware Routing, the field has no safeguard
    against a zone with many clients and one endpoint. Plain Services (routed cluster-wide
    today, no hints, every ready endpoint in a zone), most of a cluster's, are worked out
    together in arrays; the others one by one."""
    routes, tally = calls.routes, calls.tally()
    called = np.flatnonzero(tally.zonal.any(axis=1)).tolist()
    called_set = set(called) | {routes.place(key)[0] for key in tally.by_node}
    plain_mask = _plain(routes)
    plain = [n for n in called if plain_mask[n]]
    advice = _plain_advice(routes, tally, plain, max_endpoint_load, price)
    others = tally.calls_from(routes, called_set - set(plain))
    advice += [
        _advice(routes.services[number], listed, max_endpoint_load, price)
        for number, listed in others.items()
    ]
    return sorted(advice, key=lambda a: (-a.crossing_today, a.service))


def _plain(routes: Routes) -> npt.NDArray[np.bool_]:
    """Per Service: routed cluster-wide today with no hints, so today's crossing is each zone's
    share of the ready endpoints elsewhere; and every ready endpoint in a zone, so
    PreferSameZone's hints are written."""
    endpoints = routes.endpoints
    simple = np.array(
        [
            s.internal_traffic_policy != "Local"
            and s.traffic_distribution is None
            and topology_mode(s) is None
            and mesh_distribution(s) is None
            for s in routes.services
        ],
        np.bool_,
    )
    hinted = routes.per_service(endpoints.zone_hinted | endpoints.node_hinted)
    ready = routes.per_service(endpoints.ready)
    zoneless = routes.per_service(endpoints.ready & (endpoints.zone == 0))
    return simple & ~hinted & ready & ~zoneless


def _plain_advice(
    routes: Routes,
    tally: CallTally,
    numbers: list[int],
    max_endpoint_load: float,
    price: Price,
) -> list[RoutingAdvice]:
    """`_advice` for plain Services, in arrays over Services x client zones: under Cluster
    routing a zone's calls spread over every ready endpoint; under PreferSameZone they stay
    on the zone's own, or, where it has none, spread over every ready endpoint."""
    if not numbers:
        return []
    endpoints = routes.endpoints
    rates = tally.zonal[numbers]
    row_of = np.full(len(routes.services), -1, np.int64)
    row_of[numbers] = np.arange(len(numbers))
    counted = endpoints.ready & (row_of[endpoints.service] >= 0)
    rows, zones = row_of[endpoints.service[counted]], endpoints.zone[counted]
    ready = np.bincount(rows, minlength=len(numbers)).astype(np.float64)
    slots = rates.shape[1]
    near = zones > 0
    local = (
        np.bincount(rows[near] * slots + zones[near], minlength=len(numbers) * slots)
        .astype(np.float64)
        .reshape(len(numbers), slots)
    )
    """Ready endpoints in each client zone."""
    foreign = np.zeros(len(numbers))
    """Zones of ready endpoints that no client is in, counted by name."""
    for row in np.unique(rows[zones == FOREIGN]).tolist():
        service = routes.services[numbers[row]]
        named = {e.zone for e in service.endpoints if e.ready}
        foreign[row] = len(named - set(routes.zone_names))
    known = rates.copy()
    known[:, 0] = 0.0  # a client of unknown zone crosses nothing that can be told
    total = rates.sum(axis=1)
    today = (known * (ready[:, None] - local) / ready[:, None]).sum(axis=1)
    uncovered = (known > 0) & (local == 0)
    routed = np.where(uncovered, known, 0.0).sum(axis=1)
    spread = (np.where(local == 0, rates, 0.0).sum(axis=1)) / ready
    own = np.divide(rates, local, out=np.zeros_like(rates), where=local > 0).max(axis=1)
    ratio = np.divide((spread + own) * ready, total, out=np.zeros_like(total), where=total > 0)
    covered = (local > 0).sum(axis=1) + foreign
    zone_names = ["", *(zone or "" for zone in routes.zone_names)]
    missing: list[list[str]] = [[] for _ in numbers]
    for row, slot in zip(*np.nonzero(uncovered), strict=True):
        missing[row].append(zone_names[slot])
    found = []
    for row, number in enumerate(numbers):
        service = routes.services[number]
        recommended, crossing, note = None, float(today[row]), ""
        saving = today[row] - routed[row]
        if covered[row] >= 2 and saving > SAME * max(total[row], 1.0):
            if ratio[row] > max_endpoint_load:
                note = (
                    f"PreferSameZone would send one endpoint {ratio[row]:.1f}x an even share "
                    "of the calls"
                )
            else:
                recommended, crossing = SAME_ZONE, float(routed[row])
        saved = float(today[row]) - crossing
        found.append(
            RoutingAdvice(
                service.key,
                "Cluster",
                recommended,
                float(total[row]),
                float(today[row]),
                crossing,
                tuple(sorted(missing[row])),
                note,
                price.monthly(max(0.0, saved)),
            )
        )
    return found


def _advice(
    service: Service, calls: list[Call], max_endpoint_load: float, price: Price
) -> RoutingAdvice:
    local_only = service.internal_traffic_policy == "Local"
    current = distribution_of(service.traffic_distribution)
    override = topology_mode(service)
    mesh = None if local_only or override else mesh_distribution(service)
    # Routed by the mesh's proxies as the field would route it: the hints are not written,
    # but the proxies choose as if they were.
    endpoints = service.endpoints
    if mesh is not None:
        endpoints = hinted(endpoints, distribution_of(mesh.partition("=")[2]))
    today = route(endpoints, calls, local_only)
    total = sum(call.rate for call in calls)
    ready_zones = {e.zone for e in service.endpoints if e.ready and e.zone}
    missing = tuple(sorted({c.zone for c in calls if c.zone and c.zone not in ready_zones}))

    def advice(recommended: str | None, crossing: float, note: str = "") -> RoutingAdvice:
        saved = today.crossing - crossing if recommended is not None else 0.0
        return RoutingAdvice(
            service.key,
            override or mesh or current,
            recommended,
            total,
            today.crossing,
            crossing,
            missing,
            note,
            price.monthly(max(0.0, saved)),
        )

    if local_only:
        return advice(None, today.crossing, "internalTrafficPolicy Local keeps calls on the node")
    if (current != "Cluster" and override is None) or mesh or len(ready_zones) < 2:
        # Already in its zone; or every endpoint in one zone, where preferring it changes nothing.
        return advice(None, today.crossing)
    endpoints = hinted(service.endpoints, SAME_ZONE)
    if any(e.ready and not e.zone for e in endpoints):
        return advice(None, today.crossing, "an endpoint has no zone, so no hints are written")
    routed = route(endpoints, calls, with_load=True)
    if today.crossing - routed.crossing <= SAME * max(total, 1.0):  # float noise is no saving
        return advice(None, today.crossing)
    ready = sum(1 for e in endpoints if e.ready)
    ratio = max(routed.load.values(), default=0.0) * ready / total if total > 0 else 0.0
    if ratio > max_endpoint_load:
        return advice(
            None,
            today.crossing,
            f"PreferSameZone would send one endpoint {ratio:.1f}x an even share of the calls",
        )
    note = f"remove {override.split('=')[0]}: it overrides trafficDistribution" if override else ""
    return advice(SAME_ZONE, routed.crossing, note)


ROUTING_ANNOTATION = "topology-rebalancer.io/routing"
"""On a Service. `keep`: its routing may not be changed, so moves are planned for its traffic as
it is routed today. `apply`: the controller may set the recommended routing itself, where the
policy's `routing.apply` allows it."""


def changes(advice: Sequence[RoutingAdvice], snapshot: Snapshot) -> dict[str, Distribution]:
    """The recommended routing of each Service whose routing may change."""
    return {
        a.service: SAME_ZONE
        for a in advice
        if a.recommended is not None
        and snapshot.services[a.service].annotations.get(ROUTING_ANNOTATION) != "keep"
    }
