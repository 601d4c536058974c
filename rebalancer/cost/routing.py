"""How Service traffic is routed today, and how much would cross zones under each
trafficDistribution: the prediction the plan's routing section stands on.

It follows kube-proxy's choice of endpoints (pkg/proxy/topology.go): only ready endpoints
decide; node hints are used if every ready endpoint has one and one names the client's node,
else zone hints on the same terms, else every ready endpoint; with none ready, the serving and
terminating ones; internalTrafficPolicy Local keeps to the client's node. Connections spread
evenly over the chosen set. The hints a distribution would bring are those the EndpointSlice
controller writes (k8s.io/endpointslice/trafficdist): each ready endpoint's own zone, and its
node too for PreferSameNode. The `service.kubernetes.io/topology-mode` annotation overrides the
field, so where it is set the field's value changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import Literal, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from rebalancer.arrays import Floats, Indices, group_sums
from rebalancer.cluster.model import Endpoint, Service, Snapshot
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.cost.figures import Price
from rebalancer.traffic.model import PodTraffic

TOPOLOGY_MODE_ANNOTATIONS = (
    "service.kubernetes.io/topology-aware-hints",
    "service.kubernetes.io/topology-mode",
)
"""Topology Aware Routing, older than the field; set to Auto it wins over trafficDistribution.
The EndpointSlice controller reads the first (deprecated) where it is set, else the second."""

Distribution = Literal["Cluster", "PreferSameZone", "PreferSameNode"]
SAME = 1e-9
"""Savings below this share of a Service's calls are rounding, not a reason to change it."""
SAME_ZONE: Distribution = "PreferSameZone"


def distribution_of(value: str | None) -> Distribution:
    """trafficDistribution as the EndpointSlice controller reads it: PreferClose is
    PreferSameZone's older name; any other value, or none, routes cluster-wide."""
    if value in ("PreferClose", "PreferSameZone"):
        return "PreferSameZone"
    return "PreferSameNode" if value == "PreferSameNode" else "Cluster"


def topology_mode(service: Service) -> str | None:
    """The Topology Aware Routing annotation in force, when it turns hints on: as the
    EndpointSlice controller's hintsEnabled reads it, the deprecated key where it is set, and
    only the values Auto and auto."""
    for key in TOPOLOGY_MODE_ANNOTATIONS:
        value = service.annotations.get(key)
        if value is not None:
            return f"{key}={value}" if value in ("Auto", "auto") else None
    return None


def hinted(endpoints: Sequence[Endpoint], distribution: Distribution) -> tuple[Endpoint, ...]:
    """The endpoints with the hints the EndpointSlice controller would write for
    `distribution`. It writes only ready endpoints' hints, and clears them all for Cluster."""
    if distribution == "Cluster":
        return tuple(msgspec.structs.replace(e, zone_hints=(), node_hints=()) for e in endpoints)
    same_node = distribution == "PreferSameNode"
    return tuple(
        msgspec.structs.replace(
            endpoint,
            zone_hints=(endpoint.zone,) if endpoint.zone else (),
            node_hints=(endpoint.node,) if same_node and endpoint.node else (),
        )
        if endpoint.ready
        else endpoint
        for endpoint in endpoints
    )


class Chooser:
    """kube-proxy's choice of endpoints for one Service, worked out once for every client: which
    endpoints are usable, whether node or zone hints apply, and the endpoints hinted for each
    node and zone, as positions in the Service's list."""

    def __init__(self, endpoints: Sequence[Endpoint], local_only: bool) -> None:
        self.endpoints = endpoints
        self.local_only = local_only
        ready = [i for i, e in enumerate(endpoints) if e.ready]
        fallback = [i for i, e in enumerate(endpoints) if e.serving and e.terminating]
        self.ready = ready or fallback
        """With none ready, the serving and terminating ones, wherever they are."""
        self.by_node: dict[str, list[int]] = defaultdict(list)
        self.by_zone: dict[str, list[int]] = defaultdict(list)
        if local_only:
            # The node's ready endpoints, else its serving and terminating ones.
            self.by_node.update(_by_node(endpoints, fallback))
            self.by_node.update(_by_node(endpoints, ready))
            return
        if not ready:
            return
        if all(endpoints[i].node_hints for i in ready):
            for i in ready:
                for node in endpoints[i].node_hints:
                    self.by_node[node].append(i)
        if all(endpoints[i].zone_hints for i in ready):
            for i in ready:
                for zone in endpoints[i].zone_hints:
                    self.by_zone[zone].append(i)

    def __call__(self, node: str | None, zone: str | None) -> list[int]:
        """The positions of the endpoints kube-proxy on `node` (in `zone`) sends a connection
        to, evenly: node hints if one names the node, else zone hints if one names the zone,
        else every usable endpoint; with internalTrafficPolicy Local, the node's own only."""
        if self.local_only:
            return self.by_node.get(node or "", [])
        near = self.by_node.get(node or "") or self.by_zone.get(zone or "")
        return near or self.ready


def _by_node(endpoints: Sequence[Endpoint], positions: list[int]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for i in positions:
        node = endpoints[i].node
        if node is not None:
            grouped[node].append(i)
    return grouped


@dataclass(frozen=True)
class Call:
    """Calls to one Service from one place: its clients' summed rate, from one zone, or from one
    node where the Service may route by node (internalTrafficPolicy Local, or node hints)."""

    node: str | None
    zone: str | None
    rate: float


@dataclass(frozen=True)
class Routed:
    """Where a Service's calls go under one set of endpoints' hints."""

    crossing: float
    """Rate sent to an endpoint in another zone (both zones known)."""
    dropped: float
    """Rate with no endpoint to go to (internalTrafficPolicy Local on a node without one)."""
    load: Mapping[int, float]
    """Rate per endpoint, by its position in the Service's list."""


def route(
    endpoints: Sequence[Endpoint],
    calls: Sequence[Call],
    local_only: bool = False,
    *,
    with_load: bool = False,
) -> Routed:
    """Where the calls go; the rate per endpoint only when asked (`with_load`)."""
    pick = Chooser(endpoints, local_only)
    zones = [e.zone for e in endpoints]
    crossing = dropped = 0.0
    load = np.zeros(len(endpoints)) if with_load else None
    for call in calls:
        targets = pick(call.node, call.zone)
        if not targets:
            dropped += call.rate
            continue
        share = call.rate / len(targets)
        if call.zone is not None:
            away = sum(1 for i in targets if zones[i] is not None and zones[i] != call.zone)
            crossing += share * away
        if load is not None:
            np.add.at(load, targets, share)  # an index listed twice takes two shares
    return Routed(crossing, dropped, {} if load is None else dict(enumerate(load.tolist())))


Key = TypeVar("Key", Indices, int)
"""A number standing for a Service, node and zone: one, or an array of them."""
MULTIPLE = -2
"""In `ServiceCalls.service`: a pod behind several Services."""


FOREIGN = -1
"""In `EndpointArrays.zone`: a zone that no node is in, so no client's."""


@dataclass(frozen=True)
class EndpointArrays:
    """Every endpoint of the routable Services, flat: whose it is and what kube-proxy reads of
    it, so the advice for most Services is worked out in arrays rather than endpoint by
    endpoint."""

    service: Indices
    ready: npt.NDArray[np.bool_]
    zone: Indices
    """0 for none, else 1 + the zone's number among the nodes' zones; FOREIGN for others."""
    zone_hinted: npt.NDArray[np.bool_]
    node_hinted: npt.NDArray[np.bool_]

    @classmethod
    def of(
        cls,
        services: Sequence[Service],
        zone_number: Mapping[str, int],
        member_of: defaultdict[str, list[int]],
    ) -> EndpointArrays:
        """Also fills `member_of` (pod -> the Services it is an endpoint of). Each endpoint's
        facts are read through map() in C: a large cluster has an endpoint per pod."""
        sizes = [len(service.endpoints) for service in services]
        count = sum(sizes)
        owner = np.repeat(np.arange(len(services), dtype=np.int64), sizes)
        endpoints = [e for service in services for e in service.endpoints]
        for pod, number in zip(map(_POD_OF, endpoints), owner.tolist(), strict=True):
            if pod is not None:
                member_of[pod].append(number)
        numbers = {None: 0, "": 0} | {zone: n + 1 for zone, n in zone_number.items()}
        zones = map(numbers.get, map(_ZONE_OF, endpoints), repeat(FOREIGN))
        return cls(
            owner,
            np.fromiter(map(_READY_OF, endpoints), np.bool_, count),
            np.fromiter(zones, np.int64, count),
            np.fromiter(map(bool, map(_ZONE_HINTS_OF, endpoints)), np.bool_, count),
            np.fromiter(map(bool, map(_NODE_HINTS_OF, endpoints)), np.bool_, count),
        )


_POD_OF, _ZONE_OF, _READY_OF = attrgetter("pod"), attrgetter("zone"), attrgetter("ready")
_ZONE_HINTS_OF, _NODE_HINTS_OF = attrgetter("zone_hints"), attrgetter("node_hints")


@dataclass(frozen=True)
class ServiceCalls:
    """The pod-pair rates read as calls, worked out once a cycle for the advice and the
    rerouting alike: each pair both ways (who calls, who is called, the rate that way), and per
    pod of the traffic (by its number there) the routable Service it is an endpoint of, its node
    and its zone, as numbers into the lists beside them; -1 for none."""

    traffic: PodTraffic
    clients: Indices
    servers: Indices
    parts: Floats
    services: list[Service]
    service: Indices
    node: Indices
    zone: Indices
    node_names: list[str | None]
    zone_names: list[str | None]
    member_of: Mapping[str, list[int]]
    endpoints: EndpointArrays

    @classmethod
    def of(cls, traffic: PodTraffic, snapshot: Snapshot) -> ServiceCalls:
        services = [s for s in snapshot.services.values() if not s.headless and s.endpoints]
        zone_number: dict[str, int] = {}
        place: dict[str, tuple[int, int]] = {}
        for index, (name, node) in enumerate(snapshot.nodes.items()):
            zone = node.labels.get(ZONE_LABEL)
            place[name] = (index, zone_number.setdefault(zone, len(zone_number)) if zone else -1)
        member_of: defaultdict[str, list[int]] = defaultdict(list)
        endpoints = EndpointArrays.of(services, zone_number, member_of)
        pods, nowhere = snapshot.pods, (-1, -1)
        placed = [
            place.get(pod.node_name or "", nowhere) if (pod := pods.get(key)) else nowhere
            for key in traffic.pods
        ]
        located = np.array(placed, np.int64).reshape(-1, 2)
        only = {pod: m[0] if len(m) == 1 else MULTIPLE for pod, m in member_of.items()}
        service_of = np.fromiter(
            map(only.get, traffic.pods, repeat(-1)), np.int64, len(traffic.pods)
        )
        # Where only one end of a pair is behind a Service, the pair is its client's calls both
        # ways (flow counts include the replies); where both are, each way is read as named.
        first_service, second_service = service_of[traffic.first], service_of[traffic.second]
        serves_second = (second_service != -1) & (first_service == -1)
        serves_first = (first_service != -1) & (second_service == -1)
        forward, reverse = traffic.forward, traffic.rate - traffic.forward
        toward_second = np.where(serves_first, 0.0, forward + np.where(serves_second, reverse, 0.0))
        toward_first = np.where(serves_second, 0.0, reverse + np.where(serves_first, forward, 0.0))
        return cls(
            traffic,
            np.concatenate([traffic.first, traffic.second]),
            np.concatenate([traffic.second, traffic.first]),
            np.concatenate([toward_second, toward_first]),
            services,
            service_of,
            located[:, 0],
            located[:, 1],
            list(snapshot.nodes),
            list(zone_number),
            member_of,
            endpoints,
        )

    def key(self, service: Key, node: Key | int, zone: Key | int) -> Key:
        """One number per (Service, node, zone), -1 standing for none, for numpy to group by."""
        nodes, zones = len(self.node_names) + 1, len(self.zone_names) + 1
        return (service * nodes + node + 1) * zones + zone + 1

    def place(self, key: int) -> tuple[int, str | None, str | None]:
        """The Service's number, the node and the zone a `key` stands for."""
        rest, zone = divmod(key, len(self.zone_names) + 1)
        service, node = divmod(rest, len(self.node_names) + 1)
        return (
            service,
            self.node_names[node - 1] if node else None,
            self.zone_names[zone - 1] if zone else None,
        )


@dataclass(frozen=True)
class _Tally:
    """The calls to each Service, summed: per Service and client zone in a dense table (slot 0
    for a client of unknown zone, then `places.zone_names`), and per Service, node and zone
    for the Services that may route by node."""

    zonal: Floats
    """Services x zone slots."""
    by_node: dict[int, float]
    """By `places.key`."""


def _tally(places: ServiceCalls) -> _Tally:
    clients, servers, parts = places.clients, places.servers, places.parts
    server_service, client_service = places.service[servers], places.service[clients]
    called = (parts > 0) & (server_service != -1)
    single = called & (server_service >= 0) & (client_service != MULTIPLE)
    simple = single & (client_service != server_service)
    by_node = _routes_by_node(places)
    service, zone = server_service[simple], places.zone[clients[simple]]
    per_node = by_node[service] if len(service) else np.zeros(0, np.bool_)
    # Per Service and zone, the common case, counted into a dense table: no sort.
    slots = len(places.zone_names) + 1
    zonal = (
        np.bincount(
            service[~per_node] * slots + zone[~per_node] + 1,
            parts[simple][~per_node],
            len(places.services) * slots,
        )
        .astype(np.float64, copy=False)
        .reshape(len(places.services), slots)
    )
    rates: dict[int, float] = defaultdict(float)
    node = places.node[clients[simple]][per_node]
    found, position = np.unique(
        places.key(service[per_node], node, zone[per_node]), return_inverse=True
    )
    sums = group_sums(position, parts[simple][per_node], len(found))
    for key, rate in zip(found.tolist(), sums.tolist(), strict=True):
        rates[key] += rate
    for index in np.flatnonzero(called & ~single).tolist():  # pods behind several Services
        client, server = places.traffic.pods[clients[index]], places.traffic.pods[servers[index]]
        own = places.member_of.get(client, [])
        targets = [n for n in places.member_of[server] if n not in own]
        for number in targets:
            at_zone = int(places.zone[clients[index]])
            if by_node[number]:
                key = places.key(number, int(places.node[clients[index]]), at_zone)
                rates[key] += parts[index] / len(targets)
            else:
                zonal[number, at_zone + 1] += parts[index] / len(targets)
    return _Tally(zonal, dict(rates))


def _per_service(places: ServiceCalls, flags: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Per Service: whether any of its endpoints has the flag."""
    counted = np.bincount(places.endpoints.service[flags], minlength=len(places.services))
    return counted > 0


def _routes_by_node(places: ServiceCalls) -> npt.NDArray[np.bool_]:
    local = np.array([s.internal_traffic_policy == "Local" for s in places.services], np.bool_)
    return local | _per_service(places, places.endpoints.node_hinted)


def _calls_from(places: ServiceCalls, tally: _Tally, numbers: set[int]) -> dict[int, list[Call]]:
    """The calls to each of these Services (by number), from the tally."""
    calls: dict[int, list[Call]] = defaultdict(list)
    zone_names: list[str | None] = [None, *places.zone_names]
    rows = sorted(numbers)
    for row, slot in zip(*np.nonzero(tally.zonal[rows]), strict=True):
        number = rows[int(row)]
        calls[number].append(Call(None, zone_names[slot], float(tally.zonal[number, slot])))
    for key, rate in tally.by_node.items():
        number, node_name, zone_name = places.place(key)
        if number in numbers:
            calls[number].append(Call(node_name, zone_name, rate))
    return calls


def calls_of(places: ServiceCalls) -> dict[str, list[Call]]:
    """Service -> its clients' calls, from pod-pair rates: a pair with one end behind a Service
    is calls to it, replies included; a pair with both ends behind Services is read each way as
    its series named it. A Service's own endpoints calling it are left out, as are
    calls to a pod behind no Service; a pod behind several splits its calls evenly among them.
    Summed per Service and zone in arrays (per node where the Service may route by node): a
    large cluster has a million pairs."""
    calls = _calls_from(places, _tally(places), set(range(len(places.services))))
    return {places.services[number].key: listed for number, listed in calls.items()}


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


def advise(
    snapshot: Snapshot, calls: ServiceCalls, max_endpoint_load: float, price: Price
) -> list[RoutingAdvice]:
    """Every Service with calls, heaviest crossing first. PreferSameZone is recommended where
    it keeps traffic local and no ready endpoint would take more than `max_endpoint_load` times
    an even share of the calls: unlike Topology Aware Routing, the field has no safeguard
    against a zone with many clients and one endpoint. Plain Services (routed cluster-wide
    today, no hints, every ready endpoint in a zone), most of a cluster's, are worked out
    together in arrays; the others one by one."""
    tally = _tally(calls)
    called = np.flatnonzero(tally.zonal.any(axis=1)).tolist()
    called_set = set(called) | {calls.place(key)[0] for key in tally.by_node}
    plain_mask = _plain(calls)
    plain = [n for n in called if plain_mask[n]]
    advice = _plain_advice(calls, tally, plain, max_endpoint_load, price)
    others = _calls_from(calls, tally, called_set - set(plain))
    advice += [
        _advice(calls.services[number], listed, max_endpoint_load, price)
        for number, listed in others.items()
    ]
    return sorted(advice, key=lambda a: (-a.crossing_today, a.service))


def _plain(places: ServiceCalls) -> npt.NDArray[np.bool_]:
    """Per Service: routed cluster-wide today with no hints, so today's crossing is each zone's
    share of the ready endpoints elsewhere; and every ready endpoint in a zone, so
    PreferSameZone's hints are written."""
    endpoints = places.endpoints
    simple = np.array(
        [
            s.internal_traffic_policy != "Local"
            and s.traffic_distribution is None
            and topology_mode(s) is None
            for s in places.services
        ],
        np.bool_,
    )
    hinted = _per_service(places, endpoints.zone_hinted | endpoints.node_hinted)
    ready = _per_service(places, endpoints.ready)
    zoneless = _per_service(places, endpoints.ready & (endpoints.zone == 0))
    return simple & ~hinted & ready & ~zoneless


def _plain_advice(
    places: ServiceCalls,
    tally: _Tally,
    numbers: list[int],
    max_endpoint_load: float,
    price: Price,
) -> list[RoutingAdvice]:
    """`_advice` for plain Services, in arrays over Services x client zones: under Cluster
    routing a zone's calls spread over every ready endpoint; under PreferSameZone they stay
    on the zone's own, or, where it has none, spread over every ready endpoint."""
    if not numbers:
        return []
    endpoints = places.endpoints
    rates = tally.zonal[numbers]
    row_of = np.full(len(places.services), -1, np.int64)
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
        service = places.services[numbers[row]]
        named = {e.zone for e in service.endpoints if e.ready}
        foreign[row] = len(named - set(places.zone_names))
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
    missing_rows = set(np.flatnonzero(uncovered.any(axis=1)).tolist())
    zone_names = ["", *(zone or "" for zone in places.zone_names)]
    found = []
    for row, number in enumerate(numbers):
        service = places.services[number]
        missing = (
            tuple(sorted(zone_names[s] for s in np.flatnonzero(uncovered[row]).tolist()))
            if row in missing_rows
            else ()
        )
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
                missing,
                note,
                price.monthly(max(0.0, saved)),
            )
        )
    return found


def _advice(
    service: Service, calls: list[Call], max_endpoint_load: float, price: Price
) -> RoutingAdvice:
    local_only = service.internal_traffic_policy == "Local"
    today = route(service.endpoints, calls, local_only)
    total = sum(call.rate for call in calls)
    ready_zones = {e.zone for e in service.endpoints if e.ready and e.zone}
    missing = tuple(sorted({c.zone for c in calls if c.zone and c.zone not in ready_zones}))
    current = distribution_of(service.traffic_distribution)
    override = topology_mode(service)

    def advice(recommended: str | None, crossing: float, note: str = "") -> RoutingAdvice:
        saved = today.crossing - crossing if recommended is not None else 0.0
        return RoutingAdvice(
            service.key,
            override or current,
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
    if (current != "Cluster" and override is None) or len(ready_zones) < 2:
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


def rerouted(places: ServiceCalls, distributions: Mapping[str, Distribution]) -> PodTraffic:
    """The pod-pair rates as they would be with these Services' trafficDistribution set: each
    client's calls to one of them summed, then spread over the endpoints kube-proxy would pick
    under the hints that would be written. Other pairs keep their rates, as do the calls to or
    from a pod behind several Services, which cannot be told apart. In arrays: a large cluster
    has a million pairs, and the endpoints are worked out once per Service and zone."""
    traffic = places.traffic
    changed = np.array([s.key in distributions for s in places.services], np.bool_)
    clients, servers, parts = places.clients, places.servers, places.parts
    service, own = places.service[servers], places.service[clients]
    moved = (parts > 0) & (service >= 0) & (own != service) & (own != MULTIPLE)
    moved[moved] = changed[service[moved]]
    kept = ~moved & (parts > 0)
    count = len(places.services)
    # Each client's calls to each Service, summed.
    found, position = np.unique(clients[moved] * count + service[moved], return_inverse=True)
    totals = group_sums(position, parts[moved], len(found))
    client, target = found // count, found % count
    # The endpoints for each Service and place (node where it may route by node, else zone).
    by_node = np.array(
        [
            s.internal_traffic_policy == "Local" or distributions.get(s.key) == "PreferSameNode"
            for s in places.services
        ],
        np.bool_,
    )
    node = np.where(by_node[target], places.node[client], -1) if len(target) else target
    places_found, place_of = np.unique(
        places.key(target, node, places.zone[client]), return_inverse=True
    )
    number = {key: index for index, key in enumerate(traffic.pods)}
    pickers: dict[int, Chooser] = {}
    reached: list[int] = []
    sizes: list[int] = []
    for key in places_found.tolist():
        svc_number, node_name, zone_name = places.place(key)
        if svc_number not in pickers:
            svc = places.services[svc_number]
            endpoints = hinted(svc.endpoints, distributions[svc.key])
            pickers[svc_number] = Chooser(endpoints, svc.internal_traffic_policy == "Local")
        pick = pickers[svc_number]
        near = pick(node_name, zone_name)
        pods = [number.setdefault(pod, len(number)) for i in near if (pod := pick.endpoints[i].pod)]
        reached += pods
        sizes.append(len(pods))
    # Every client's total spread evenly over its place's endpoints; none: dropped, as
    # kube-proxy drops a Local call on a node without an endpoint.
    size = np.array(sizes, np.int64)[place_of] if len(place_of) else np.zeros(0, np.int64)
    starts = (np.cumsum(sizes) - sizes)[place_of] if len(place_of) else size
    first_out = np.cumsum(size) - size
    within = np.arange(int(size.sum())) - np.repeat(first_out, size)
    destinations = np.array(reached, np.int64)[np.repeat(starts, size) + within]
    values = np.repeat(totals / np.maximum(size, 1), size)
    return PodTraffic.undirected(
        tuple(number),
        np.concatenate([clients[kept], np.repeat(client, size)]),
        np.concatenate([servers[kept], destinations]),
        np.concatenate([parts[kept], values]),
        unmatched=traffic.unmatched,
        series=traffic.series,
    )
