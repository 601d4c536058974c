"""A lower bound on the fair optimum that scales: pods counted per domain, not placed on nodes.

The exact program (optimum.py) places every pod on a node; HiGHS does not solve it for thousands
of pods, nor for gangs of tens of pods on nearly full racks. Here the interchangeable pods (one
workload's movable pods with the same requests and the same admitting nodes) become a count per
domain, down to the finest level with few enough domains, and the traffic a pair of such classes
keeps inside a domain is bounded from above by what the pods counted there can send and receive.
Every placement the planner may reach meets these constraints, so the minimum here is at most the
fair optimum: capture measured against it is conservative. Levels finer than the counted one are
charged as if split wherever the counted level is, which only lowers the bound further.

The solver stops after a number of branch-and-bound nodes, not seconds, and its dual bound is
used when it stops early, so the figure does not depend on the machine's load.

A large cluster is bounded part by part: pods that no traffic or workload ties together are
solved apart, each part given every domain's whole free room, and the parts' bounds summed. Only
the sharing of room between parts is relaxed, so the sum is still a bound. One program over
thousands of pods is out of the solver's reach; the parts of a cluster of tenants are small.

Where a program stops short of its optimum, each talking pair of workloads is also bounded
alone, and the sum stands if higher: over many like domains the whole program's dual bound
can stay far below its best placement, while two workloads over a few coarse domains close in a
few nodes (docs/simulator.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import highspy
import networkx as nx

from rebalancer.cluster.fit import admits
from rebalancer.cluster.model import Pod, Resources, Snapshot
from rebalancer.cluster.topology import Domain, Topology
from rebalancer.simulator.fair import Rules
from rebalancer.simulator.optimum import quiet_highs

MAX_DOMAINS = 256
"""The finest level with at most this many domains is the one pods are counted at."""
MAX_BRANCH_NODES = 2000
"""Work limit of the solver; past it the proven dual bound is taken."""
MAX_PAIR_BRANCH_NODES = 200
"""Work limit of one pair's program (`_pairwise`): one with two classes either closes in a few
nodes or, over many symmetric domains, not in thousands."""
MAX_WHOLE_COUNTS = 4000
"""Past this many (class, counted domain) counts in one program, the parts are bounded apart."""
PENALTY_TRIES = 6
"""Programs solved for a bound within a number of moves, each with another penalty per move."""
MAX_PENALISED_COUNTS = 1000
"""Past this many counts in one program, no bound within a number of moves is attempted: it is
solved `PENALTY_TRIES` times, and a program that large is out of the solver's reach so often,
while its root relaxation alone is too weak to bound anything (docs/simulator.md)."""
MAX_EXACT_CLASS = 32
"""Up to this many pods, what a class keeps inside a domain is bounded by a choice of its count
(n (n - 1) / 2 pairs at most); larger classes by n x each pod's share, which needs no binaries."""


@dataclass
class _Class:
    """Pods that any placement may swap for each other: same workload, requests and nodes."""

    pods: list[str]
    requests: Resources
    nodes: frozenset[str]
    fixed_at: Domain | None = None
    """The domain at the counted level of a pod that stays (one pod per such class)."""
    count: dict[Domain, Any] = field(default_factory=dict)
    """Counted-level domain -> its count: a variable, or a constant for a fixed class."""
    upper: dict[Domain, int] = field(default_factory=dict)
    """Counted-level domain -> the most the count there can be."""


@dataclass
class _Pair:
    """Traffic between two classes (or within one), with what bounds the part kept local."""

    rate: float
    first_max: float
    """Most that one pod of the first class sends to and receives from the second."""
    second_max: float
    pair_max: float
    """Most between any two of their pods: with n pods in a domain, a class keeps at most
    n (n - 1) / 2 pairs of its own local."""


def lower_bound(
    snapshot: Snapshot,
    topology: Topology,
    rates: dict[tuple[str, str], float],
    rules: Rules,
) -> float | None:
    """A cost no placement the planner may reach goes below; None if HiGHS proves nothing."""
    found = _penalised(snapshot, topology, rates, rules, 0.0)
    return None if found is None else found[0]


def budgeted_bound(
    snapshot: Snapshot,
    topology: Topology,
    rates: dict[tuple[str, str], float],
    rules: Rules,
    *,
    moves: int,
    scale: float,
) -> float | None:
    """A cost no placement reached in `moves` moves goes below; None if HiGHS proves nothing or
    a program is too large to solve so often (`MAX_PENALISED_COUNTS`).

    Lagrangian relaxation: each pod counted out of the counted-level domain it runs in adds a
    penalty to the cost, so for any penalty the least penalised cost, less penalty x `moves`,
    is such a bound (weak duality; a pod counted out has moved at least once). The penalty is
    searched from `scale` (about what a move must save) by doubling or halving until the
    solutions move more and fewer pods than `moves`, then by bisection; the best bound found
    stands."""
    best: float | None = None
    low, high, penalty = 0.0, math.inf, scale
    for _ in range(PENALTY_TRIES):
        found = _penalised(
            snapshot, topology, rates, rules, penalty, max_counts=MAX_PENALISED_COUNTS
        )
        if found is None:
            return best
        total, departures = found
        bound = total - penalty * moves
        best = bound if best is None else max(best, bound)
        if departures > moves:
            low = penalty
        else:
            high = penalty
        penalty = penalty * 2 if math.isinf(high) else (low + high) / 2 if low else high / 2
    return best


def _penalised(
    snapshot: Snapshot,
    topology: Topology,
    rates: dict[tuple[str, str], float],
    rules: Rules,
    penalty: float,
    *,
    max_counts: float = math.inf,
) -> tuple[float, float] | None:
    """The bound on the cost plus `penalty` per pod counted out of its domain, and how many the
    solutions counted out (infinite where a part has no solution to read); None also where a
    program has more than `max_counts` counts."""
    whole = _Bound(snapshot, topology, rules, None)
    programs: Iterable[_Bound] = [whole]
    if whole.counts() > MAX_WHOLE_COUNTS:
        parts = _parts(snapshot, rates, whole.home)
        programs = (_Bound(snapshot, topology, rules, part) for part in parts)
    total = departures = 0.0
    for program in programs:
        program.add_classes()
        if program.movable_counts() > max_counts or not program.add_rules():
            return None
        found = program.solve(rates, penalty)
        if not program.proven and not penalty:
            # The work ran out: the pairs of workloads, each closed alone, may bound it higher.
            pairwise = _pairwise(snapshot, topology, rates, rules, program.part)
            if pairwise is not None and (found is None or pairwise > found[0]):
                found = pairwise, math.inf
        if found is None:
            return None
        total += found[0]
        departures += found[1]
    return total, departures


def _pairwise(
    snapshot: Snapshot,
    topology: Topology,
    rates: dict[tuple[str, str], float],
    rules: Rules,
    part: frozenset[str] | None,
) -> float | None:
    """The sum over the part's talking pairs of workloads (a workload with itself included) of
    the least cost of their traffic alone; None if the cluster cannot hold some pair's pods.

    The cost is a sum over these pairs, and any fair placement restricted to a pair's pods is
    one that pair's program allows (the pair alone is given all the free room), so the sum of
    the pairs' least costs is a bound. Each pair is counted at every level from the coarsest
    until one does not close, and its highest bound stands; one with none proven adds nothing,
    as no cost is below zero."""

    def owner(key: str) -> str:
        return str(snapshot.pods[key].workload or key)

    pods = snapshot.pods if part is None else part
    by_pair: dict[tuple[str, str], dict[tuple[str, str], float]] = defaultdict(dict)
    members: dict[str, set[str]] = defaultdict(set)
    for (a, b), rate in rates.items():
        if rate > 0 and a != b and a in pods and b in pods:
            first, second = sorted((owner(a), owner(b)))
            by_pair[first, second][a, b] = rate
    for key in pods:
        members[owner(key)].add(key)
    finest = _finest(topology)
    total = 0.0
    for (first, second), pair_rates in sorted(by_pair.items()):
        together = frozenset(members[first] | members[second])
        best = 0.0
        for level in range(finest + 1):
            program = _Bound(
                snapshot, topology, rules, together, level=level, work=MAX_PAIR_BRANCH_NODES
            )
            program.add_classes()
            if not program.add_rules():
                return None
            found = program.solve(pair_rates)
            if found is not None:
                best = max(best, found[0])
            if not program.proven:
                break  # a finer level, with more domains, closes no sooner
        total += best
    return total


def _finest(topology: Topology) -> int:
    """The level pods are counted at: the finest with at most `MAX_DOMAINS` domains."""
    levels = range(len(topology.levels))
    return max(i for i in levels if len(topology.domains_at(i)) <= MAX_DOMAINS)


def _parts(
    snapshot: Snapshot, rates: dict[tuple[str, str], float], home: dict[str, Domain]
) -> list[frozenset[str]]:
    """Placed pods tied together by traffic or by a workload: one set per part with traffic."""
    graph: nx.Graph[str] = nx.Graph()
    placed = sorted(key for key, pod in snapshot.pods.items() if pod.node_name in home)
    graph.add_nodes_from(placed)
    talking = [(a, b) for (a, b), rate in rates.items() if rate > 0 and a != b]
    talking = [(a, b) for a, b in talking if a in graph and b in graph]
    graph.add_edges_from(talking)
    first_of: dict[Any, str] = {}
    for key in placed:
        workload = snapshot.pods[key].workload
        if workload is not None:
            graph.add_edge(key, first_of.setdefault(workload, key))
    parts = (frozenset(part) for part in nx.connected_components(graph))
    with_traffic = {a for a, _b in talking}
    return sorted((part for part in parts if part & with_traffic), key=min)


class _Bound:
    def __init__(
        self,
        snapshot: Snapshot,
        topology: Topology,
        rules: Rules,
        part: frozenset[str] | None,
        *,
        level: int | None = None,
        work: int = MAX_BRANCH_NODES,
    ) -> None:
        self.snapshot = snapshot
        self.part = part
        """The pods this program places (None: all); the other fixed pods still take room."""
        self.topology = topology
        self.rules = rules
        self.highs = quiet_highs()
        self.highs.setOptionValue("mip_max_nodes", work)
        self.level = _finest(topology) if level is None else level
        self.domains = {i: topology.domains_at(i) for i in range(self.level + 1)}
        self.home: dict[str, Domain] = {}
        """Node -> its counted-level domain, for nodes with every level down to it known."""
        for domain in self.domains[self.level]:
            for node in topology.nodes_by_domain[domain]:
                self.home[node] = domain
        self.classes: list[_Class] = []
        self.class_of: dict[str, int] = {}
        self.choices: dict[tuple[int, Domain], list[Any] | None] = {}
        self.proven = False
        """Whether the last solve proved its optimum, not only a bound on it."""

    def counts(self) -> int:
        """How many (class, domain) counts the program would have, before building it: its size
        in the solver's work."""
        movable = {
            _rule(key, pod)
            for key, pod in self.snapshot.pods.items()
            if pod.node_name in self.home and key not in self.rules.fixed
        }
        return len(movable) * len(self.domains[self.level])

    def movable_counts(self) -> int:
        """`counts` of the classes added, which are this part's only."""
        movable = sum(1 for item in self.classes if item.fixed_at is None)
        return movable * len(self.domains[self.level])

    def add_classes(self) -> None:
        grouped: dict[tuple[Any, ...], _Class] = {}
        admitting: dict[tuple[Any, ...], frozenset[str]] = {}
        for key in sorted(self.snapshot.pods if self.part is None else self.part):
            pod = self.snapshot.pods[key]
            if pod.node_name not in self.home:
                continue  # unplaced, or where the topology is unknown: its traffic is left out
            if key in self.rules.fixed:
                self._add(_Class([key], pod.requests, frozenset(), self.home[pod.node_name]))
                continue
            rule = _rule(key, pod)
            if rule not in admitting:
                admitting[rule] = frozenset(
                    name
                    for name in self.home
                    if admits(pod, self.snapshot.nodes[name], self.snapshot.nodes)
                )
            group = (*rule, admitting[rule])
            if group not in grouped:
                grouped[group] = self._add(_Class([], pod.requests, admitting[rule]))
            grouped[group].pods.append(key)
            self.class_of[key] = self.class_of[f"\0{id(grouped[group])}"]
        for marker in [k for k in self.class_of if k.startswith("\0")]:
            del self.class_of[marker]

    def _add(self, item: _Class) -> _Class:
        self.classes.append(item)
        self.class_of[f"\0{id(item)}"] = len(self.classes) - 1
        for pod in item.pods:
            self.class_of[pod] = len(self.classes) - 1
        return item

    def add_rules(self) -> bool:
        """Capacity, spread and the HA floor, as the planner obeys them; False if the cluster
        has no room for a class."""
        try:
            self.add_capacity()
        except _NoPlacementError:
            return False
        self.add_spread(self.rules.soft_spread_hard)
        if self.rules.spread_floor is not None:
            self.add_floor(*self.rules.spread_floor, self.rules.floor_kinds)
        return True

    def add_capacity(self) -> None:
        """Each domain holds what its nodes have free of the fixed pods, summed per resource,
        and no more of a class than fits node by node."""
        free = {name: self.snapshot.nodes[name].allocatable for name in self.home}
        for key in self.rules.fixed:  # those of other parts too: they stay where they run
            pod = self.snapshot.pods.get(key)
            if pod is not None and pod.node_name in free:
                free[pod.node_name] = free[pod.node_name] - pod.requests
        for item in self.classes:
            if item.fixed_at is not None:
                item.count, item.upper = {item.fixed_at: 1}, {item.fixed_at: 1}
                continue
            for domain in self.domains[self.level]:
                nodes = [n for n in self.topology.nodes_by_domain[domain] if n in item.nodes]
                room = sum(max(item.requests.copies_in(free[n]), 0) for n in nodes)
                if room > 0:
                    item.upper[domain] = min(room, len(item.pods))
                    item.count[domain] = self.highs.addIntegral(lb=0, ub=item.upper[domain])
            if not item.count:
                raise _NoPlacementError
            self.highs.addConstr(sum(item.count.values()) == len(item.pods))
        for domain in self.domains[self.level]:
            nodes = self.topology.nodes_by_domain[domain]
            movable = [c for c in self.classes if c.fixed_at is None and domain in c.count]
            for resource in _resources(c.requests for c in movable):
                limit = sum(max(free[n].amount(resource), 0) for n in nodes)
                if sum(c.requests.amount(resource) * len(c.pods) for c in movable) > limit:
                    demand = (c.requests.amount(resource) * c.count[domain] for c in movable)
                    self.highs.addConstr(sum(demand) <= limit)

    def counted(self, item: _Class, domain: Domain) -> Any:
        """The class's pods in a domain at or above the counted level."""
        return sum(v for d, v in item.count.items() if _within(d, domain))

    def add_spread(self, soft_as_hard: bool) -> None:
        """Each workload's spread constraints on a level at or above the counted one."""
        by_label = {self.topology.levels[i].label: i for i in self.domains}
        workloads: dict[Any, list[_Class]] = defaultdict(list)
        for item in self.classes:
            workloads[self.snapshot.pods[item.pods[0]].workload or item.pods[0]].append(item)
        for members in workloads.values():
            pod = self.snapshot.pods[members[0].pods[0]]
            for constraint in pod.spread_constraints:
                level = by_label.get(constraint.topology_key)
                if level is None or not (constraint.hard or soft_as_hard):
                    continue
                eligible = {self.home[n] for c in members for n in c.nodes}
                eligible |= {c.fixed_at for c in members if c.fixed_at is not None}
                domains = [d for d in self.domains[level] if any(_within(e, d) for e in eligible)]
                if len(domains) < 2:
                    continue
                most, least = self.highs.addVariable(lb=0), self.highs.addVariable(lb=0)
                for domain in domains:
                    total = sum(self.counted(c, domain) for c in members)
                    self.highs.addConstr(most >= total)
                    self.highs.addConstr(least <= total)
                self.highs.addConstr(most - least <= constraint.max_skew)

    def add_floor(self, level: int, floor: int, kinds: frozenset[str]) -> None:
        if level > self.level:
            return  # not counted that finely: leaving the floor out only lowers the bound
        workloads: dict[Any, list[_Class]] = defaultdict(list)
        for item in self.classes:
            workload = self.snapshot.pods[item.pods[0]].workload
            if workload is not None and workload.kind in kinds:
                workloads[workload].append(item)
        for members in workloads.values():
            spanned = {
                _up(self.home[self.snapshot.pods[p].node_name or ""], level)
                for c in members
                for p in c.pods
            }
            required = min(floor, len(spanned))
            if required < 2:
                continue
            present: list[Any] = []
            for domain in self.domains[level]:
                total = sum(self.counted(c, domain) for c in members)
                if isinstance(total, int):
                    present.append(min(total, 1))
                    continue
                used = self.highs.addBinary()
                self.highs.addConstr(used <= total)
                present.append(used)
            spread = sum(present)
            if not isinstance(spread, int):  # a constant: every member fixed where it runs
                self.highs.addConstr(spread >= required)

    def departures(self) -> Any:
        """How many pods the counts put out of the domain they run in, at the least."""
        out: list[Any] = []
        for item in self.classes:
            if item.fixed_at is not None:
                continue
            running: dict[Domain, int] = defaultdict(int)
            for pod in item.pods:
                running[self.home[self.snapshot.pods[pod].node_name or ""]] += 1
            for domain, count in running.items():
                if domain not in item.count:
                    out.append(count)  # no room there now: all of them leave
                    continue
                leaving = self.highs.addVariable(lb=0, ub=count)
                self.highs.addConstr(leaving >= count - item.count[domain])
                out.append(leaving)
        return sum(out)

    def solve(
        self, rates: dict[tuple[str, str], float], penalty: float = 0.0
    ) -> tuple[float, float] | None:
        """The bound on the cost plus `penalty` per pod out of its domain, and that number in
        the solution found (infinite without one)."""
        weights = [level.weight for level in self.topology.levels] + [0.0]
        steps = [weights[i] - weights[i + 1] for i in range(len(self.topology.levels))]
        # Levels finer than the counted one pay as if split wherever it is.
        charged = [*steps[: self.level], sum(steps[self.level :])]
        cost: list[Any] = []
        for (first, second), pair in self._pairs(rates).items():
            local_above: dict[Domain, Any] = {}
            for level, step in enumerate(charged):
                if step <= 0:
                    continue
                kept = {d: self._kept(first, second, pair, d) for d in self.domains[level]}
                for domain, amount in kept.items():
                    parent = local_above.get(_up(domain, level - 1)) if level else None
                    if parent is not None and not isinstance(amount, float | int):
                        within: Any = amount <= parent
                        self.highs.addConstr(within)
                local_above = kept
                cost.append(step * (pair.rate - sum(kept.values())))
        moved = self.departures() if penalty else 0
        objective = (sum(cost) if cost else 0.0) + penalty * moved
        self.proven = True
        if isinstance(objective, float | int):  # every pod of it stays where it runs
            return max(float(objective), 0.0), float(moved)
        self.highs.minimize(objective)
        info = self.highs.getInfo()
        solved = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
        if isinstance(moved, int | float):
            counted = float(moved)
        else:
            counted = float(self.highs.val(moved)) if solved else math.inf
        if self.highs.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            return max(float(info.objective_function_value), 0.0), counted
        self.proven = False
        bound = float(info.mip_dual_bound)
        return (max(bound, 0.0), counted) if math.isfinite(bound) else None

    def _pairs(self, rates: dict[tuple[str, str], float]) -> dict[tuple[int, int], _Pair]:
        """Class pair -> its traffic, both directions, and each pod's share at most."""
        total: dict[tuple[int, int], float] = defaultdict(float)
        per_pod: dict[tuple[int, int, str], float] = defaultdict(float)
        pair_max: dict[tuple[int, int], float] = defaultdict(float)
        both: dict[tuple[str, str], float] = defaultdict(float)
        for (a, b), rate in rates.items():
            if rate > 0 and a in self.class_of and b in self.class_of and a != b:
                both[min(a, b), max(a, b)] += rate
        for (a, b), rate in both.items():
            key = (min(self.class_of[a], self.class_of[b]), max(self.class_of[a], self.class_of[b]))
            total[key] += rate
            per_pod[(*key, a)] += rate
            per_pod[(*key, b)] += rate
            pair_max[key] = max(pair_max[key], rate)
        pairs = {}
        for key, rate in total.items():
            first, second = key
            pairs[key] = _Pair(
                rate,
                max(per_pod[(*key, p)] for p in self.classes[first].pods),
                max(per_pod[(*key, p)] for p in self.classes[second].pods),
                pair_max[key],
            )
        return pairs

    def _kept(self, first: int, second: int, pair: _Pair, domain: Domain) -> Any:
        """An upper bound on the pair's traffic inside `domain`."""
        one, other = self.classes[first], self.classes[second]
        if first == second:
            return self._kept_within(first, pair, domain)
        here, there = self.counted(one, domain), self.counted(other, domain)
        if isinstance(here, int) and isinstance(there, int):
            return min(
                here * pair.first_max,
                there * pair.second_max,
                pair.rate,
                _pairs_of(here, there, pair),
            )
        kept = self.highs.addVariable(lb=0, ub=pair.rate)
        self.highs.addConstr(kept <= here * pair.first_max)
        self.highs.addConstr(kept <= there * pair.second_max)
        # At most one pair's rate per two pods: n x m pairs, linear when one side is known...
        if isinstance(here, int) or isinstance(there, int):
            known, unknown = (here, there) if isinstance(here, int) else (there, here)
            self.highs.addConstr(kept <= (known * pair.pair_max) * unknown)
            return kept
        # ...else through the choice of the smaller class's count (m x a bounded integer).
        small, large = (first, second) if len(one.pods) <= len(other.pods) else (second, first)
        choice = self._choice(small, domain)
        if choice is None:
            return kept
        largest = self.upper(self.classes[large], domain)
        others = self.counted(self.classes[large], domain)
        products = []
        for size, chosen in enumerate(choice):
            if size == 0:
                continue
            product = self.highs.addVariable(lb=0, ub=largest)
            self.highs.addConstr(product <= largest * chosen)
            self.highs.addConstr(product <= others)
            products.append(size * product)
        self.highs.addConstr(kept <= pair.pair_max * sum(products))
        return kept

    def _kept_within(self, index: int, pair: _Pair, domain: Domain) -> Any:
        """Within one class: n pods keep at most min(n x each one's share, n (n-1)/2 pairs)."""
        pods = self.counted(self.classes[index], domain)
        if isinstance(pods, int):
            return _within_class(pods, pair)
        kept = self.highs.addVariable(lb=0, ub=pair.rate)
        choice = self._choice(index, domain)
        if choice is None:
            self.highs.addConstr(kept <= pods * (pair.first_max / 2))
            return kept
        bound = sum(_within_class(size, pair) * chosen for size, chosen in enumerate(choice))
        self.highs.addConstr(kept <= bound)
        return kept

    def _choice(self, index: int, domain: Domain) -> list[Any] | None:
        """Binaries choosing the class's count in the domain, one per possible count; None for
        classes too large to expand."""
        key = (index, domain)
        if key not in self.choices:
            item = self.classes[index]
            if len(item.pods) > MAX_EXACT_CLASS:
                self.choices[key] = None
            else:
                choice = [self.highs.addBinary() for _ in range(self.upper(item, domain) + 1)]
                self.highs.addConstr(sum(choice) == 1)
                counted = self.counted(item, domain)
                self.highs.addConstr(sum(k * c for k, c in enumerate(choice)) == counted)
                self.choices[key] = choice
        return self.choices[key]

    def upper(self, item: _Class, domain: Domain) -> int:
        """The most pods of the class the domain can hold."""
        return sum(bound for d, bound in item.upper.items() if _within(d, domain))


class _NoPlacementError(Exception):
    """A class has nowhere to go: the cluster as given cannot hold its pods."""


def _rule(key: str, pod: Pod) -> tuple[Any, Resources]:
    """What pods of one class share, besides the nodes that admit them."""
    return (pod.workload or key, pod.requests)


def _pairs_of(here: int, there: int, pair: _Pair) -> float:
    return here * there * pair.pair_max


def _within_class(pods: int, pair: _Pair) -> float:
    return min(pods * pair.first_max / 2, pods * (pods - 1) / 2 * pair.pair_max, pair.rate)


def _within(domain: Domain, wider: Domain) -> bool:
    return domain.key[: len(wider.key)] == wider.key


def _up(domain: Domain, level: int) -> Domain:
    return Domain(level, domain.key[: level + 1])


def _resources(requests: Iterable[Resources]) -> list[str]:
    scalars = {name for r in requests for name, _amount in r.scalars}
    return ["cpu_millis", "memory_bytes", "pods", *sorted(scalars)]
