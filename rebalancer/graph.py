"""The communication graph (pods as vertices, traffic rates as weights) and the figures every
report is made of: total traffic, traffic crossing each level, weighted cost and what it bills.

The cost model lives here too, because the planner, the strategies and the reports must agree to the
last digit on what a placement costs: a gain the planner counts is exactly the drop in the figure.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, NamedTuple, Protocol, Self, cast

import msgspec
import networkx as nx
import numpy as np
import numpy.typing as npt

from rebalancer.snapshot import Snapshot
from rebalancer.topology import Domain, DomainKey, Location, Topology, first_split

if TYPE_CHECKING:  # traffic.py reads this module's array types
    from rebalancer.traffic import PodTraffic

SECONDS_PER_MONTH = 30.4375 * 24 * 3600
"""An average month (365.25 / 12 days), the period cloud bills are read in."""


@dataclass(frozen=True)
class Price:
    per_gb_cross_zone: float
    bytes_per_unit: float | None
    """Bytes per unit of rate; None when the unit cannot be converted, so no cost is claimed."""
    zone_level: int


class WorkloadPairFigure(msgspec.Struct, frozen=True, gc=False):
    """A Struct: a plan's figures hold one per pair of workloads that talk (91k at 100k pods),
    twice, and 182k took 0.07 s to make as frozen dataclasses, 0.02 s as Structs."""

    workloads: tuple[str, str]
    rate: float
    weighted_cost: float


@dataclass(frozen=True)
class Figures:
    total: float
    crossing: dict[str, float]
    weighted_cost: float
    monthly_cross_zone_cost: float | None
    by_workload_pair: tuple[WorkloadPairFigure, ...] = ()


Indices = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


def spans(starts: Indices, lengths: Indices) -> tuple[Indices, Indices]:
    """The positions of several runs of an array laid end to end, run starts[i] being
    lengths[i] long, with the number i of the run each position is in: how one row per pod
    gathers each pod's pairs from arrays grouped by pod."""
    run = np.repeat(np.arange(len(starts)), lengths)
    offsets = np.cumsum(lengths) - lengths
    return run, np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))


def group_sums(groups: Indices, values: Floats, count: int) -> Floats:
    """values summed per group number, 0..count-1. In input order: np.bincount adds as it goes,
    so the sums are those of a loop over the same values."""
    return np.bincount(groups, values, count).astype(np.float64, copy=False)


def unique_in_runs(keys: Indices) -> tuple[Indices, Indices]:
    """np.unique(keys, return_inverse=True) for keys that come in runs already (each pod's pairs
    together, its number the high part of the key): a stable sort keeps the runs and sorts only
    within them, where np.unique sorts from scratch. For 2M keys, 0.02 s against 0.15 s."""
    found, position, _starts = _grouped(keys, np.argsort(keys, kind="stable"))
    return found, position


def stable_order(keys: Indices) -> Indices:
    """np.argsort(keys, kind="stable") for non-negative keys: an unstable sort of the keys made
    unique by their positions gives the same order. For 2M pod numbers, 0.04 s against 0.16 to
    0.20 s; the stable sort is kept where the product would not fit in 64 bits."""
    count = len(keys)
    if not count or int(keys.max()) >= np.iinfo(np.int64).max // count - 1:
        return np.argsort(keys, kind="stable")
    return np.argsort(keys * count + np.arange(count))


def unique_first_seen(keys: Indices) -> tuple[Indices, Indices, Indices]:
    """np.unique(keys, return_index=True, return_inverse=True), the same three arrays, from an
    unstable sort and the least position per key: asked for the first of each key, np.unique
    sorts stably, which for a million random keys took 0.11 s against 0.04 s here (2M: 0.36 s
    against 0.13 s)."""
    order = np.argsort(keys)
    found, position, starts = _grouped(keys, order)
    first_seen = np.minimum.reduceat(order, np.flatnonzero(starts)) if len(keys) else order
    return found, first_seen, position


def _grouped(keys: Indices, order: Indices) -> tuple[Indices, Indices, npt.NDArray[np.bool_]]:
    """Given the order that sorts `keys`: each distinct key once, in order; each key's place
    among them; and where in the sorted keys each distinct key starts."""
    ordered = keys[order]
    starts = np.ones(len(keys), np.bool_)
    starts[1:] = ordered[1:] != ordered[:-1]
    position = np.empty(len(keys), np.int64)
    position[order] = np.cumsum(starts) - 1
    return ordered[starts], position, starts


@dataclass(frozen=True)
class DomainNumbers:
    of_pod: Indices
    """Per level (rows) and pod (columns, as in EdgeArrays.pods), a number for the pod's domain
    there, shared by the pods of one domain; -1 where it is unknown, from the first unknown
    level down, as `first_split` reads a location."""
    keys: list[DomainKey]
    """Number -> the domain's key; its length tells the level."""


@dataclass(frozen=True)
class EdgeArrays:
    """The communication graph, pods numbered, as arrays: the passes over every pair at once
    (the tally, a strategy's traffic per domain) took seconds per million pairs in Python.

    Every pair is here both ways round, grouped by source. A pod's peers (see `peers_of`) are
    read from here in the same order, and `np.bincount` adds in input order, so sums taken over
    the arrays are bit for bit the ones a loop over each pod's peers makes."""

    pods: tuple[str, ...]
    index: dict[str, int]
    source: Indices
    target: Indices
    rate: Floats
    once: npt.NDArray[np.bool_]
    """The direction `PodCostModel.edges` yields each pair in: from the pod whose key sorts
    first."""
    start: Indices
    """Where each pod's pairs start; one more entry, the number of pairs both ways round."""

    @classmethod
    def of(cls, traffic: PodTraffic, placed: Mapping[str, object], min_pair_rate: float) -> Self:
        """The pairs above the threshold whose both pods are placed on a known node, numbered
        in the order of `placed`, all in numpy."""
        number = {pod: index for index, pod in enumerate(traffic.pods)}
        placed_as = np.full(len(traffic.pods), -1, np.int64)  # traffic's number -> placed's
        known = np.fromiter(map(number.get, placed, repeat(-1)), np.int64, len(placed))
        placed_as[known[known >= 0]] = np.flatnonzero(known >= 0)
        first, second = placed_as[traffic.first], placed_as[traffic.second]
        rate = traffic.rate
        kept = (rate >= min_pair_rate) & (rate > 0) & (first >= 0) & (second >= 0)
        first, second, rate = first[kept], second[kept], rate[kept]
        paired = np.zeros(len(placed), np.bool_)
        paired[first] = paired[second] = True
        present = np.flatnonzero(paired)  # the placed pods with a pair, in the order of `placed`
        names = tuple(placed)
        pods = tuple(names[position] for position in present.tolist())
        renumbered = np.cumsum(paired) - 1
        first, second = renumbered[first], renumbered[second]
        either_way = np.concatenate([first, second])
        by_source = stable_order(either_way)
        source = either_way[by_source]
        target = np.concatenate([second, first])[by_source]
        rate = np.concatenate([rate, rate])[by_source]
        start = np.zeros(len(pods) + 1, np.int64)
        np.cumsum(np.bincount(source, minlength=len(pods)), out=start[1:])
        once = by_source < len(first)  # from `first`: the pod whose key sorts first (PodTraffic)
        index = {pod: position for position, pod in enumerate(pods)}
        return cls(pods, index, source, target, rate, once, start)

    def peers_of(self, pod: str) -> dict[str, float]:
        """Peer -> rate, in the order of the arrays."""
        position = self.index[pod]
        pairs = slice(self.start[position], self.start[position + 1])
        return dict(
            zip(
                map(self.pods.__getitem__, self.target[pairs].tolist()),
                self.rate[pairs].tolist(),
                strict=True,
            )
        )

    def domain_ids(self, locations: Mapping[str, Location], levels: int) -> DomainNumbers:
        """Numbers for the pods' domains at every level. Worked out once per distinct location:
        a cluster has far fewer of those (one per node) than pods."""
        numbered: dict[Location, int] = {}
        location_of = np.fromiter(
            (numbered.setdefault(locations[pod], len(numbered)) for pod in self.pods),
            np.int64,
            len(self.pods),
        )
        by_location = np.full((levels, len(numbered)), -1, np.int64)
        domains: dict[DomainKey, int] = {}
        for location, number in numbered.items():
            for level in range(levels):
                value = location[level]
                if value is None:
                    break
                key = cast(DomainKey, location[: level + 1])  # no None: checked on the way
                by_location[level, number] = domains.setdefault(key, len(domains))
        return DomainNumbers(by_location[:, location_of], list(domains))

    def traffic_per_pod(self) -> Floats:
        """Each pod's total rate, summed in the order of its peers."""
        return group_sums(self.source, self.rate, len(self.pods))

    def splits(self, numbers: DomainNumbers, source: Indices, target: Indices) -> Indices:
        """`first_split` of every pair (source[i], target[i]): domain numbers name the whole
        prefix of a location, so the pods share exactly the levels, widest first, whose numbers
        match."""
        here, there = numbers.of_pod[:, source], numbers.of_pod[:, target]
        shared: Indices = ((here == there) & (here >= 0)).sum(axis=0)
        return shared


class Worth(msgspec.Struct, frozen=True, gc=False):
    """A Struct, cheap to make: the planner judges candidates in batches of thousands."""

    gain: float
    """Weighted cost saved."""
    cost: float
    """What the moving pods cost now: a gain is judged as a share of it."""


class HeavyDomain(NamedTuple):
    """A domain holding much of a pod's traffic, as split-peers looks for them."""

    pod: str
    level: int
    weight: float
    """The pod's traffic to peers in the domain."""
    share: float
    key: DomainKey
    gain: float
    """What moving the pod alone into the domain saves."""


class CostModel(Protocol):
    """Pod locations and the cost they imply; the planner moves pods in a copy to predict the
    result. Pod traffic is held pair by pair (PodCostModel), workload traffic workload pair by
    workload pair (WorkloadCostModel), to the same figures: strategies and the planner read both
    alike."""

    topology: Topology
    locations: dict[str, Location]
    """Every pod with traffic, where it is (or, once moved, what is known of where it goes)."""
    moved: dict[str, Domain]

    @property
    def peers(self) -> Mapping[str, Mapping[str, float]]:
        """Pod -> peer -> rate."""

    @property
    def graph(self) -> nx.Graph[str]:
        """The graph in networkx, for its algorithms (Louvain)."""

    def edge_count(self) -> int: ...

    def gain(self, pod: str, target: Domain) -> float:
        """Cost saved by moving `pod` into `target`, assuming nothing below the target's level."""

    def worth(self, targets: Mapping[str, Domain]) -> Worth:
        """What moving these pods at once saves, and what they cost now."""

    def joint_gain(self, targets: Mapping[str, Domain]) -> float:
        """Cost saved by moving several pods at once; traffic between two of them counts once."""

    def worths_alone(self, moves: Sequence[tuple[str, Domain]]) -> list[Worth | None]:
        """`worth` of each move of one pod on this model as it is, for many at once; None where
        it is left to `worth`."""

    def heavy_domains(self, levels: range, min_share: float) -> list[HeavyDomain]:
        """Every pod and domain at these levels holding at least `min_share` of the pod's
        traffic, and more of it than the pod's own domain there."""

    def group_traffic(self, members: Collection[str]) -> tuple[float, float]:
        """The traffic among these pods, each pair once, and between them and all others."""

    def untouched(self, pod: str) -> bool:
        """Whether the pod's cost is as it was before any move in this model."""

    def move(self, pod: str, target: Domain) -> None: ...

    def copy(self) -> Self:
        """A model to move pods in, leaving this one as it is."""

    def tally(self, snapshot: Snapshot) -> Tally:
        """The sums behind the figures, over every pair."""

    def retally(self, tally: Tally, original: Self) -> Tally:
        """`tally` of the `original` model, changed to this copy of it by re-counting only what
        the moves since changed: a plan's figures without a second pass over the whole graph."""

    def figures(self, snapshot: Snapshot, price: Price) -> Figures: ...


class PodPricing(ABC):
    """A move's gain and worth, the same for both models, from what one pod costs."""

    topology: Topology

    @abstractmethod
    def pod_cost(self, pod: str, location: Location | None = None) -> float:
        """What the pod's traffic costs where it is, or at `location`."""

    @abstractmethod
    def _several_gain(self, targets: Mapping[str, Domain]) -> float:
        """`joint_gain` of two pods or more."""

    def gain(self, pod: str, target: Domain) -> float:
        """Cost saved by moving `pod` into `target`, assuming nothing below the target's level."""
        return self.pod_cost(pod) - self.pod_cost(pod, self.topology.location_within(target))

    def worth(self, targets: Mapping[str, Domain]) -> Worth:
        """What moving these pods saves, and what they cost now, from one pass when one pod moves:
        the planner judges every candidate by both."""
        if len(targets) == 1:
            ((pod, target),) = targets.items()
            now = self.pod_cost(pod)
            return Worth(now - self.pod_cost(pod, self.topology.location_within(target)), now)
        return Worth(self.joint_gain(targets), sum(self.pod_cost(pod) for pod in targets))

    def joint_gain(self, targets: Mapping[str, Domain]) -> float:
        """Cost saved by moving several pods at once; traffic between two of them counts once."""
        if len(targets) == 1:
            ((pod, target),) = targets.items()
            return self.gain(pod, target)
        return self._several_gain(targets)


@dataclass
class PodCostModel(PodPricing):
    """Pod traffic held pair by pair."""

    arrays: EdgeArrays
    """Shared, never changed, by the model's copies. Locations are not in them, so moving pods
    in a model leaves them true."""
    topology: Topology
    locations: dict[str, Location]
    moved: dict[str, Domain] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    """The pods moved and their peers: those whose cost a move has changed. The planner asks
    for every candidate it pops, tens of thousands of times at 100k pods."""

    def __post_init__(self) -> None:
        self._split_weights = [level.weight for level in self.topology.levels] + [0.0]
        self._numbers: DomainNumbers | None = None

    def domain_ids(self) -> DomainNumbers:
        """`EdgeArrays.domain_ids` of where the pods are in this model now. Kept until a pod
        moves: a cycle asked for them three times on the same model (split-peers, the tally,
        the planner's batch of worths), 0.2 s each at 100k pods."""
        if self._numbers is None:
            self._numbers = self.arrays.domain_ids(self.locations, len(self.topology.levels))
        return self._numbers

    @functools.cached_property
    def graph(self) -> nx.Graph[str]:
        """The same graph in networkx, built on first use, for its algorithms (Louvain)."""
        graph: nx.Graph[str] = nx.Graph()
        graph.add_weighted_edges_from(self.edges())
        return graph

    @property
    def peers(self) -> Mapping[str, Mapping[str, float]]:
        """Each pod's peers, read from the arrays when asked for."""
        return PeerView(self.arrays.pods, self.arrays.peers_of)

    def edge_count(self) -> int:
        return int(self.arrays.once.sum())

    def pod_cost(self, pod: str, location: Location | None = None) -> float:
        """Pair by pair."""
        here = self.locations[pod] if location is None else location
        locations, weights = self.locations, self._split_weights
        return sum(
            rate * weights[first_split(here, locations[peer])]
            for peer, rate in self.arrays.peers_of(pod).items()
        )

    def gains_and_costs(
        self, numbers: DomainNumbers, pods: Indices, domains: Indices, level: int
    ) -> tuple[Floats, Floats]:
        """`worth` of moving each pod pods[i] (an index into EdgeArrays.pods) alone into the
        domain numbered domains[i] at `level`, as gains and costs now, for many moves at once:
        the same products summed in the same order (each pod's peers in turn), in numpy.
        `numbers` must be of this model's locations."""
        arrays, weights = self.arrays, np.array(self._split_weights)
        first_edge = arrays.start[pods]
        row, edge = spans(first_edge, arrays.start[pods + 1] - first_edge)  # row by row
        peer, rate = arrays.target[edge], arrays.rate[edge]
        numbered = {key: number for number, key in enumerate(numbers.keys)}
        keys = [numbers.keys[domain] for domain in domains.tolist()]
        shared_after = np.zeros(len(edge), np.int64)
        for wider in range(level + 1):  # below `level` a planned pod's place is unknown
            ancestor = np.fromiter(
                (numbered[key[: wider + 1]] for key in keys), np.int64, len(keys)
            )
            shared_after += numbers.of_pod[wider][peer] == ancestor[row]
        now = group_sums(row, rate * weights[arrays.splits(numbers, pods[row], peer)], len(pods))
        return now - group_sums(row, rate * weights[shared_after], len(pods)), now

    def worths_alone(self, moves: Sequence[tuple[str, Domain]]) -> list[Worth | None]:
        """In numpy, level by level (see gains_and_costs). A target where no pod of the graph
        is (no number) is left to `worth`."""
        numbers = self.domain_ids()
        numbered = {key: number for number, key in enumerate(numbers.keys)}
        rows: dict[int, list[tuple[int, int, int]]] = {}
        for position, (pod, target) in enumerate(moves):
            pod_number, domain = self.arrays.index.get(pod), numbered.get(target.key)
            if pod_number is not None and domain is not None:
                rows.setdefault(target.level, []).append((position, pod_number, domain))
        judged: list[Worth | None] = [None] * len(moves)
        for level, at_level in rows.items():
            positions, pods, domains = np.array(at_level, np.int64).T
            gains, costs = self.gains_and_costs(numbers, pods, domains, level)
            for position, gain, now in zip(
                positions.tolist(), gains.tolist(), costs.tolist(), strict=True
            ):
                judged[position] = Worth(gain, now)
        return judged

    def heavy_domains(self, levels: range, min_share: float) -> list[HeavyDomain]:
        """From one numpy pass over every pair per level: summing per domain in a Python loop
        over every pod's peers took seconds at a million pairs."""
        numbers = self.domain_ids()
        total = self.arrays.traffic_per_pod()
        return [row for level in levels for row in self._heavy_at(numbers, total, level, min_share)]

    def _heavy_at(
        self, numbers: DomainNumbers, total: Floats, level: int, min_share: float
    ) -> list[HeavyDomain]:
        arrays, of_pod = self.arrays, numbers.of_pod[level]
        peer_domain = of_pod[arrays.target]
        known = peer_domain >= 0  # peers whose domain is unknown count only in the total
        if not known.any():
            return []
        width = len(numbers.keys)
        found, position = unique_in_runs(arrays.source[known] * width + peer_domain[known])
        weight = group_sums(position, arrays.rate[known], len(found))
        pod, domain = found // width, found % width
        own = of_pod[pod]
        at_home = domain == own
        local = np.zeros(len(arrays.pods))
        local[pod[at_home]] = weight[at_home]
        share = weight / total[pod]
        chosen = (own >= 0) & ~at_home & (share >= min_share) & (weight > local[pod])
        gain, _cost = self.gains_and_costs(numbers, pod[chosen], domain[chosen], level)
        return [
            HeavyDomain(arrays.pods[p], level, w, s, numbers.keys[d], g)
            for p, w, s, d, g in zip(
                pod[chosen].tolist(),
                weight[chosen].tolist(),
                share[chosen].tolist(),
                domain[chosen].tolist(),
                gain.tolist(),
                strict=True,
            )
        ]

    def group_traffic(self, members: Collection[str]) -> tuple[float, float]:
        """From the members' rows of the arrays; each internal pair is met from both ends."""
        arrays = self.arrays
        inside = np.fromiter(map(arrays.index.__getitem__, members), np.int64, len(members))
        first_edge = arrays.start[inside]
        _row, edge = spans(first_edge, arrays.start[inside + 1] - first_edge)
        rate, internal = arrays.rate[edge], np.isin(arrays.target[edge], inside)
        return float(rate[internal].sum()) / 2, float(rate[~internal].sum())

    def untouched(self, pod: str) -> bool:
        """Neither the pod nor any of its peers has moved."""
        return pod not in self.touched

    def _several_gain(self, targets: Mapping[str, Domain]) -> float:
        planned = {pod: self.topology.location_within(d) for pod, d in targets.items()}
        saved = 0.0
        for pod, after in planned.items():
            for peer, rate in self.arrays.peers_of(pod).items():
                if peer in planned and peer < pod:
                    continue  # counted from the other end
                before = self.topology.distance(self.locations[pod], self.locations[peer])
                now = self.topology.distance(after, planned.get(peer, self.locations[peer]))
                saved += rate * (before - now)
        return saved

    def edges(self) -> Iterator[tuple[str, str, float]]:
        """Each pair once, with its rate, grouped by the pod whose key sorts first."""
        arrays, once = self.arrays, self.arrays.once
        for source, target, rate in zip(
            arrays.source[once].tolist(),
            arrays.target[once].tolist(),
            arrays.rate[once].tolist(),
            strict=True,
        ):
            yield arrays.pods[source], arrays.pods[target], rate

    def move(self, pod: str, target: Domain) -> None:
        self.locations[pod] = self.topology.location_within(target)
        self._numbers = None
        self.moved[pod] = target
        self.touched.add(pod)
        self.touched.update(self.arrays.peers_of(pod))

    def copy(self) -> PodCostModel:
        copied = PodCostModel(
            self.arrays, self.topology, dict(self.locations), dict(self.moved), set(self.touched)
        )
        copied._numbers = self._numbers  # of the same locations, and never changed in place
        return copied

    def figures(self, snapshot: Snapshot, price: Price) -> Figures:
        return self.tally(snapshot).figures(self.topology, price)

    def tally(self, snapshot: Snapshot) -> Tally:
        """The sums behind the figures, over every pair, in numpy: the same sums, in the same
        order, as counting each pair of `edges` into a Tally (see EdgeArrays)."""
        names = {pod: _workload_name(snapshot, pod) for pod in self.arrays.pods}
        arrays = self.arrays
        source, target = arrays.source[arrays.once], arrays.target[arrays.once]
        rate = arrays.rate[arrays.once]
        split = arrays.splits(self.domain_ids(), source, target)
        cost = rate * np.array(self._split_weights)[split]
        workloads = sorted(set(names.values()))
        number = {name: index for index, name in enumerate(workloads)}
        workload = np.fromiter((number[names[pod]] for pod in arrays.pods), np.int64)
        first, second = workload[source], workload[target]
        pair = np.minimum(first, second) * len(workloads) + np.maximum(first, second)
        pairs, first_seen, position = unique_first_seen(pair)
        pair_rate = group_sums(position, rate, len(pairs))
        pair_cost = group_sums(position, cost, len(pairs))
        in_order = np.argsort(first_seen)  # as a loop meets them: ties in a report keep it
        everything = np.zeros(len(rate), np.int64)
        return Tally(
            self._split_weights,
            names,
            group_sums(split, rate, len(self._split_weights)).tolist(),
            float(group_sums(everything, rate, 1)[0]),
            float(group_sums(everything, cost, 1)[0]),
            {
                (workloads[key // len(workloads)], workloads[key % len(workloads)]): [r, c]
                for key, r, c in zip(
                    pairs[in_order].tolist(),
                    pair_rate[in_order].tolist(),
                    pair_cost[in_order].tolist(),
                    strict=True,
                )
            },
        )

    def retally(self, tally: Tally, original: PodCostModel) -> Tally:
        """Re-counts the pairs of the pods moved since `original`."""
        changed = tally.copy()
        for pod in self.moved:
            for peer, rate in self.arrays.peers_of(pod).items():
                if peer in self.moved and peer < pod:
                    continue  # counted from the other end
                was = first_split(original.locations[pod], original.locations[peer])
                now = first_split(self.locations[pod], self.locations[peer])
                changed.count(pod, peer, rate, was, -1.0)
                changed.count(pod, peer, rate, now, 1.0)
        return changed


class PeerView(Mapping[str, Mapping[str, float]]):
    """Pod -> peer -> rate, each pod's peers worked out only when read: both models hold their
    traffic in another shape, and a million pairs spelled out as dicts took seconds to build."""

    def __init__(self, pods: Collection[str], peers_of: Callable[[str], dict[str, float]]) -> None:
        self._pods = pods
        self._peers_of = peers_of

    def __getitem__(self, pod: str) -> dict[str, float]:
        return self._peers_of(pod)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pods)

    def __len__(self) -> int:
        return len(self._pods)


@dataclass
class Tally:
    """Running sums: traffic by the widest level it crosses (crossing a level means crossing
    every level below it), and rate and cost per pair of workloads."""

    weights: list[float]
    """Cost per unit of rate by widest split; the last entry, 0, is for pods that share all."""
    names: dict[str, str]
    """Pod -> its workload's name, read once."""
    split_at: list[float] = field(default_factory=list)
    total: float = 0.0
    weighted: float = 0.0
    pairs: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.split_at:
            self.split_at = [0.0] * len(self.weights)

    def count(self, a: str, b: str, rate: float, split: int, sign: float) -> None:
        cost = sign * rate * self.weights[split]
        self.split_at[split] += sign * rate
        self.total += sign * rate
        self.weighted += cost
        name_a, name_b = self.names[a], self.names[b]
        figure = self.pairs.setdefault(
            (name_a, name_b) if name_a <= name_b else (name_b, name_a), [0.0, 0.0]
        )
        figure[0] += sign * rate
        figure[1] += cost

    def copy(self) -> Tally:
        pairs = {key: list(figure) for key, figure in self.pairs.items()}
        return Tally(
            self.weights, self.names, list(self.split_at), self.total, self.weighted, pairs
        )

    def figures(self, topology: Topology, price: Price) -> Figures:
        levels = topology.levels
        # A re-count subtracts what it adds elsewhere: rounding may leave -1e-16 where 0 is meant.
        crossing = {
            level.name: max(0.0, sum(self.split_at[: index + 1]))
            for index, level in enumerate(levels)
        }
        cross_zone = crossing[levels[price.zone_level].name]
        monthly = None
        if price.bytes_per_unit is not None:
            gigabytes = cross_zone * price.bytes_per_unit * SECONDS_PER_MONTH / 1e9
            monthly = gigabytes * price.per_gb_cross_zone
        breakdown = tuple(
            WorkloadPairFigure(pair, rate, cost)
            for pair, (rate, cost) in sorted(self.pairs.items(), key=lambda item: -item[1][1])
        )
        return Figures(self.total, crossing, max(0.0, self.weighted), monthly, breakdown)


def _workload_name(snapshot: Snapshot, pod_key: str) -> str:
    pod = snapshot.pods[pod_key]
    return str(pod.workload) if pod.workload else f"Pod/{pod_key}"
