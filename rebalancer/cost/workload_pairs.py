"""Workload traffic held per pair of workloads, as Istio reports it.

A workload answer's rate is split evenly over the pod pairs of its two workloads (see
`WorkloadTraffic`), so every pod of a workload sends each pod of a peer workload the same share.
What a pod's traffic costs then depends only on how many pods of each peer workload share each of
its domains, and every figure can be counted from those numbers instead of pair by pair. The sums
are the pair-by-pair sums regrouped, so they are PodCostModel's on the same traffic up to
rounding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, product
from typing import cast

import networkx as nx

from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Domain, DomainKey, Location, Topology, first_split
from rebalancer.cost.figures import Figures, Price, Tally
from rebalancer.cost.model import HeavyDomain, PeerView, PodPricing, Worth
from rebalancer.cost.workload_counts import (
    DomainCounts,
    HeldTraffic,
    PairFigure,
    WorkloadPeers,
    add_count,
    pair_count,
)
from rebalancer.cost.workload_heavy import find_heavy_domains
from rebalancer.traffic.model import WorkloadTraffic


@dataclass
class WorkloadCostModel(PodPricing):
    """Workload traffic held workload pair by workload pair (see the module's docstring)."""

    workloads: WorkloadPeers
    topology: Topology
    locations: dict[str, Location]
    counts: list[DomainCounts]
    """Per workload, where its pods are now. Copies share a workload's counts until one of them
    moves a pod of it: a plan copies the model for every joint move it tries."""
    moved: dict[str, Domain] = field(default_factory=dict)
    _owned: set[int] = field(default_factory=set)
    """Workloads whose counts no other model shares."""
    _cost_at: dict[tuple[int, Location], float] = field(default_factory=dict)
    """(workload, location) -> what a pod of the workload costs there, before the pod itself is
    taken out of its own workload's counts: pods of a workload on one node share it."""
    _held_at: dict[int, HeldTraffic] = field(default_factory=dict)
    """Level -> the traffic each workload sends each domain there (`find_heavy_domains`):
    split-peers asks twice per level, for its moves and chains."""

    def __post_init__(self) -> None:
        self._split_weights = [level.weight for level in self.topology.levels] + [0.0]

    @classmethod
    def of(
        cls,
        traffic: WorkloadTraffic,
        topology: Topology,
        locations: Mapping[str, Location],
        min_pair_rate: float,
    ) -> WorkloadCostModel:
        """The model of the workload pairs whose pods' pairs carry at least `min_pair_rate`, as
        `EdgeArrays.of` keeps pod pairs, over the pods on a known node."""
        placed = {
            name: [pod for pod in pods if pod in locations]
            for name, pods in traffic.members.items()
        }
        kept = [
            (a, b, rate)
            for (a, b), rate in traffic.rates.items()
            if rate >= min_pair_rate and rate > 0 and pair_count(placed[a], placed[b], a == b)
        ]
        names = sorted({name for a, b, _rate in kept for name in (a, b)})
        number = {name: index for index, name in enumerate(names)}
        rates: list[dict[int, float]] = [{} for _ in names]
        for a, b, rate in kept:
            rates[number[a]][number[b]] = rates[number[b]][number[a]] = rate
        members = [placed[name] for name in names]
        of_pod = {pod: index for index, pods in enumerate(members) for pod in pods}
        levels = len(topology.levels)
        counts: list[DomainCounts] = []
        for pods in members:
            by_level: DomainCounts = [{} for _ in range(levels)]
            for location, count in Counter(locations[pod] for pod in pods).items():
                add_count(by_level, location, count)
            counts.append(by_level)
        return cls(
            WorkloadPeers(names, members, of_pod, rates),
            topology,
            {pod: locations[pod] for pod in of_pod},
            counts,
            _owned=set(range(len(names))),
        )

    @property
    def peers(self) -> Mapping[str, Mapping[str, float]]:
        return PeerView(self.workloads.of_pod, self._peers_of)

    def _peers_of(self, pod: str) -> dict[str, float]:
        """Every pod of each workload the pod's own talks to, itself aside."""
        members, rates = self.workloads.members, self.workloads.rates
        return {
            peer: rate
            for workload, rate in rates[self.workloads.of_pod[pod]].items()
            for peer in members[workload]
            if peer != pod
        }

    @property
    def graph(self) -> nx.Graph[str]:
        graph: nx.Graph[str] = nx.Graph()
        graph.add_weighted_edges_from(self._edges())
        return graph

    def _edges(self) -> Iterator[tuple[str, str, float]]:
        members = self.workloads.members
        for workload, peers in enumerate(self.workloads.rates):
            for peer, rate in peers.items():
                if peer == workload:
                    for a, b in combinations(members[workload], 2):
                        yield a, b, rate
                elif peer > workload:
                    for a, b in product(members[workload], members[peer]):
                        yield a, b, rate

    def edge_count(self) -> int:
        members = self.workloads.members
        return sum(
            pair_count(members[workload], members[peer], workload == peer)
            for workload, peers in enumerate(self.workloads.rates)
            for peer in peers
            if peer >= workload
        )

    def pod_cost(self, pod: str, location: Location | None = None) -> float:
        """From the counts of the workloads the pod talks to."""
        workload = self.workloads.of_pod[pod]
        here = self.locations[pod] if location is None else location
        cost = self._workload_cost_at(workload, here)
        within = self.workloads.rates[workload].get(workload)
        if within is not None:  # its own workload's pods were counted: the pod is no peer
            cost -= within * self._split_weights[first_split(here, self.locations[pod])]
        return cost

    def _workload_cost_at(self, workload: int, location: Location) -> float:
        key = (workload, location)
        cost = self._cost_at.get(key)
        if cost is None:
            cost = sum(
                rate * self._spread(peer, location)
                for peer, rate in self.workloads.rates[workload].items()
            )
            self._cost_at[key] = cost
        return cost

    def _spread(self, workload: int, location: Location) -> float:
        """The weights of the splits between `location` and each pod of the workload, summed:
        the pods inside location's domain at a level share it, the rest split there."""
        weights, counts = self._split_weights, self.counts[workload]
        above, total = len(self.workloads.members[workload]), 0.0
        split = len(location)
        for level, value in enumerate(location):
            if value is None:
                split = level
                break
            inside = counts[level].get(cast(DomainKey, location[: level + 1]), 0)
            total += weights[level] * (above - inside)
            above = inside
            if not above:
                return total
        return total + weights[split] * above

    def _several_gain(self, targets: Mapping[str, Domain]) -> float:
        """The pods move one after the other, each judged where the earlier ones went, and go
        back: the gains add up to the change of the whole cost, pairs among them counted once."""
        were = {pod: self.locations[pod] for pod in targets}
        saved = 0.0
        for pod, target in targets.items():
            after = self.topology.location_within(target)
            saved += self.pod_cost(pod) - self.pod_cost(pod, after)
            self._relocate(pod, after)
        for pod, location in were.items():
            self._relocate(pod, location)
        return saved

    def worths_alone(self, moves: Sequence[tuple[str, Domain]]) -> list[Worth | None]:
        """One by one: pods of a workload on one node share their costs (see _cost_at)."""
        return [self.worth({pod: target}) for pod, target in moves]

    def heavy_domains(
        self,
        levels: range,
        min_share: float,
        *,
        above_home: bool = True,
        heaviest: int | None = None,
    ) -> list[HeavyDomain]:
        """Per workload, from the counts (see `find_heavy_domains`)."""
        return find_heavy_domains(
            self, self._held_at, levels, min_share, above_home=above_home, heaviest=heaviest
        )

    def group_traffic(self, members: Collection[str]) -> tuple[float, float]:
        """Per workload: each member of one talks to as many members of a peer workload."""
        rates, pods_of = self.workloads.rates, self.workloads.members
        inside = Counter(self.workloads.of_pod[pod] for pod in members)
        internal = external = 0.0
        for workload, count in inside.items():
            for peer, rate in rates[workload].items():
                itself = peer == workload  # a pod is not its own peer
                together = inside.get(peer, 0) - itself
                internal += count * rate * together / 2
                external += count * rate * (len(pods_of[peer]) - itself - together)
        return internal, external

    def untouched(self, pod: str) -> bool:
        """Neither the pod nor any pod of a workload it talks to has moved."""
        of_pod = self.workloads.of_pod
        peers = self.workloads.rates[of_pod[pod]]
        return pod not in self.moved and not any(of_pod[other] in peers for other in self.moved)

    def move(self, pod: str, target: Domain) -> None:
        self._relocate(pod, self.topology.location_within(target))
        self.moved[pod] = target

    def _relocate(self, pod: str, location: Location) -> None:
        workload = self.workloads.of_pod[pod]
        if workload not in self._owned:
            self.counts[workload] = [dict(at_level) for at_level in self.counts[workload]]
            self._owned.add(workload)
        add_count(self.counts[workload], self.locations[pod], -1)
        add_count(self.counts[workload], location, 1)
        self.locations[pod] = location
        self._cost_at.clear()
        self._held_at.clear()

    def copy(self) -> WorkloadCostModel:
        self._owned.clear()  # shared from now on: whichever moves first copies
        return WorkloadCostModel(
            self.workloads, self.topology, dict(self.locations), list(self.counts), dict(self.moved)
        )

    def figures(self, snapshot: Snapshot, price: Price) -> Figures:
        return self.tally(snapshot).figures(self.topology, price)

    def tally(self, snapshot: Snapshot) -> Tally:
        """Counted per workload pair; the names are the workloads', as pods carry them."""
        names = self.workloads.names
        tally = Tally(
            self._split_weights,
            {pod: names[workload] for pod, workload in self.workloads.of_pod.items()},
        )
        for workload, peer in self._pairs(range(len(names))):
            figure = self._pair_figure(workload, peer)
            for split, rate in enumerate(figure.split_at):
                tally.split_at[split] += rate
            tally.total += figure.rate
            tally.weighted += figure.cost
            tally.pairs[names[workload], names[peer]] = [figure.rate, figure.cost]
        return tally

    def retally(self, tally: Tally, original: WorkloadCostModel) -> Tally:
        """Re-counts the workload pairs with a pod moved since `original`."""
        changed = tally.copy()
        names = self.workloads.names
        touched = {self.workloads.of_pod[pod] for pod in self.moved}
        for workload, peer in self._pairs(sorted(touched)):
            was, now = original._pair_figure(workload, peer), self._pair_figure(workload, peer)
            for split, (before, after) in enumerate(zip(was.split_at, now.split_at, strict=True)):
                changed.split_at[split] += after - before
            changed.weighted += now.cost - was.cost
            changed.pairs[names[workload], names[peer]] = [now.rate, now.cost]
        return changed

    def _pairs(self, workloads: Sequence[int]) -> list[tuple[int, int]]:
        """Each workload pair with traffic and one of these workloads in it, once, the lower
        number first: workloads are numbered in the order of their names, as `Tally.pairs`
        keys hold them."""
        rates = self.workloads.rates
        return sorted({(min(w, peer), max(w, peer)) for w in workloads for peer in rates[w]})

    def _pair_figure(self, workload: int, peer: int) -> PairFigure:
        """Counts the pod pairs of two workloads by the widest level they split at: pairs that
        share a domain are the products of the two workloads' counts in it (a workload's pairs
        among its own pods, c * (c - 1) / 2)."""
        members, counts = self.workloads.members, self.counts
        rate = self.workloads.rates[workload][peer]
        same = workload == peer
        levels = len(self.topology.levels)
        sharing = [pair_count(members[workload], members[peer], same)]
        for level in range(levels):
            mine, theirs = counts[workload][level], counts[peer][level]
            if same:
                sharing.append(sum(count * (count - 1) // 2 for count in mine.values()))
            else:
                smaller, larger = (mine, theirs) if len(mine) <= len(theirs) else (theirs, mine)
                sharing.append(sum(c * larger.get(key, 0) for key, c in smaller.items()))
            if not sharing[-1]:
                break  # no pair shares this level's domains, so none shares a finer one
        sharing += [0] * (levels + 2 - len(sharing))
        split_at = [rate * (sharing[s] - sharing[s + 1]) for s in range(len(sharing) - 1)]
        cost = sum(
            part * weight for part, weight in zip(split_at, self._split_weights, strict=True)
        )
        return PairFigure(split_at, rate * sharing[0], cost)
