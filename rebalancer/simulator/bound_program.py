"""The bound's program: pods counted per domain, under the rules the planner obeys.

Interchangeable pods become one class, counted per domain at the finest level with few enough
domains; each domain holds what its nodes have free, and spread and the HA floor hold on the
counts. The traffic the counts keep local is in bound_objective.py, what is bounded how in
bound.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rebalancer.cluster.fit import admits
from rebalancer.cluster.model import Pod, Resources, Snapshot
from rebalancer.cluster.topology import Domain, Topology
from rebalancer.simulator.fair import Rules
from rebalancer.simulator.optimum import quiet_highs

MAX_DOMAINS = 256
"""The finest level with at most this many domains is the one pods are counted at."""


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


def finest_level(topology: Topology) -> int:
    """The level pods are counted at: the finest with at most `MAX_DOMAINS` domains."""
    levels = range(len(topology.levels))
    return max(i for i in levels if len(topology.domains_at(i)) <= MAX_DOMAINS)


class DomainProgram:
    """One program in HiGHS: the classes' counts per domain and the planner's rules on them. What
    the counts keep local, its objective, is bound_objective.py's."""

    def __init__(
        self,
        snapshot: Snapshot,
        topology: Topology,
        rules: Rules,
        part: frozenset[str] | None,
        *,
        level: int | None = None,
        work: int,
    ) -> None:
        self.snapshot = snapshot
        self.part = part
        """The pods this program places (None: all); the other fixed pods still take room."""
        self.topology = topology
        self.rules = rules
        self.highs = quiet_highs()
        self.highs.setOptionValue("mip_max_nodes", work)
        self.level = finest_level(topology) if level is None else level
        self.domains = {i: topology.domains_at(i) for i in range(self.level + 1)}
        self.home: dict[str, Domain] = {}
        """Node -> its counted-level domain, for nodes with every level down to it known."""
        for domain in self.domains[self.level]:
            for node in topology.nodes_by_domain[domain]:
                self.home[node] = domain
        self.classes: list[_Class] = []
        self.class_of: dict[str, int] = {}

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
                up(self.home[self.snapshot.pods[p].node_name or ""], level)
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

    def upper(self, item: _Class, domain: Domain) -> int:
        """The most pods of the class the domain can hold."""
        return sum(bound for d, bound in item.upper.items() if _within(d, domain))


class _NoPlacementError(Exception):
    """A class has nowhere to go: the cluster as given cannot hold its pods."""


def _rule(key: str, pod: Pod) -> tuple[Any, Resources]:
    """What pods of one class share, besides the nodes that admit them."""
    return (pod.workload or key, pod.requests)


def _within(domain: Domain, wider: Domain) -> bool:
    return domain.key[: len(wider.key)] == wider.key


def up(domain: Domain, level: int) -> Domain:
    """The domain at `level` that holds `domain`."""
    return Domain(level, domain.key[: level + 1])


def _resources(requests: Iterable[Resources]) -> list[str]:
    scalars = {name for r in requests for name, _amount in r.scalars}
    return ["cpu_millis", "memory_bytes", "pods", *sorted(scalars)]
