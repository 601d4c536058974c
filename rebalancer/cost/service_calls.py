"""Traffic read as calls to Services: who calls which Service from which zone (or node), summed
per Service, and the traffic as a routing change would send it. Pod-level traffic here; workload
traffic in workload_calls.py, to the same `CallTally`."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from types import SimpleNamespace
from typing import Protocol, TypeVar, cast

import numpy as np
import numpy.typing as npt

from rebalancer.arrays import Floats, Indices, group_sums
from rebalancer.cluster.model import Service, Snapshot
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.cost.kube_proxy import Call, Chooser, Distribution, hinted
from rebalancer.traffic.model import PodTraffic, Traffic

Key = TypeVar("Key", Indices, int)
"""A number standing for a Service, node and zone: one, or an array of them."""
MULTIPLE = -2
"""In `Routes.service_of`: a pod behind several Services."""


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
    pods: list[str | None]
    """Each endpoint's pod, where it names one."""

    @classmethod
    def of(cls, services: Sequence[Service], zone_number: Mapping[str, int]) -> EndpointArrays:
        """Each endpoint's facts are read through map() in C: a large cluster has an endpoint
        per pod."""
        sizes = [len(service.endpoints) for service in services]
        count = sum(sizes)
        owner = np.repeat(np.arange(len(services), dtype=np.int64), sizes)
        endpoints = [e for service in services for e in service.endpoints]
        numbers = {None: 0, "": 0} | {zone: n + 1 for zone, n in zone_number.items()}
        zones = map(numbers.get, map(_ZONE_OF, endpoints), repeat(FOREIGN))
        return cls(
            owner,
            np.fromiter(map(_READY_OF, endpoints), np.bool_, count),
            np.fromiter(zones, np.int64, count),
            np.fromiter(map(bool, map(_ZONE_HINTS_OF, endpoints)), np.bool_, count),
            np.fromiter(map(bool, map(_NODE_HINTS_OF, endpoints)), np.bool_, count),
            list(map(_POD_OF, endpoints)),
        )

    def behind(self) -> tuple[dict[str, int], dict[str, list[int]]]:
        """Pod -> the number of the Service it is an endpoint of, MULTIPLE for several; and the
        pods behind several -> theirs. A Service lists a pod once (see `Service.endpoints`),
        so a pod listed twice is behind two; the common case is one dict built in C."""
        owners = self.service.tolist()
        with_none: dict[str | None, int] = dict(zip(self.pods, owners, strict=True))
        with_none.pop(None, None)
        only = cast(dict[str, int], with_none)
        several: dict[str, list[int]] = {}
        if len(only) < len(self.pods) - self.pods.count(None):
            listed = Counter(self.pods)
            for pod, number in zip(self.pods, owners, strict=True):
                if pod is not None and listed[pod] > 1:
                    several.setdefault(pod, []).append(number)
                    only[pod] = MULTIPLE
        return only, several


_POD_OF, _ZONE_OF, _READY_OF = attrgetter("pod"), attrgetter("zone"), attrgetter("ready")
_NODE_NAME_OF = attrgetter("node_name")
_NOT_A_POD = SimpleNamespace(node_name=None)
"""Stands for a pod the snapshot lacks, so its lookups run in C through map() with the rest."""
_ZONE_HINTS_OF, _NODE_HINTS_OF = attrgetter("zone_hints"), attrgetter("node_hints")


@dataclass(frozen=True)
class Routes:
    """The routable Services (not headless, with endpoints) and the cluster's nodes and zones,
    numbered for arrays: what reading calls needs beside the traffic, whatever its level."""

    services: list[Service]
    endpoints: EndpointArrays
    node_names: list[str]
    zone_names: list[str]
    only: Mapping[str, int]
    """Pod -> the number of the one Service it is an endpoint of; MULTIPLE for several."""
    several: Mapping[str, list[int]]
    """Pod behind several Services -> their numbers."""
    node_number: Mapping[str, int]
    node_zone: Indices
    """Per node, its zone's number; -1 for none."""

    @classmethod
    def of(cls, snapshot: Snapshot) -> Routes:
        services = [s for s in snapshot.services.values() if not s.headless and s.endpoints]
        zone_number: dict[str, int] = {}
        zone_of_node = []
        for node in snapshot.nodes.values():
            zone = node.labels.get(ZONE_LABEL)
            zone_of_node.append(zone_number.setdefault(zone, len(zone_number)) if zone else -1)
        endpoints = EndpointArrays.of(services, zone_number)
        only, several = endpoints.behind()
        return cls(
            services,
            endpoints,
            list(snapshot.nodes),
            list(zone_number),
            only,
            several,
            {name: index for index, name in enumerate(snapshot.nodes)},
            np.array(zone_of_node, np.int64),
        )

    def services_of(self, pod: str) -> list[int]:
        """The numbers of the Services the pod is an endpoint of."""
        number = self.only.get(pod, -1)
        if number == MULTIPLE:
            return self.several[pod]
        return [] if number == -1 else [number]

    def service_of(self, pods: Sequence[str]) -> Indices:
        """Per pod, the number of the one Service it is an endpoint of; MULTIPLE for several,
        -1 for none."""
        return np.fromiter(map(self.only.get, pods, repeat(-1)), np.int64, len(pods))

    def located(self, snapshot: Snapshot, pods: Sequence[str]) -> tuple[Indices, Indices]:
        """Per pod, the number of its node and of its zone; -1 for none. Looked up through
        map() in C: a large cluster has 100k pods."""
        found = map(snapshot.pods.get, pods, repeat(_NOT_A_POD))
        names = map(_NODE_NAME_OF, found)
        node = np.fromiter(map(self.node_number.get, names, repeat(-1)), np.int64, len(pods))
        zone = np.where(node >= 0, self.node_zone[node], -1) if len(node) else node
        return node, zone

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

    def per_service(self, flags: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """Per Service: whether any of its endpoints has the flag."""
        counted = np.bincount(self.endpoints.service[flags], minlength=len(self.services))
        return counted > 0

    def by_node(self) -> npt.NDArray[np.bool_]:
        """Per Service: whether it may route by the client's node (internalTrafficPolicy Local,
        or node hints), so its calls are counted per node."""
        local = np.array([s.internal_traffic_policy == "Local" for s in self.services], np.bool_)
        return local | self.per_service(self.endpoints.node_hinted)


@dataclass(frozen=True)
class CallTally:
    """The calls to each Service, summed: per Service and client zone in a dense table (slot 0
    for a client of unknown zone, then `Routes.zone_names`), and per Service, node and zone
    for the Services that may route by node."""

    zonal: Floats
    """Services x zone slots."""
    by_node: dict[int, float]
    """By `Routes.key`."""

    @classmethod
    def of(
        cls,
        routes: Routes,
        by_node: npt.NDArray[np.bool_],
        *,
        service: Indices,
        node: Indices,
        zone: Indices,
        rate: Floats,
    ) -> CallTally:
        """Calls to `service` from `zone` (from `node` too, read only for the Services that
        route by node, per `by_node`) at `rate`, summed in input order. Per Service and zone,
        the common case, into a dense table: no sort."""
        per_node = by_node[service] if len(service) else np.zeros(0, np.bool_)
        slots = len(routes.zone_names) + 1
        zonal = np.bincount(
            service[~per_node] * slots + zone[~per_node] + 1,
            rate[~per_node],
            len(routes.services) * slots,
        )
        found, position = np.unique(
            routes.key(service[per_node], node[per_node], zone[per_node]), return_inverse=True
        )
        sums = group_sums(position, rate[per_node], len(found))
        return cls(
            zonal.astype(np.float64, copy=False).reshape(len(routes.services), slots),
            dict(zip(found.tolist(), sums.tolist(), strict=True)),
        )

    def calls_from(self, routes: Routes, numbers: set[int]) -> dict[int, list[Call]]:
        """The calls to each of these Services (by number)."""
        calls: dict[int, list[Call]] = defaultdict(list)
        zone_names: list[str | None] = [None, *routes.zone_names]
        rows = sorted(numbers)
        for row, slot in zip(*np.nonzero(self.zonal[rows]), strict=True):
            number = rows[int(row)]
            calls[number].append(Call(None, zone_names[slot], float(self.zonal[number, slot])))
        for key, rate in self.by_node.items():
            number, node_name, zone_name = routes.place(key)
            if number in numbers:
                calls[number].append(Call(node_name, zone_name, rate))
        return calls


class Calls(Protocol):
    """Traffic read as calls to Services, at whatever level the source reports it."""

    @property
    def routes(self) -> Routes: ...

    def tally(self) -> CallTally:
        """The calls summed per Service and client zone (or node)."""
        ...

    def rerouted(self, distributions: Mapping[str, Distribution]) -> Traffic:
        """The traffic as it would be with these Services' trafficDistribution set."""
        ...


def calls_of(calls: Calls) -> dict[str, list[Call]]:
    """Service -> its clients' calls. A Service's own endpoints calling it are left out, as are
    calls to a pod behind no Service; a pod behind several splits its calls evenly among them."""
    routes = calls.routes
    listed = calls.tally().calls_from(routes, set(range(len(routes.services))))
    return {routes.services[number].key: found for number, found in listed.items()}


@dataclass(frozen=True)
class ServiceCalls:
    """The pod-pair rates read as calls, worked out once a cycle for the advice and the
    rerouting alike: each pair both ways (who calls, who is called, the rate that way), and per
    pod of the traffic (by its number there) the routable Service it is an endpoint of, its node
    and its zone, as numbers into `routes`; -1 for none.

    A pair with one end behind a Service is calls to it, replies included (flow counts include
    the replies); a pair with both ends behind Services is read each way as its series named
    it."""

    traffic: PodTraffic
    routes: Routes
    clients: Indices
    servers: Indices
    parts: Floats
    service: Indices
    node: Indices
    zone: Indices

    @classmethod
    def of(cls, traffic: PodTraffic, snapshot: Snapshot) -> ServiceCalls:
        routes = Routes.of(snapshot)
        node, zone = routes.located(snapshot, traffic.pods)
        service_of = routes.service_of(traffic.pods)
        first_service, second_service = service_of[traffic.first], service_of[traffic.second]
        serves_second = (second_service != -1) & (first_service == -1)
        serves_first = (first_service != -1) & (second_service == -1)
        forward, reverse = traffic.forward, traffic.rate - traffic.forward
        toward_second = np.where(serves_first, 0.0, forward + np.where(serves_second, reverse, 0.0))
        toward_first = np.where(serves_second, 0.0, reverse + np.where(serves_first, forward, 0.0))
        return cls(
            traffic,
            routes,
            np.concatenate([traffic.first, traffic.second]),
            np.concatenate([traffic.second, traffic.first]),
            np.concatenate([toward_second, toward_first]),
            service_of,
            node,
            zone,
        )

    def tally(self) -> CallTally:
        """Summed per Service and zone in arrays (per node where the Service may route by
        node): a large cluster has a million pairs. The calls of a pod behind several Services
        are split among them one by one, after the rest: there are few."""
        routes = self.routes
        clients, servers, parts = self.clients, self.servers, self.parts
        server_service, client_service = self.service[servers], self.service[clients]
        called = (parts > 0) & (server_service != -1)
        single = called & (server_service >= 0) & (client_service != MULTIPLE)
        simple = single & (client_service != server_service)
        split: list[tuple[int, int, int, float]] = []
        for index in np.flatnonzero(called & ~single).tolist():  # pods behind several Services
            client, server = self.traffic.pods[clients[index]], self.traffic.pods[servers[index]]
            own = routes.services_of(client)
            targets = [n for n in routes.services_of(server) if n not in own]
            place = int(self.node[clients[index]]), int(self.zone[clients[index]])
            split += [(number, *place, parts[index] / len(targets)) for number in targets]
        shares = np.array(split, np.float64).reshape(-1, 4)
        return CallTally.of(
            routes,
            routes.by_node(),
            service=np.concatenate([server_service[simple], shares[:, 0].astype(np.int64)]),
            node=np.concatenate([self.node[clients[simple]], shares[:, 1].astype(np.int64)]),
            zone=np.concatenate([self.zone[clients[simple]], shares[:, 2].astype(np.int64)]),
            rate=np.concatenate([parts[simple], shares[:, 3]]),
        )

    def rerouted(self, distributions: Mapping[str, Distribution]) -> PodTraffic:
        """The pod-pair rates as they would be with these Services' trafficDistribution set: each
        client's calls to one of them summed, then spread over the endpoints kube-proxy would pick
        under the hints that would be written. Other pairs keep their rates, as do the calls to or
        from a pod behind several Services, which cannot be told apart. In arrays: a large cluster
        has a million pairs, and the endpoints are worked out once per Service and zone."""
        traffic, routes = self.traffic, self.routes
        changed = np.array([s.key in distributions for s in routes.services], np.bool_)
        clients, servers, parts = self.clients, self.servers, self.parts
        service, own = self.service[servers], self.service[clients]
        moved = (parts > 0) & (service >= 0) & (own != service) & (own != MULTIPLE)
        moved[moved] = changed[service[moved]]
        kept = ~moved & (parts > 0)
        count = len(routes.services)
        # Each client's calls to each Service, summed.
        found, position = np.unique(clients[moved] * count + service[moved], return_inverse=True)
        totals = group_sums(position, parts[moved], len(found))
        client, target = found // count, found % count
        # The endpoints for each Service and place (node where it may route by node, else zone).
        by_node = np.array(
            [
                s.internal_traffic_policy == "Local" or distributions.get(s.key) == "PreferSameNode"
                for s in routes.services
            ],
            np.bool_,
        )
        node = np.where(by_node[target], self.node[client], -1) if len(target) else target
        places_found, place_of = np.unique(
            routes.key(target, node, self.zone[client]), return_inverse=True
        )
        number = {key: index for index, key in enumerate(traffic.pods)}
        pickers: dict[int, Chooser] = {}
        reached: list[int] = []
        sizes: list[int] = []
        for key in places_found.tolist():
            svc_number, node_name, zone_name = routes.place(key)
            if svc_number not in pickers:
                svc = routes.services[svc_number]
                endpoints = hinted(svc.endpoints, distributions[svc.key])
                pickers[svc_number] = Chooser(endpoints, svc.internal_traffic_policy == "Local")
            pick = pickers[svc_number]
            near = pick(node_name, zone_name)
            pods = [
                number.setdefault(pod, len(number)) for i in near if (pod := pick.endpoints[i].pod)
            ]
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
