"""Pod traffic held pair by pair: the cost model for pod-level sources such as Hubble."""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from rebalancer.arrays import Floats, Indices, group_sums, spans, unique_first_seen, unique_in_runs
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Domain, Location, Topology, first_split
from rebalancer.cost.edge_arrays import DomainNumbers, EdgeArrays
from rebalancer.cost.figures import Figures, Price, Tally, workload_name
from rebalancer.cost.model import HeavyDomain, PeerView, PodPricing, Worth


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
        self._held_at: dict[int, tuple[Indices, Indices, Floats]] = {}
        self._home_at: dict[int, tuple[Floats, Floats]] = {}

    def domain_ids(self) -> DomainNumbers:
        """`EdgeArrays.domain_ids` of where the pods are in this model now. Kept until a pod
        moves: a cycle asks for them three times on the same model (split-peers, the tally,
        the planner's batch of worths)."""
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

    def gains(self, pod: str, targets: Sequence[Domain]) -> list[float]:
        """As `gain` for each target, each sum in the same order: the pod's peers read once."""
        arrays, locations, weights = self.arrays, self.locations, self._split_weights
        position = arrays.index[pod]
        pairs = slice(arrays.start[position], arrays.start[position + 1])
        names = arrays.pods
        where = [locations[names[peer]] for peer in arrays.target[pairs].tolist()]
        rates = arrays.rate[pairs].tolist()
        here = locations[pod]
        now = sum(
            rate * weights[first_split(here, there)]
            for rate, there in zip(rates, where, strict=True)
        )
        found = []
        for target in targets:
            inside = self.topology.location_within(target)
            cost = sum(
                rate * weights[first_split(inside, at)]
                for rate, at in zip(rates, where, strict=True)
            )
            found.append(now - cost)
        return found

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
        # Levels not in force just below `level` are every node's, so a peer in the target
        # shares them too: the pair first splits at the next level in force.
        below = level + 1
        while below in self.topology.not_in_force:
            below += 1
        shared_after[shared_after == level + 1] = below
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

    def heavy_domains(
        self,
        levels: range,
        min_share: float,
        *,
        above_home: bool = True,
        heaviest: int | None = None,
    ) -> list[HeavyDomain]:
        """From one numpy pass over every pair per level: summing per domain in a Python loop
        over every pod's peers took seconds at a million pairs."""
        numbers = self.domain_ids()
        total = self.arrays.traffic_per_pod()
        return [
            row
            for level in levels
            for row in self._heavy_at(
                numbers, total, level, min_share, above_home=above_home, heaviest=heaviest
            )
        ]

    def _heavy_at(
        self,
        numbers: DomainNumbers,
        total: Floats,
        level: int,
        min_share: float,
        *,
        above_home: bool,
        heaviest: int | None,
    ) -> list[HeavyDomain]:
        held = self._held(numbers, level)
        if held is None:
            return []
        arrays, of_pod = self.arrays, numbers.of_pod[level]
        pod, domain, weight = held
        own = of_pod[pod]
        scope, scope_level = total[pod], np.full(len(pod), -1)
        narrowing = np.ones(len(pod), bool)
        for wider in range(level):  # widest first, on while the pod stays where it belongs
            home = numbers.of_pod[wider][pod]
            local, most = self._home_traffic(numbers, wider)
            narrowing &= (numbers.holding(wider)[domain] == home) & (home >= 0)
            narrowing &= local[pod] >= most[pod]
            scope = np.where(narrowing, local[pod], scope)
            scope_level[narrowing] = wider
        share = weight / scope
        chosen = (own >= 0) & (domain != own) & (share >= min_share)
        if above_home:
            chosen &= weight > self._home_traffic(numbers, level)[0][pod]
        if heaviest is not None and chosen.sum() > heaviest:
            found_rows = np.flatnonzero(chosen)
            kept = found_rows[np.argsort(-weight[found_rows], kind="stable")[:heaviest]]
            chosen = np.zeros(len(chosen), bool)
            chosen[kept] = True
        gain, _cost = self.gains_and_costs(numbers, pod[chosen], domain[chosen], level)
        return [
            HeavyDomain(arrays.pods[p], level, w, s, numbers.keys[d], g, within)
            for p, w, s, d, g, within in zip(
                pod[chosen].tolist(),
                weight[chosen].tolist(),
                share[chosen].tolist(),
                domain[chosen].tolist(),
                gain.tolist(),
                scope_level[chosen].tolist(),
                strict=True,
            )
        ]

    def _home_traffic(self, numbers: DomainNumbers, level: int) -> tuple[Floats, Floats]:
        """Each pod's traffic to peers in its own domain at `level`, and the most it sends any
        other domain there. Kept as `_held` is."""
        if level not in self._home_at:
            local, most = np.zeros(len(self.arrays.pods)), np.zeros(len(self.arrays.pods))
            held = self._held(numbers, level)
            if held is not None:
                pod, domain, weight = held
                at_home = domain == numbers.of_pod[level][pod]
                local[pod[at_home]] = weight[at_home]
                np.maximum.at(most, pod[~at_home], weight[~at_home])
            self._home_at[level] = local, most
        return self._home_at[level]

    def _held(self, numbers: DomainNumbers, level: int) -> tuple[Indices, Indices, Floats] | None:
        """Each pod's traffic to each domain at `level` where it has peers, as pod, domain and
        weight arrays; None when no peer's domain is known. Kept until a pod moves: split-peers
        asks twice per level, for its moves and its chains."""
        if level in self._held_at:
            return self._held_at[level]
        arrays, of_pod = self.arrays, numbers.of_pod[level]
        peer_domain = of_pod[arrays.target]
        known = peer_domain >= 0  # peers whose domain is unknown count only in the total
        if not known.any():
            return None
        width = len(numbers.keys)
        found, position = unique_in_runs(arrays.source[known] * width + peer_domain[known])
        weight = group_sums(position, arrays.rate[known], len(found))
        self._held_at[level] = (found // width, found % width, weight)
        return self._held_at[level]

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
        self._held_at, self._home_at = {}, {}
        self.moved[pod] = target
        self.touched.add(pod)
        self.touched.update(self.arrays.peers_of(pod))

    def copy(self) -> PodCostModel:
        copied = PodCostModel(
            self.arrays, self.topology, dict(self.locations), dict(self.moved), set(self.touched)
        )
        copied._numbers = self._numbers  # of the same locations, and never changed in place
        copied._held_at = self._held_at  # the same; a move gives a model a dict of its own
        copied._home_at = self._home_at
        return copied

    def figures(self, snapshot: Snapshot, price: Price) -> Figures:
        return self.tally(snapshot).figures(self.topology, price)

    def tally(self, snapshot: Snapshot) -> Tally:
        """The sums behind the figures, over every pair, in numpy: the same sums, in the same
        order, as counting each pair of `edges` into a Tally (see EdgeArrays)."""
        names = {pod: workload_name(snapshot, pod) for pod in self.arrays.pods}
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
