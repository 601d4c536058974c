"""From the strategies' candidates to a short, safe plan.

The planner is greedy on gain and re-judges each candidate against a model that already contains
every move picked before it, so two moves never claim the same gain and the predicted cost can only
fall. Every safety rule lives here, once, for all strategies: protections, budgets, PDBs, HA spread,
cooldowns, persistence and the scheduler's fit in the target domain. What it refuses is reported
with the reason, so a dry-run tells the operator exactly why a pod stayed.
"""

from __future__ import annotations

import dataclasses
import heapq
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import msgspec
from pydantic import BaseModel, ConfigDict

from rebalancer.fit import Occupancy, rejection
from rebalancer.graph import CostModel, Figures, Price, Worth
from rebalancer.landing import Judged, Landing
from rebalancer.policy import Limits, Policy
from rebalancer.selectors import matches_label_selector
from rebalancer.snapshot import (
    SYSTEM_CRITICAL_CLASSES,
    Node,
    Pod,
    Snapshot,
    SnapshotIndexes,
    Workload,
    WorkloadRef,
)
from rebalancer.topology import Domain, Location, Topology
from strategies.base import Candidate, ClusterView

_GAIN_TOLERANCE = 1e-9
_FIRST_BATCH = 256
"""Candidates judged at once by the first batch of _Prejudged."""
_MAX_BACKOFF_DOUBLINGS = 5
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class Move:
    pod: str
    workload: str | None
    origin: dict[str, str]
    target: Domain
    destination: dict[str, str]
    node: str
    """The node the fit check found room on; the scheduler may pick another in the domain."""
    target_labels: dict[str, str]
    """Node label -> value for each level down to the target: what steers the replacement."""
    controller: tuple[str, str] | None
    gain: float
    strategy: str
    reason: str
    uid: str = ""
    """The planned pod's UID, for the eviction to name that pod and no namesake; empty when the
    snapshot has none."""

    def remembered(self, at: float) -> RecentMove:
        assert self.workload is not None
        left = {name: self.origin[name] for name in self.destination if name in self.origin}
        return RecentMove(workload=self.workload, left=left, entered=self.destination, at=at)


SkipCategory = Literal[
    "protected",
    "settling",
    "cooldown",
    "persistence",
    "below-threshold",
    "limit",
    "pdb",
    "spread",
    "no-fit",
]
"""A bounded name for why a candidate was skipped, for metric labels; the reason has details."""


class Skip(msgspec.Struct, frozen=True, gc=False):
    """A Struct, cheap to make: a cycle may skip most of tens of thousands of candidates."""

    pod: str
    reason: str
    strategy: str
    category: SkipCategory


@dataclass(frozen=True)
class Plan:
    moves: tuple[Move, ...]
    skipped: tuple[Skip, ...]
    before: Figures
    after: Figures
    candidates: int


class RecentMove(BaseModel):
    """A move kept for the cooldown: what a later move of the same workload may not undo.

    Domains are level name -> value, down to the level the move targeted, so a policy that
    renames or reorders its levels cannot make an old move match the wrong domain.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: str
    left: dict[str, str]
    """The domain the pod left, at the depth of `entered`."""
    entered: dict[str, str]
    at: float
    """Unix seconds."""

    def undone_by(self, location: dict[str, str], target: dict[str, str]) -> bool:
        """True if moving a pod from `location` to `target` takes it out of the domain this move
        entered, or puts it into the one this move left: the two halves of a bounce."""
        takes_out = _inside(location, self.entered) and not _inside(target, self.entered)
        puts_back = _overlap(target, self.left) and not _inside(location, self.left)
        return takes_out or puts_back


def _inside(place: dict[str, str], domain: dict[str, str]) -> bool:
    return domain.items() <= place.items()


def _overlap(first: dict[str, str], second: dict[str, str]) -> bool:
    """Whether the domains can share a node: they agree on every level both name."""
    return all(second[name] == value for name, value in first.items() if name in second)


class PlannerState(BaseModel):
    """Loop protection that must outlive a cycle (and, in the controller, a restart).

    `streaks` counts consecutive cycles in which a move was proposed; `last_moved` holds when each
    workload was last moved, as Unix seconds, for the back-off after missed landings.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    streaks: dict[str, int] = {}
    last_moved: dict[str, float] = {}
    recent_moves: list[RecentMove] = []
    """Moves still within the cooldown, oldest first."""
    landings: list[Landing] = []
    """Migrate-mode replacements not yet seen bound to a node."""
    misses: dict[str, int] = {}
    """Workload -> replacements in a row that did not land in their target; each doubles the
    workload's cooldown."""

    def with_landings(self, judged: Iterable[Judged], pending: list[Landing]) -> PlannerState:
        misses = dict(self.misses)
        for item in judged:
            workload = item.landing.hint.workload
            if item.result == "landed-in-target":
                misses.pop(workload, None)
            else:
                misses[workload] = misses.get(workload, 0) + 1
        return self.model_copy(update={"landings": pending, "misses": misses})

    def awaiting(self, landings: Iterable[Landing]) -> PlannerState:
        return self.model_copy(update={"landings": [*self.landings, *landings]})

    def observe(self, candidates: Iterable[Candidate]) -> PlannerState:
        """Advance streaks: proposed again means one more cycle, absent means back to zero."""
        proposed = {streak_key(c) for c in candidates}
        streaks = {key: self.streaks.get(key, 0) + 1 for key in sorted(proposed)}
        return self.model_copy(update={"streaks": streaks})

    def record_moves(
        self, moves: Iterable[Move], now: float, cooldown_seconds: float
    ) -> PlannerState:
        """Remember the moves, and forget those whose cooldown is over."""
        last_moved = dict(self.last_moved)
        recent = [m for m in self.recent_moves if now - m.at < cooldown_seconds]
        for move in moves:
            if move.workload is not None:
                last_moved[move.workload] = now
                recent.append(move.remembered(now))
        return self.model_copy(update={"last_moved": last_moved, "recent_moves": recent})


def streak_key(candidate: Candidate) -> str:
    """One key per proposal; a joint move persists only as the same set of moves. A one-pod
    candidate skips sorting its one move: a cycle observes tens of thousands of candidates."""
    if not candidate.companions:
        return _move_key(candidate.pod, candidate.target)
    return "+".join(_move_key(pod, target) for pod, target in sorted(candidate.targets.items()))


def _move_key(pod: str, target: Domain) -> str:
    return f"{pod}->{target.level}:{'/'.join(target.key)}"


def price_of(policy: Policy, topology: Topology) -> Price:
    return Price(
        per_gb_cross_zone=policy.price.per_gb_cross_zone,
        bytes_per_unit=policy.traffic.bytes_per_unit
        or (1.0 if policy.traffic.unit == "bytes/s" else None),
        zone_level=topology.level_index(policy.topology.zone_level),
    )


def protection_reason(
    pod: Pod, snapshot: Snapshot, indexes: SnapshotIndexes, policy: Policy
) -> str | None:
    """Why this pod may never be moved under the policy, whatever the gain."""
    scope, protections = policy.scope, policy.protections
    if not pod.node_name or pod.phase != "Running" or not pod.ready:
        return "not running and ready"
    if scope.namespaces.include and pod.namespace not in scope.namespaces.include:
        return "namespace not included"
    if pod.namespace in scope.namespaces.exclude:
        return "namespace excluded"
    if scope.pod_selector is not None and not matches_label_selector(
        scope.pod_selector.model_dump(), pod.labels
    ):
        return "outside the pod selector"
    workload = snapshot.workloads.get(pod.workload) if pod.workload else None
    annotations = [pod.annotations, workload.annotations if workload else {}]
    if any(a.get(scope.opt_out_annotation, "").lower() == "true" for a in annotations):
        return f"opted out ({scope.opt_out_annotation})"
    if pod.controller_kind == "DaemonSet":
        return "daemonset pod"
    if pod.controller_kind == "Node":
        return "static pod"
    if pod.workload is None and not protections.evict_bare_pods:
        return "bare pod (no controller recreates it)"
    if pod.priority_class_name in SYSTEM_CRITICAL_CLASSES and not protections.evict_system_critical:
        return "system-critical pod"
    if (
        protections.priority_threshold is not None
        and pod.priority >= protections.priority_threshold
    ):
        return f"priority {pod.priority} at or above {protections.priority_threshold}"
    if pod.has_local_storage and not protections.evict_local_storage:
        return "local storage (emptyDir or hostPath)"
    if pod.has_pvc and not protections.evict_pvc:
        return "uses a persistent volume claim"
    if pod.workload is not None and not protections.evict_single_replica:
        replicas = workload.replicas if workload and workload.replicas is not None else None
        if replicas is None:
            replicas = len(indexes.pods_of(pod.workload))
        if replicas <= 1:
            return "single-replica workload"
    return None


def unsettled_reason(pods: Iterable[Pod], workload: Workload | None) -> str | None:
    """Why a workload, of these pods, is not at full strength: a pod not yet Running and Ready (a
    replacement the scheduler has not placed, say), or fewer Ready pods than desired. Evicting
    more of such a workload would take away capacity that has not come back, whatever its PDB
    allows (a PDB may be missing, or lag), so it waits until it has settled."""
    ready = waiting = 0
    for pod in pods:
        # A Job's Succeeded or Failed pods are done, not capacity on its way back.
        if pod.phase not in _FINISHED_PHASES:
            if pod.node_name and pod.phase == "Running" and pod.ready:
                ready += 1
            else:
                waiting += 1
    if waiting:
        return f"{waiting} of its pods not yet Running and Ready"
    desired = workload.replicas if workload is not None else None
    if desired is not None and ready < desired:
        return f"{ready} of {desired} desired replicas Ready"
    return None


@dataclass
class _Budget:
    """Counts planned evictions at every scope a limit applies to."""

    limits: Limits
    zones: frozenset[str] = frozenset()
    """The zones the candidates' pods are in; empty when one of them is in no known zone."""
    used: Counter[tuple[str, str]] = field(default_factory=Counter)
    total: int = 0

    def exhausted(self) -> bool:
        return self.limits.per_cycle is not None and self.total >= self.limits.per_cycle

    def spent_in_every_zone(self) -> bool:
        """With the default limits and three zones (3 x 3 = 9 < 10 per cycle) this, not the
        per-cycle limit, is what ends a cycle: at 100k pods the loop went on to judge some 84,000
        candidates that no zone had room for."""
        per_zone = self.limits.per_zone
        return (
            per_zone is not None
            and bool(self.zones)
            and all(self.used[("zone", zone)] >= per_zone for zone in self.zones)
        )

    def copy(self) -> _Budget:
        return _Budget(self.limits, self.zones, Counter(self.used), self.total)

    def refusal(self, scopes: dict[str, str]) -> str | None:
        if self.exhausted():  # only a joint move's later pods get here with the budget spent
            return f"per-cycle limit {self.limits.per_cycle} reached"
        limits = {
            "node": self.limits.per_node,
            "namespace": self.limits.per_namespace,
            "workload": self.limits.per_workload,
            "zone": self.limits.per_zone,
        }
        for scope, value in scopes.items():
            limit = limits[scope]
            if limit is not None and self.used[(scope, value)] >= limit:
                return f"per-{scope} limit {limit} reached ({value})"
        return None

    def spend(self, scopes: dict[str, str]) -> None:
        self.total += 1
        for scope, value in scopes.items():
            self.used[(scope, value)] += 1


@dataclass
class _Cycle:
    """One planning pass: the model being moved in, and every budget spent so far."""

    view: ClusterView
    policy: Policy
    state: PlannerState
    now: float
    persistence_required: int
    min_gain: float
    cost: CostModel
    occupancy: Occupancy
    node_order: _NodeOrder
    """Of `occupancy`'s nodes."""
    budget: _Budget
    indexes: SnapshotIndexes
    earlier_moves: Mapping[str, list[RecentMove]]
    """The state's recent moves by workload: read for every candidate, so not scanned whole."""
    zone_names: Mapping[Location, str | None]
    """Of the candidates' pods' locations."""
    pdb_spent: Counter[str] = field(default_factory=Counter)
    moved_now: dict[str, list[RecentMove]] = field(default_factory=dict)
    """This cycle's moves by workload, which later moves in it may not undo either."""
    settling: dict[WorkloadRef, str | None] = field(default_factory=dict)
    """Each workload's `unsettled_reason`, worked out when a pod of it is first judged: with the
    default limits a cycle judges a few dozen candidates, so counting every pod's workload up
    front (0.4 s at 100k pods) was mostly wasted."""

    def settling_reason(self, workload: WorkloadRef) -> str | None:
        if workload not in self.settling:
            self.settling[workload] = unsettled_reason(
                self.indexes.pods_of(workload), self.view.snapshot.workloads.get(workload)
            )
        return self.settling[workload]

    def zone_of(self, pod_key: str) -> str | None:
        """The zone a candidate's pod is evicted from, which its per-zone limit counts."""
        return self.zone_names[self.view.cost.locations[pod_key]]

    def refusal(
        self, pod: Pod, candidate: Candidate, target: Domain, worth: Worth
    ) -> tuple[SkipCategory, str] | None:
        """The first rule that forbids moving `pod` into `target` now, cheapest checks first;
        `worth` is the whole candidate's."""
        protected = protection_reason(pod, self.view.snapshot, self.indexes, self.policy)
        if protected is not None:
            return "protected", protected
        if pod.workload is not None:
            settling = self.settling_reason(pod.workload)
            if settling is not None:
                return "settling", f"workload still settling: {settling}"
            held = self.cooldown_refusal(str(pod.workload), pod.key, target)
            if held is not None:
                return "cooldown", held
        seen = self.state.streaks.get(streak_key(candidate), 0)
        if seen < self.persistence_required:
            return "persistence", (
                f"proposed {seen} of {self.persistence_required} consecutive cycles"
            )
        # Relative to the pod's own cost, not the cluster's: a cluster-wide share would grow with
        # the cluster until no single move could clear it.
        threshold = max(self.min_gain, self.policy.thresholds.min_gain_ratio * worth.cost)
        gain = worth.gain
        if gain <= 0 or gain < threshold:
            return "below-threshold", f"gain {gain:.3g} below threshold {threshold:.3g}"
        checks: tuple[tuple[SkipCategory, Callable[[], str | None]], ...] = (
            ("limit", lambda: self.budget.refusal(self.scopes(pod))),
            ("pdb", lambda: self.pdb_refusal(pod)),
            ("spread", lambda: self.spread_refusal(pod, target)),
        )
        for category, check in checks:
            reason = check()
            if reason is not None:
                return category, reason
        return None

    def cooldown_refusal(self, workload: str, pod: str, target: Domain) -> str | None:
        """A workload may keep moving the same way, but not undo a recent move, and after missed
        landings it waits, doubling the wait with each miss in a row."""
        cooldown = self.policy.cooldown.per_workload_seconds
        misses = self.state.misses.get(workload, 0)
        last = self.state.last_moved.get(workload)
        if misses and last is not None:
            doublings = min(misses - 1, _MAX_BACKOFF_DOUBLINGS)
            remaining = cooldown * 2**doublings - (self.now - last)
            if remaining > 0:
                return (
                    f"backing off {remaining:.0f}s more after {misses} replacement(s) "
                    "missed their target"
                )
        recents = [*self.earlier_moves.get(workload, ()), *self.moved_now.get(workload, ())]
        if not recents:
            return None
        topology = self.view.topology
        location = _describe(topology, self.cost.locations[pod])
        destination = target.describe(topology.levels)
        for recent in recents:
            remaining = cooldown - (self.now - recent.at)
            if recent.undone_by(location, destination) and remaining > 0:
                entered = "/".join(recent.entered.values())
                return f"would undo its move into {entered}; cooldown {remaining:.0f}s more"
        return None

    def spent_reason(self, pod_key: str) -> str:
        """Why a candidate left when the budget ran out was not judged: the per-cycle limit,
        or else the per-zone limit of its pod's zone, as `refusal` words them."""
        limits = self.budget.limits
        if self.budget.exhausted():
            return f"per-cycle limit {limits.per_cycle} reached"
        return f"per-zone limit {limits.per_zone} reached ({self.zone_of(pod_key)})"

    def scopes(self, pod: Pod) -> dict[str, str]:
        scopes = {"node": pod.node_name or "", "namespace": pod.namespace}
        if pod.workload is not None:
            scopes["workload"] = str(pod.workload)
        zone = self.zone_of(pod.key)
        if zone is not None:
            scopes["zone"] = zone
        return scopes

    def accept(
        self, pod: Pod, candidate: Candidate, target: Domain, gain: float, node: str
    ) -> Move:
        self.budget.spend(self.scopes(pod))
        for pdb in self.indexes.pdbs_for(pod):
            self.pdb_spent[pdb.name] += 1
        self.occupancy.reserve(pod, node)
        self.node_order.reserved(node)
        topology = self.view.topology
        origin = _describe(topology, self.cost.locations[pod.key])
        self.cost.move(pod.key, target)
        move = Move(
            pod=pod.key,
            workload=str(pod.workload) if pod.workload else None,
            origin=origin,
            target=target,
            destination=target.describe(topology.levels),
            node=node,
            target_labels={
                topology.levels[index].label: value for index, value in enumerate(target.key)
            },
            controller=(
                (pod.controller_kind, pod.controller_name)
                if pod.controller_kind and pod.controller_name
                else None
            ),
            gain=gain,
            strategy=candidate.strategy,
            reason=candidate.reason,
            uid=pod.uid,
        )
        if move.workload is not None:
            self.moved_now.setdefault(move.workload, []).append(move.remembered(self.now))
        return move

    def attempt(self, candidate: Candidate, worth: Worth) -> list[Move] | tuple[SkipCategory, str]:
        """All of the candidate's moves, or why not. A joint move is tried on a copy of the
        cycle's models and budgets, so a refusal of its last pod undoes nothing by hand."""
        targets = candidate.targets
        trial = self if len(targets) == 1 else self.trial()
        share = worth.gain / len(targets)  # the moves' gains must add up to the cost they save
        moves = []
        for pod_key, target in targets.items():
            pod = self.view.snapshot.pods[pod_key]
            placed = trial.place(pod, candidate, target, worth)
            if isinstance(placed, tuple):
                category, reason = placed
                return category, reason if pod_key == candidate.pod else f"{pod_key}: {reason}"
            moves.append(trial.accept(pod, candidate, target, share, placed))
        if trial is not self:
            self.adopt(trial)
        return moves

    def place(
        self, pod: Pod, candidate: Candidate, target: Domain, worth: Worth
    ) -> str | tuple[SkipCategory, str]:
        """The node `pod` would go to in `target`, or why it may not move there."""
        refusal = self.refusal(pod, candidate, target, worth)
        if refusal is not None:
            return refusal
        node = self.node_in(pod, target)
        return ("no-fit", node.reason) if isinstance(node, _NoFit) else node

    def trial(self) -> _Cycle:
        occupancy = self.occupancy.copy()
        return dataclasses.replace(
            self,
            cost=self.cost.copy(),
            occupancy=occupancy,
            node_order=self.node_order.over(occupancy),
            budget=self.budget.copy(),
            pdb_spent=Counter(self.pdb_spent),
            moved_now={workload: list(moves) for workload, moves in self.moved_now.items()},
        )

    def adopt(self, trial: _Cycle) -> None:
        self.cost, self.occupancy, self.budget = trial.cost, trial.occupancy, trial.budget
        self.node_order = trial.node_order
        self.pdb_spent, self.moved_now = trial.pdb_spent, trial.moved_now

    def pdb_refusal(self, pod: Pod) -> str | None:
        pdbs = self.indexes.pdbs_for(pod)
        if len(pdbs) > 1:
            return "more than one PDB selects the pod (the Eviction API refuses it)"
        if not pdbs:
            return None
        pdb = pdbs[0]
        if not pdb.status_observed:
            return f"PDB {pdb.name} status not yet observed"
        if pdb.disruptions_allowed - self.pdb_spent[pdb.name] < 1:
            return f"PDB {pdb.name} allows no more disruptions"
        return None

    def spread_refusal(self, pod: Pod, target: Domain) -> str | None:
        """HA beats locality: a workload keeps the number of domains the policy asks for."""
        floor = self.policy.protections.min_spread
        if floor.domains <= 1 or pod.workload is None:
            return None
        topology = self.view.topology
        level = topology.level_index(floor.level)
        siblings = [p for p in self.indexes.pods_of(pod.workload) if p.key in self.cost.locations]

        def domains(moving: bool) -> set[Domain | None]:
            found = set()
            for sibling in siblings:
                location = self.cost.locations[sibling.key]
                if moving and sibling.key == pod.key:
                    location = topology.location_within(target)
                found.add(topology.domain_of(location, level))
            return found

        before, after = domains(False), domains(True)
        required = min(floor.domains, len(before))
        if len(after) < required:
            return f"workload would span {len(after)} {floor.level}s, below {required}"
        return None

    def node_in(self, pod: Pod, target: Domain) -> str | _NoFit:
        """The least loaded node in the target domain that the scheduler would accept."""
        reasons: Counter[str] = Counter()
        nodes = self.view.snapshot.nodes
        for _negative_score, node_name in self.node_order.of(target):
            if node_name == pod.node_name:
                continue
            refusal = rejection(
                pod, nodes[node_name], self.occupancy, self.policy.protections.honor_soft_spread
            )
            if refusal is None:
                return node_name
            reasons[refusal] += 1
        if not reasons:
            return _NoFit("no usable node in the target domain")
        reason, _count = reasons.most_common(1)[0]
        return _NoFit(f"no node in the target domain fits ({reason})")


@dataclass
class _NodeOrder:
    """Each target domain's nodes, least loaded first (by free share of CPU plus memory, then
    name), kept in that order as moves reserve room. node_in scored every node of the domain
    for each candidate that got that far: 3,333 nodes a zone at 10k nodes, which made planning
    with lifted limits quadratic. Now it checks nodes in this order and takes the first that
    fits, the same node the full scan picked."""

    topology: Topology
    nodes: Mapping[str, Node]
    occupancy: Occupancy
    ordered: dict[Domain, list[tuple[float, str]]] = field(default_factory=dict)
    keys: dict[str, tuple[float, str]] = field(default_factory=dict)
    """Each node's place in the orders it is in."""

    def over(self, occupancy: Occupancy) -> _NodeOrder:
        """A fresh order for a copy of the occupancy (a joint move's trial)."""
        return _NodeOrder(self.topology, self.nodes, occupancy)

    def of(self, domain: Domain) -> list[tuple[float, str]]:
        order = self.ordered.get(domain)
        if order is None:
            names = self.topology.nodes_by_domain.get(domain, [])
            order = self.ordered[domain] = sorted(map(self._key, names))
        return order

    def reserved(self, node_name: str) -> None:
        """Moves `node_name` to its place after room on it was reserved."""
        old = self.keys.pop(node_name, None)
        if old is None:
            return  # in no order yet
        new = self._key(node_name)
        location = self.topology.node_locations.get(node_name, ())
        for level in range(len(location)):
            domain = self.topology.domain_of(location, level)
            order = self.ordered.get(domain) if domain is not None else None
            if order is not None:
                del order[bisect_left(order, old)]
                insort(order, new)

    def _key(self, node_name: str) -> tuple[float, str]:
        key = self.keys.get(node_name)
        if key is None:
            node = self.nodes[node_name]
            free = self.occupancy.free(node)
            score = _free_share(free.cpu_millis, node.allocatable.cpu_millis) + _free_share(
                free.memory_bytes, node.allocatable.memory_bytes
            )
            key = self.keys[node_name] = (-score, node_name)
        return key


@dataclass(frozen=True)
class _NoFit:
    reason: str


def _free_share(free: int, allocatable: int) -> float:
    return free / allocatable if allocatable > 0 else 0.0


def plan(
    view: ClusterView,
    candidates: list[Candidate],
    policy: Policy,
    state: PlannerState,
    *,
    now: float,
    persistence_required: int,
) -> Plan:
    """Pick safe moves by largest gain; `state` must already have observed these candidates."""
    snapshot, topology = view.snapshot, view.topology
    price = price_of(policy, topology)
    tally = view.cost.tally(snapshot)
    before = tally.figures(topology, price)
    thresholds = policy.thresholds
    occupancy = view.occupancy.copy()
    zone_names = _zone_names(
        topology,
        policy,
        (view.cost.locations[pod] for candidate in candidates for pod in candidate.pods),
    )
    cycle = _Cycle(
        view=view,
        policy=policy,
        state=state,
        now=now,
        persistence_required=persistence_required,
        min_gain=thresholds.min_gain,
        cost=view.cost.copy(),
        occupancy=occupancy,
        node_order=_NodeOrder(topology, snapshot.nodes, occupancy),
        budget=_Budget(policy.limits, _every_zone(zone_names.values())),
        zone_names=zone_names,
        indexes=snapshot.indexes(),
        earlier_moves=_by_workload(state.recent_moves),
    )
    moves: list[Move] = []
    skipped: dict[str, Skip] = {}
    heap = [(-c.gain, index, c) for index, c in enumerate(candidates)]
    heapq.heapify(heap)
    prejudged = _Prejudged.of(view.cost, candidates)

    def skip(candidate: Candidate, category: SkipCategory, reason: str) -> None:
        if candidate.pod not in skipped:  # the first reason found for a pod is the one reported
            skipped[candidate.pod] = Skip(candidate.pod, reason, candidate.strategy, category)

    while heap and not (cycle.budget.exhausted() or cycle.budget.spent_in_every_zone()):
        _negative_gain, index, candidate = heapq.heappop(heap)
        if any(pod in cycle.cost.moved for pod in candidate.pods):
            continue
        worth = prejudged.get(index)
        if worth is None or not cycle.cost.untouched(candidate.pod):
            worth = cycle.cost.worth(candidate.targets)
        if heap and worth.gain < -heap[0][0] - _GAIN_TOLERANCE:
            heapq.heappush(heap, (-worth.gain, index, candidate))  # outdated by earlier picks
            continue
        attempted = cycle.attempt(candidate, worth)
        if isinstance(attempted, tuple):
            skip(candidate, *attempted)
            continue
        moves.extend(attempted)
        for move in attempted:
            skipped.pop(move.pod, None)
    for _negative_gain, _index, candidate in heap:
        if not any(pod in cycle.cost.moved for pod in candidate.pods):
            skip(candidate, "limit", cycle.spent_reason(candidate.pod))
    return Plan(
        moves=tuple(moves),
        skipped=tuple(sorted(skipped.values(), key=lambda s: s.pod)),
        before=before,
        after=cycle.cost.retally(tally, view.cost).figures(topology, price),
        candidates=len(candidates),
    )


@dataclass
class _Prejudged:
    """The worth of every one-pod candidate on the cycle's starting model, judged in numpy a
    batch at a time, in the order the loop pops them, each batch as large as all before it.
    A pod whose cost no pick has changed keeps it, so the loop works out a worth again only next
    to the moves already made: at 100k pods it judged some 84,000 candidates one by one to make
    9 moves. Judging them all up front took 0.4 s, though with the default limits the loop ends
    after a few dozen."""

    cost: CostModel
    candidates: list[Candidate]
    order: list[int]
    """The one-pod candidates' indexes, largest proposed gain first, as the heap pops them."""
    rank: dict[int, int]
    """Index -> its place in `order`."""
    worths: dict[int, Worth] = field(default_factory=dict)
    judged: int = 0
    """How many of `order` have been judged."""

    @classmethod
    def of(cls, cost: CostModel, candidates: list[Candidate]) -> _Prejudged:
        alone = [index for index, candidate in enumerate(candidates) if not candidate.companions]
        order = sorted(alone, key=lambda index: (-candidates[index].gain, index))
        return cls(cost, candidates, order, {index: rank for rank, index in enumerate(order)})

    def get(self, index: int) -> Worth | None:
        """None for a joint candidate, and where the arrays leave the worth to `worth`."""
        rank = self.rank.get(index)
        while rank is not None and self.judged <= rank:
            batch = self.order[self.judged : self.judged + max(_FIRST_BATCH, self.judged)]
            moves = [(self.candidates[i].pod, self.candidates[i].target) for i in batch]
            for judged_index, worth in zip(batch, self.cost.worths_alone(moves), strict=True):
                if worth is not None:
                    self.worths[judged_index] = worth
            self.judged += len(batch)
        return self.worths.get(index)


def _zone_names(
    topology: Topology, policy: Policy, locations: Iterable[Location]
) -> dict[Location, str | None]:
    """Each location's zone, named as limits and reasons name it; None where it is unknown.
    Worked out per location: a cluster has far fewer of those (one per node) than pods."""
    level = topology.level_index(policy.topology.zone_level)
    names: dict[Location, str | None] = {}
    for location in set(locations):
        zone = topology.domain_of(location, level)
        names[location] = None if zone is None else "/".join(zone.key)
    return names


def _every_zone(names: Iterable[str | None]) -> frozenset[str]:
    """The zones named, or none at all when one is unknown: no zone limit holds such a pod
    back, so the zones' limits cannot end the cycle."""
    zones = set(names)
    return frozenset() if None in zones else frozenset(zone for zone in zones if zone is not None)


def _by_workload(moves: Iterable[RecentMove]) -> dict[str, list[RecentMove]]:
    grouped: dict[str, list[RecentMove]] = {}
    for move in moves:
        grouped.setdefault(move.workload, []).append(move)
    return grouped


def _describe(topology: Topology, location: tuple[str | None, ...]) -> dict[str, str]:
    return {
        level.name: value
        for level, value in zip(topology.levels, location, strict=True)
        if value is not None
    }
