"""The best placement possible, as a mixed-integer program solved by HiGHS: the yardstick the
quality benchmark holds the planner's result against.

Every pod is placed on a node so that the weighted traffic cost (rate x the weight of the widest
level two communicating pods differ at, the planner's own cost model) is least, under the same
node capacity, node selector, taint and hard topology spread rules. A second program finds the
fewest pods that must change node to reach that cost from the current placement, and on small
problems a search (sequence.py) raises that count to the moves needed when each must fit as made.

The cost is linear by a telescoping sum: a pair first split at level k costs w_k, which equals
the sum over levels l >= k of (w_l - w_{l+1}), each paid when the pair is split at l. A split at
l is at least z_p(D) - z_q(D) for every domain D at l, where z_p(D) = 1 when pod p is in D.
"""

from __future__ import annotations

import math
import os
import sys
from collections import defaultdict
from itertools import combinations
from typing import Any

import highspy

from rebalancer.cluster.fit import admits, node_affinity_allows
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Topology
from rebalancer.simulator.fair import Rules
from rebalancer.simulator.results import Optimum
from rebalancer.simulator.scenario import LEVEL_LABELS, Scenario
from rebalancer.simulator.sequence import fewest_in_order

MAX_ASSIGNMENTS = 60_000
"""Pod x node choices beyond which the program is not attempted: not computable here."""
MAX_BRANCH_NODES = 5000
"""Work limit: past this many branch-and-bound nodes the optimum counts as not proven (the
domain-level bound stands in). Work, not seconds, so the answer does not depend on load."""


def _allowed_nodes(snapshot: Snapshot) -> dict[str, list[str]]:
    """Pod -> nodes whose selectors and taints admit it; capacity and spread are constraints."""
    return {
        pod.key: [
            node.name for node in snapshot.nodes.values() if admits(pod, node, snapshot.nodes)
        ]
        for pod in snapshot.pods.values()
        if pod.node_name
    }


def solve(
    snapshot: Snapshot,
    topology: Topology,
    rates: dict[tuple[str, str], float],
    scenario: Scenario,
    rules: Rules | None = None,
) -> Optimum | None:
    """The optimum for the pods placed now under `rules`, or None when it is too large or not
    proven."""
    rules = rules or Rules()
    allowed = _allowed_nodes(snapshot)
    for key in rules.fixed & allowed.keys():
        allowed[key] = [node for node in allowed[key] if node == snapshot.pods[key].node_name]
    if sum(len(nodes) for nodes in allowed.values()) > MAX_ASSIGNMENTS:
        return None
    program = _Program(snapshot, topology, allowed)
    program.add_capacity()
    program.add_spread(scenario, rules.soft_spread_hard)
    if rules.spread_floor is not None:
        program.add_spread_floor(*rules.spread_floor, rules.floor_kinds)
    cost = program.cost(rates)
    best = program.minimize(cost)
    if best is None:
        return None
    # Moves: pods off their current node, with the cost held at the optimum.
    program.highs.addConstr(cost <= best + max(1e-6, abs(best) * 1e-9))
    fewest = program.minimize(program.moves())
    if fewest is None:
        return Optimum(best, None)
    # The program's count lets pods trade places on full nodes; in order, that takes more.
    in_order = fewest_in_order(snapshot, topology, rates, allowed, best)  # fixed: one node
    return Optimum(best, max(round(fewest), in_order or 0))


def quiet_highs() -> highspy.Highs:
    """A solver that prints nothing. HiGHS writes a banner to stdout when a process makes its
    first instance, which would corrupt `--output json`, so fd 1 points at /dev/null meanwhile."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            highs = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    highs.setOptionValue("output_flag", False)
    return highs


class _Program:
    def __init__(self, snapshot: Snapshot, topology: Topology, allowed: dict[str, list[str]]):
        self.snapshot = snapshot
        self.topology = topology
        self.highs = quiet_highs()
        self.highs.setOptionValue("mip_max_nodes", MAX_BRANCH_NODES)
        self.place: dict[tuple[str, str], Any] = {
            (pod, node): self.highs.addBinary() for pod, nodes in allowed.items() for node in nodes
        }
        self.nodes_of: dict[str, list[str]] = allowed
        for pod, nodes in allowed.items():
            self.highs.addConstr(sum(self.place[pod, node] for node in nodes) == 1)
        self.domains: list[dict[tuple[str | None, ...], list[str]]] = []
        for level in range(len(topology.levels)):
            members: dict[tuple[str | None, ...], list[str]] = defaultdict(list)
            for node, location in topology.node_locations.items():
                members[location[: level + 1]].append(node)
            self.domains.append(members)

    def add_capacity(self) -> None:
        for node in self.snapshot.nodes.values():
            pods = [pod for pod, nodes in self.nodes_of.items() if node.name in nodes]
            scalars = {name for pod in pods for name, _ in self.snapshot.pods[pod].requests.scalars}
            for resource in ("cpu_millis", "memory_bytes", "pods", *sorted(scalars)):
                limit = node.allocatable.amount(resource)
                demand = [(self.snapshot.pods[pod].requests.amount(resource), pod) for pod in pods]
                if sum(amount for amount, _pod in demand) > limit:
                    self.highs.addConstr(
                        sum(amount * self.place[pod, node.name] for amount, pod in demand) <= limit
                    )

    def _in_domain(self, pod: str, nodes: list[str]) -> Any:
        return sum(self.place[pod, node] for node in nodes if (pod, node) in self.place)

    def add_spread_floor(self, level: int, floor: int, kinds: frozenset[str]) -> None:
        """Each workload keeps min(floor, domains it spans now) domains at `level`: one binary
        per workload and domain, set only where one of its pods is."""
        by_workload: dict[object, list[str]] = defaultdict(list)
        for key in self.nodes_of:
            workload = self.snapshot.pods[key].workload
            if workload is not None and workload.kind in kinds:
                by_workload[workload].append(key)
        locations = self.topology.node_locations
        for pods in by_workload.values():
            spanned = {
                location[: level + 1]
                for p in pods
                if (location := locations.get(self.snapshot.pods[p].node_name or "")) is not None
                and location[level] is not None
            }
            required = min(floor, len(spanned))
            if required <= 1:
                continue
            used = []
            for domain, nodes in self.domains[level].items():
                if domain[-1] is None:
                    continue
                present = self.highs.addBinary()
                self.highs.addConstr(present <= sum(self._in_domain(p, nodes) for p in pods))
                used.append(present)
            self.highs.addConstr(sum(used) >= required)

    def add_spread(self, scenario: Scenario, soft_as_hard: bool) -> None:
        """Spread: no two domains of the level differ by more than max skew; soft constraints
        too when the planner honours them."""
        for workload in scenario.workloads:
            pods = [
                key
                for key, pod in self.snapshot.pods.items()
                if key in self.nodes_of
                and pod.namespace == workload.namespace
                and pod.labels.get("app") == workload.name
            ]
            if not pods:
                continue
            first = self.snapshot.pods[pods[0]]
            for constraint in (c for c in workload.spread if c.hard or soft_as_hard):
                label = LEVEL_LABELS[constraint.level]
                by_value: dict[str, list[str]] = defaultdict(list)
                for node in self.snapshot.nodes.values():
                    # As the scheduler counts domains: only nodes the pods' selector admits.
                    if label in node.labels and node_affinity_allows(first, node):
                        by_value[node.labels[label]].append(node.name)
                counts = {
                    value: sum(self._in_domain(pod, nodes) for pod in pods)
                    for value, nodes in by_value.items()
                }
                for a, b in combinations(sorted(counts), 2):
                    difference = counts[a] - counts[b]
                    if isinstance(difference, int):
                        continue  # no pod can be in either: nothing to hold
                    self.highs.addConstr(difference <= constraint.max_skew)
                    self.highs.addConstr(-difference <= constraint.max_skew)

    def cost(self, rates: dict[tuple[str, str], float]) -> Any:
        weights = [level.weight for level in self.topology.levels] + [0.0]
        terms = []
        for (a, b), rate in rates.items():
            if a not in self.nodes_of or b not in self.nodes_of or rate <= 0:
                continue
            for level, members in enumerate(self.domains):
                step = weights[level] - weights[level + 1]
                if step <= 0:
                    continue
                split = self.highs.addVariable(lb=0, ub=1)
                for nodes in members.values():
                    self.highs.addConstr(
                        split >= self._in_domain(a, nodes) - self._in_domain(b, nodes)
                    )
                terms.append(rate * step * split)
        return sum(terms)

    def moves(self) -> Any:
        return sum(
            1 - self.place[key, node]
            for key, pod in self.snapshot.pods.items()
            if (node := pod.node_name) is not None and (key, node) in self.place
        )

    def minimize(self, objective: Any) -> float | None:
        self.highs.minimize(objective)
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        value = float(self.highs.getInfo().objective_function_value)
        return value if math.isfinite(value) else None
