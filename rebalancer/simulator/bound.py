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

The program itself is in bound_program.py (the counts and the rules on them) and
bound_objective.py (the traffic kept local, and the solve); here is what is bounded how.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import networkx as nx

from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Domain, Topology
from rebalancer.simulator.bound_objective import Objective
from rebalancer.simulator.bound_program import DomainProgram, finest_level
from rebalancer.simulator.fair import Rules

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
    whole = DomainProgram(snapshot, topology, rules, None, work=MAX_BRANCH_NODES)
    programs: Iterable[DomainProgram] = [whole]
    if whole.counts() > MAX_WHOLE_COUNTS:
        parts = _parts(snapshot, rates, whole.home)
        programs = (
            DomainProgram(snapshot, topology, rules, part, work=MAX_BRANCH_NODES) for part in parts
        )
    total = departures = 0.0
    for program in programs:
        program.add_classes()
        if program.movable_counts() > max_counts or not program.add_rules():
            return None
        objective = Objective(program)
        found = objective.solve(rates, penalty)
        if not objective.proven and not penalty:
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
    finest = finest_level(topology)
    total = 0.0
    for (first, second), pair_rates in sorted(by_pair.items()):
        together = frozenset(members[first] | members[second])
        best = 0.0
        for level in range(finest + 1):
            program = DomainProgram(
                snapshot, topology, rules, together, level=level, work=MAX_PAIR_BRANCH_NODES
            )
            program.add_classes()
            if not program.add_rules():
                return None
            objective = Objective(program)
            found = objective.solve(pair_rates)
            if found is not None:
                best = max(best, found[0])
            if not objective.proven:
                break  # a finer level, with more domains, closes no sooner
        total += best
    return total


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
