"""Workload traffic read as calls to Services, counted instead of spelled out pod pair by pod
pair.

Every pod of a workload sends each pod of a peer workload the same share (see
`WorkloadTraffic`), so the calls from one zone to one Service are that share times the number
of client pods in the zone times the number of the peer's pods behind the Service. Pods are
grouped by workload, zone and the Services they are endpoints of: a workload pair gives a few
rows, where its pod pairs would be millions at 100k pods. The rules are ServiceCalls' for the
same pairs spelled out, so both give the same tally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from rebalancer.arrays import Floats, Indices, group_sums, spans
from rebalancer.cluster.model import Snapshot
from rebalancer.cost.kube_proxy import Distribution
from rebalancer.cost.service_calls import MULTIPLE, CallTally, Routes
from rebalancer.cost.workload_counts import pair_count
from rebalancer.traffic.model import WorkloadTraffic


@dataclass(frozen=True)
class _Groups:
    """Pods counted per (workload, the Services they are endpoints of, zone, node), sorted by
    workload, so one workload's groups are a run starting at `start[workload]`."""

    workload: Indices
    services: Indices
    """A number into `WorkloadCalls.sets`."""
    zone: Indices
    node: Indices
    count: Floats
    start: Indices
    length: Indices

    @classmethod
    def of(
        cls, columns: tuple[Indices, Indices, Indices, Indices], sizes: Sequence[int]
    ) -> _Groups:
        """From one row per pod: workload, Service set, zone and node numbers, each below its
        size in `sizes`, -1 for none (zone and node); grouped through one number per row."""
        key = np.zeros(len(columns[0]), np.int64)
        for column, size in zip(columns, sizes, strict=True):
            key = key * (size + 1) + column + 1
        found, count = np.unique(key, return_counts=True)
        decoded = []
        for size in reversed(sizes):
            found, value = np.divmod(found, size + 1)
            decoded.append(value - 1)
        node, zone, services, workload = decoded
        length = np.bincount(workload, minlength=sizes[0])
        return cls(
            workload,
            services,
            zone,
            node,
            count.astype(np.float64),
            np.cumsum(length) - length,
            length,
        )


@dataclass(frozen=True)
class _Rows:
    """Calls from one client group to one Service: their rate, summed over the pod pairs."""

    direction: Indices
    client: Indices
    """The client's group."""
    target: Indices
    """The Service's number."""
    rate: Floats

    def plus(self, other: _Rows) -> _Rows:
        return _Rows(
            np.concatenate([self.direction, other.direction]),
            np.concatenate([self.client, other.client]),
            np.concatenate([self.target, other.target]),
            np.concatenate([self.rate, other.rate]),
        )

    def without(self, dropped: npt.NDArray[np.bool_]) -> _Rows:
        kept = ~dropped
        return _Rows(self.direction[kept], self.client[kept], self.target[kept], self.rate[kept])


@dataclass(frozen=True)
class WorkloadCalls:
    """Workload pairs' rates read as calls, each pair both ways: the client workload, the
    server workload, the rate of each of their pod pairs that way as named, and both ways."""

    traffic: WorkloadTraffic
    routes: Routes
    names: list[str]
    sets: list[tuple[int, ...]]
    """The Services a pod is an endpoint of, each set numbered: 0 is none, 1 + n Service n
    alone, the sets of several after those."""
    pods: tuple[Indices, Indices, Indices, Indices]
    """Per pod of a workload: its workload, Service set, zone and node numbers."""
    client: Indices
    server: Indices
    named: Floats
    full: Floats
    pair: Indices
    """The direction's workload pair, its position in `traffic.rates`."""

    @classmethod
    def of(cls, traffic: WorkloadTraffic, snapshot: Snapshot) -> WorkloadCalls:
        routes = Routes.of(snapshot)
        names = list(traffic.members)
        number = {name: index for index, name in enumerate(names)}
        keys = [pod for name in names for pod in traffic.members[name]]
        # A pod behind one Service has set 1 + its number; the few behind several, sets after.
        sets: dict[tuple[int, ...], int] = {(): 0}
        sets.update(((n,), n + 1) for n in range(len(routes.services)))
        owned = routes.service_of(keys) + 1
        for index in np.flatnonzero(owned == MULTIPLE + 1).tolist():
            found = tuple(sorted(routes.several[keys[index]]))
            owned[index] = sets.setdefault(found, len(sets))
        node, zone = routes.located(snapshot, keys)
        sizes = [len(traffic.members[name]) for name in names]
        workload = np.repeat(np.arange(len(names), dtype=np.int64), sizes)
        pairs = list(traffic.rates)
        a = np.fromiter((number[first] for first, _ in pairs), np.int64, len(pairs))
        b = np.fromiter((number[second] for _, second in pairs), np.int64, len(pairs))
        rate = np.fromiter(traffic.rates.values(), np.float64, len(pairs))
        forward = np.fromiter(map(traffic.forward.get, pairs, [0.0] * len(pairs)), np.float64)
        both = a != b  # within a workload, the one direction covers every pod pair both ways
        position = np.arange(len(pairs), dtype=np.int64)
        return cls(
            traffic,
            routes,
            names,
            list(sets),
            (workload, owned, zone, node),
            np.concatenate([a, b[both]]),
            np.concatenate([b, a[both]]),
            np.concatenate([forward, (rate - forward)[both]]),
            np.concatenate([rate, rate[both]]),
            np.concatenate([position, position[both]]),
        )

    def _groups(self, by_node: bool) -> _Groups:
        """The pods grouped by workload, Service set and zone; by node too if asked."""
        workload, owned, zone, node = self.pods
        places = node if by_node else np.full(len(node), -1, np.int64)
        routes = self.routes
        sizes = (len(self.names), len(self.sets), len(routes.zone_names), len(routes.node_names))
        return _Groups.of((workload, owned, zone, places), sizes)

    def tally(self) -> CallTally:
        """Per Service and client zone; per client node too for the Services that route by
        node, for whose clients alone the pods are grouped by node."""
        routes = self.routes
        by_node = routes.by_node()
        groups = self._groups(by_node=False)
        rows = self._rows(groups)
        zonal = ~by_node[rows.target]
        parts = [(rows.without(~zonal), groups)]
        if by_node.any():
            groups = self._groups(by_node=True)
            rows = self._rows(groups)
            parts.append((rows.without(~by_node[rows.target]), groups))
        return CallTally.of(
            routes,
            by_node,
            service=np.concatenate([found.target for found, _ in parts]),
            node=np.concatenate([grouped.node[found.client] for found, grouped in parts]),
            zone=np.concatenate([grouped.zone[found.client] for found, grouped in parts]),
            rate=np.concatenate([found.rate for found, _ in parts]),
        )

    @cached_property
    def _servers(self) -> _Groups:
        """The pods behind a Service, grouped by workload and Service set: the same whichever
        way the clients are grouped."""
        workload, owned, _zone, _node = self.pods
        behind = owned > 0
        anywhere = np.full(int(behind.sum()), -1, np.int64)
        return _Groups.of(
            (workload[behind], owned[behind], anywhere, anywhere),
            (len(self.names), len(self.sets), 0, 0),
        )

    def _rows(self, groups: _Groups) -> _Rows:
        """Every direction's calls from each client group to each Service its server's pods
        are behind: the client group's pods times the server group's, at the direction's rate
        (all of the pair's rate where the client is behind no Service, its replies included;
        else the way named), split evenly among the server's Services the client is not behind
        itself."""
        servers = self._servers
        direction = np.flatnonzero(servers.length[self.server] > 0)
        run, client = spans(
            groups.start[self.client[direction]], groups.length[self.client[direction]]
        )
        direction = direction[run]
        run, server = spans(
            servers.start[self.server[direction]], servers.length[self.server[direction]]
        )
        direction, client = direction[run], client[run]
        own, theirs = groups.services[client], servers.services[server]
        part = np.where(own == 0, self.full[direction], self.named[direction])
        count = part * groups.count[client] * servers.count[server]
        # Most are a client behind at most one Service calling a server behind one other.
        alone = len(self.routes.services)
        simple = (own <= alone) & (theirs <= alone)
        calls = simple & (own != theirs)
        one = _Rows(direction[calls], client[calls], theirs[calls] - 1, count[calls])
        several = self._several(
            direction[~simple], client[~simple], own[~simple], theirs[~simple], count[~simple]
        )
        found = one.plus(several)
        return found.without(found.rate <= 0)  # a way no series named

    def _several(
        self, direction: Indices, client: Indices, own: Indices, theirs: Indices, rate: Floats
    ) -> _Rows:
        """The rows where either side is behind several Services, each set pair's targets
        worked out once."""
        sets = len(self.sets)
        combos, combo = np.unique(own * sets + theirs, return_inverse=True)
        targets = [
            [n for n in self.sets[c % sets] if n not in self.sets[c // sets]]
            for c in combos.tolist()
        ]
        widths = np.array([len(t) for t in targets], np.int64)
        width = widths[combo]
        flat = np.array([n for t in targets for n in t], np.int64)
        run, target = spans((np.cumsum(widths) - widths)[combo], width)
        share = rate / np.maximum(width, 1)
        return _Rows(direction[run], client[run], flat[target], share[run])

    def rerouted(self, distributions: Mapping[str, Distribution]) -> WorkloadTraffic:
        """The traffic left to plan moves on once these Services route PreferSameZone: calls from
        a zone with a ready endpoint of theirs stay in it, and are taken out of their pair's
        rate; the rest, from zones without one, cross as today. A workload pair's rate is one
        share for every pod pair, which cannot say which endpoint in the zone a call reaches,
        so the calls kept in their zone are left out rather than kept as pairs in it (pod
        traffic keeps them): no move is planned for them."""
        routes = self.routes
        changed = np.array([s.key in distributions for s in routes.services], np.bool_)
        if not changed.any():
            return self.traffic
        endpoints = routes.endpoints
        slots = len(routes.zone_names) + 1
        ready = endpoints.ready & (endpoints.zone > 0) & changed[endpoints.service]
        covered = np.zeros(len(routes.services) * slots, np.bool_)
        covered[endpoints.service[ready] * slots + endpoints.zone[ready]] = True
        groups = self._groups(by_node=False)
        rows = self._rows(groups)
        local = covered[rows.target * slots + groups.zone[rows.client] + 1]
        count = len(self.traffic.rates)
        removed = group_sums(self.pair[rows.direction[local]], rows.rate[local], count)
        # The first `count` directions are each pair's first workload calling its second.
        first_way = group_sums(rows.direction[local], rows.rate[local], len(self.pair))[:count]
        return self._without(removed, first_way)

    def _without(self, removed: Floats, first_way: Floats) -> WorkloadTraffic:
        """The traffic with these rates (summed over each pair's pod pairs, and of them what
        the first workload sent) taken out of it."""
        traffic = self.traffic
        rates, forward = {}, {}
        for index, ((first, second), rate) in enumerate(traffic.rates.items()):
            pods = pair_count(traffic.members[first], traffic.members[second], first == second)
            left = rate - float(removed[index]) / pods
            if left <= _NOTHING * rate:
                continue
            rates[first, second] = left
            sent = traffic.forward.get((first, second), 0.0) - float(first_way[index]) / pods
            forward[first, second] = left / 2 if first == second else max(0.0, sent)
        return WorkloadTraffic(
            rates=rates,
            members=traffic.members,
            unmatched=traffic.unmatched,
            series=traffic.series,
            forward=forward,
        )


_NOTHING = 1e-9
"""A pair's rate cut to below this share of itself is gone, not rounding left over."""
