"""`rebalancer simulate`: the real planner, cycle after cycle, on a simulated cluster.

Only the cluster is simulated. The planner, strategies and fit checks are the controller's own,
and the snapshot they read is parsed from Kubernetes-shaped objects by the real parser. Each
cycle re-derives the traffic from where pods run now, following each pair's routing model, so the
planner's assumption that flows stay pinned to pods is tested, not taken for granted.

The simulated scheduler places each new pod in the way kube-scheduler's default profile does,
in miniature. The filters are the planner's own (`fit.rejection`). The scores are: least
allocated (weight 1); the default soft spreading over zones and hosts, scored and normalized as
PodTopologySpread does (weight 2); and preferred node affinity, which migrate mode adds to a
replacement (weight 2). Ties are broken by a seeded random choice, so a run is repeatable.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from rebalancer.engine import build_view, plan_cycle, topology_of
from rebalancer.fit import Occupancy, rejection
from rebalancer.graph import Figures
from rebalancer.landing import Judged, Landing, LandingResult, expected_landing
from rebalancer.optimum import Optimum, solve
from rebalancer.planner import Move, PlannerState, price_of, protection_reason
from rebalancer.policy import Policy
from rebalancer.report import rounded
from rebalancer.scenario import (
    LEVEL_LABELS,
    ZONE_LABEL,
    LevelName,
    PlacedPod,
    Scenario,
    WorkloadSpec,
    domain_counts,
    node_object,
    pair_rates,
    workload_objects,
)
from rebalancer.snapshot import Node, Pod, Resources, Snapshot, parse_items
from rebalancer.traffic import PodTraffic

_NOTHING = Resources()

SimulatedMode = Literal["evict", "migrate"]
DEFAULT_POLICY = """
# The scenarios' own levels and two strategies; the safety settings (persistence, cooldown,
# limits, thresholds) are the controller's defaults. The clock advances one interval per cycle.
topology:
  levels:
    - {name: zone, label: topology.kubernetes.io/zone, weight: 10}
    - {name: rack, label: topology.kubernetes.io/rack, weight: 3}
    - {name: host, label: kubernetes.io/hostname, weight: 1}
strategies:
  - {name: split-peers, args: {level: zone, down_to: rack}}
  - {name: gang-consolidation, args: {level: rack, group_by: namespace}}
"""
"""What `rebalancer simulate` plans with when no --policy is given."""
_LEAST_ALLOCATED, _SPREAD, _NODE_AFFINITY = 1, 2, 2
"""kube-scheduler's default weights for the score plugins the simulation models."""
_DEFAULT_ZONE_SKEW, _DEFAULT_HOST_SKEW = 5, 3
"""The max skews of kube-scheduler's default (ScheduleAnyway) spread constraints."""


@dataclass(frozen=True)
class Steering:
    """What migrate mode adds to a replacement: node affinity for the target's labels. Its
    weight does not matter here: as a pod's only preferred term it always normalizes to 100."""

    labels: Mapping[str, str]
    required: bool


def _fraction(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


class Scheduler:
    """Filter with the planner's own fit checks, then score the way the default profile does."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def place(
        self,
        pod: Pod,
        snapshot: Snapshot,
        occupancy: Occupancy,
        *,
        within: Mapping[str, str],
        steering: Steering | None,
    ) -> str | None:
        required = dict(within)
        if steering is not None and steering.required:
            required.update(steering.labels)
        feasible = [
            node
            for node in snapshot.nodes.values()
            if required.items() <= node.labels.items()
            and rejection(pod, node, occupancy, honor_soft_spread=False) is None
        ]
        if not feasible:
            return None
        spreading = self._spreading(pod, feasible, snapshot, occupancy)
        scores: dict[str, float] = {}
        for node in feasible:
            score = _LEAST_ALLOCATED * self._least_allocated(pod, node, occupancy)
            score += _SPREAD * spreading[node.name]
            if steering is not None and steering.labels.items() <= node.labels.items():
                score += _NODE_AFFINITY * 100  # the only preferred term, so it normalizes to 100
            scores[node.name] = score
        best = max(scores.values())
        return self.random.choice(sorted(name for name, s in scores.items() if s == best))

    @staticmethod
    def _least_allocated(pod: Pod, node: Node, occupancy: Occupancy) -> float:
        free = occupancy.free(node) - pod.requests
        allocatable = node.allocatable
        cpu = _fraction(free.cpu_millis, allocatable.cpu_millis)
        memory = _fraction(free.memory_bytes, allocatable.memory_bytes)
        return 100 * (cpu + memory) / 2

    @staticmethod
    def _spreading(
        pod: Pod, feasible: list[Node], snapshot: Snapshot, occupancy: Occupancy
    ) -> dict[str, float]:
        """PodTopologySpread's score under the default constraints (zone, max skew 5; host,
        max skew 3; both ScheduleAnyway), normalized as kube-scheduler does: fewer pods of the
        same workload nearby scores higher, and the spread of scores is compressed."""
        zone_of = {name: node.labels.get(ZONE_LABEL) for name, node in snapshot.nodes.items()}
        per_zone: Counter[str | None] = Counter()
        per_host: Counter[str] = Counter()
        for other, node_name in occupancy.placed_in([pod.namespace]):
            if other.key != pod.key and other.workload == pod.workload:
                per_host[node_name] += 1
                per_zone[zone_of[node_name]] += 1
        zone_weight = math.log(len({zone_of[n.name] for n in feasible}) + 2)
        host_weight = math.log(len(feasible) + 2)
        raw = {
            node.name: per_zone[zone_of[node.name]] * zone_weight
            + (_DEFAULT_ZONE_SKEW - 1)
            + per_host[node.name] * host_weight
            + (_DEFAULT_HOST_SKEW - 1)
            for node in feasible
        }
        highest, lowest = max(raw.values()), min(raw.values())
        if highest == lowest:
            return dict.fromkeys(raw, 100.0)
        return {name: 100 * (highest + lowest - value) / highest for name, value in raw.items()}


@dataclass
class SimulatedCluster:
    """Nodes, workloads and pods of a scenario, changed only by evictions and replacements."""

    scenario: Scenario
    scheduler: Scheduler
    snapshot: Snapshot = field(init=False)
    occupancy: Occupancy = field(init=False)
    _owners: dict[str, list[tuple[dict[str, Any], str]]] = field(init=False, default_factory=dict)
    _serial: Iterator[int] = field(init=False, default_factory=itertools.count)

    def __post_init__(self) -> None:
        items: list[tuple[Any, str]] = [
            (_ready(node_object(spec)), "Node") for spec in self.scenario.node_specs()
        ]
        for workload in self.scenario.workloads:
            owners = _owner_objects(workload)
            self._owners[workload.key] = owners
            items += owners
            items += [(o, "PodDisruptionBudget") for o in workload_objects(workload)[1:]]
        self.snapshot = parse_items(items, f"scenario {self.scenario.name}")
        self.occupancy = Occupancy.from_snapshot(self.snapshot)
        for workload in self.scenario.workloads:
            for ordinal in range(workload.replicas):
                self.create(workload, ordinal, steering=None, within=_labels(workload.start_in))

    def create(
        self,
        workload: WorkloadSpec,
        ordinal: int,
        *,
        steering: Steering | None,
        within: Mapping[str, str] | None = None,
    ) -> Pod:
        """A new pod of `workload`, placed by the scheduler, or Pending when nothing fits."""
        raw = _pod_object(workload, ordinal, next(self._serial))
        parsed = parse_items([*self._owners[workload.key], (raw, "Pod")], "simulated pod")
        pod = parsed.pods[f"{workload.namespace}/{raw['metadata']['name']}"]
        node = self.scheduler.place(
            pod, self.snapshot, self.occupancy, within=within or {}, steering=steering
        )
        placed = msgspec.structs.replace(
            pod, node_name=node, phase="Running" if node else "Pending", ready=node is not None
        )
        self.snapshot.pods[placed.key] = placed
        if node is not None:
            self.occupancy.reserve(placed, node)
        return placed

    def remove(self, pod_key: str) -> Pod:
        pod = self.snapshot.pods.pop(pod_key)
        self.occupancy.release(pod)
        return pod

    def placed(self) -> list[PlacedPod]:
        return [
            PlacedPod(
                pod.key,
                _workload_key(pod),
                self.snapshot.nodes[pod.node_name].labels.get(ZONE_LABEL),
            )
            for pod in self.snapshot.pods.values()
            if pod.node_name
        ]

    def ready_of(self, workload: WorkloadSpec) -> list[Pod]:
        return [
            pod
            for pod in self.snapshot.pods.values()
            if pod.ready and _workload_key(pod) == workload.key
        ]

    def refresh_budgets(self) -> None:
        """PDB status as the disruption controller would write it: allowed = healthy - desired."""
        by_name = {(w.namespace, w.name): w for w in self.scenario.workloads}
        self.snapshot.pdbs = [
            dataclasses.replace(
                pdb,
                disruptions_allowed=max(
                    0, len(self.ready_of(by_name[key])) - by_name[key].promised_ready
                ),
                status_observed=True,
            )
            for pdb in self.snapshot.pdbs
            if (key := (pdb.namespace, pdb.name)) in by_name
        ]

    def traffic(self) -> PodTraffic:
        """The scenario's flows for the pods running now, undirected, as Prometheus would give."""
        return PodTraffic.of(pair_rates(self.scenario, self.placed()))


def _ready(node: dict[str, Any]) -> dict[str, Any]:
    """A node as its kubelet (kwok, on the real control plane) reports it: Ready."""
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return node


def _workload_key(pod: Pod) -> str:
    """The scenario workload a pod belongs to: its namespace and `app` label."""
    return f"{pod.namespace}/{pod.labels.get('app', '')}"


def _labels(domain: Mapping[LevelName, str]) -> dict[str, str]:
    return {LEVEL_LABELS[level]: value for level, value in domain.items()}


def _owner_objects(workload: WorkloadSpec) -> list[tuple[dict[str, Any], str]]:
    """The workload object, and for a Deployment the ReplicaSet its pods belong to."""
    [body, *_pdb] = workload_objects(workload)
    body = {**body, "metadata": {**body["metadata"], "uid": f"uid-{workload.key}"}}
    owners: list[tuple[dict[str, Any], str]] = [(body, workload.kind)]
    if workload.kind == "Deployment":
        replica_set = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{workload.name}-sim",
                "namespace": workload.namespace,
                "ownerReferences": [
                    {"kind": "Deployment", "name": workload.name, "controller": True}
                ],
            },
            "spec": {"replicas": workload.replicas},
        }
        owners.append((replica_set, "ReplicaSet"))
    return owners


def _pod_object(workload: WorkloadSpec, ordinal: int, serial: int) -> dict[str, Any]:
    [body, *_pdb] = workload_objects(workload)
    template = body["spec"]["template"]
    if workload.kind == "Deployment":
        name, owner = f"{workload.name}-sim-{serial:05d}", ("ReplicaSet", f"{workload.name}-sim")
    elif workload.kind == "StatefulSet":
        name, owner = f"{workload.name}-{ordinal}", ("StatefulSet", workload.name)
    else:
        name, owner = f"{workload.name}-{serial:05d}", ("Job", workload.name)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "labels": template["metadata"]["labels"],
            "ownerReferences": [{"kind": owner[0], "name": owner[1], "controller": True}],
            "annotations": {"topology-rebalancer.io/ordinal": str(ordinal)},
        },
        "spec": template["spec"],
        "status": {"phase": "Pending"},
    }


# --- Running cycles -------------------------------------------------------------------------

Violations = dict[str, int]
"""{pdb, capacity, spread}: counts of broken rules; a correct run keeps all three at zero."""


@dataclass(frozen=True)
class CycleFigures:
    cycle: int
    crossing: dict[str, float]
    """Traffic crossing each level once the cycle's replacements run (level 0: before any)."""
    weighted_cost: float
    monthly_cost: float | None
    evictions: int
    landed_in_target: int
    refused_by_pdb: int
    violations: Violations
    moved: tuple[str, ...] = ()
    """The scenario workloads (namespace/name) the cycle evicted pods of, once each."""


@dataclass(frozen=True)
class SimulationResult:
    scenario: str
    mode: SimulatedMode
    seed: int
    cycles: tuple[CycleFigures, ...]
    """Cycle 0 is the starting placement; then one row per cycle run."""
    currency: str
    optimum: Optimum | None = None
    """The best placement from the start (asked for and computable), or None."""
    optimum_asked: bool = False
    moves: tuple[tuple[Move, float], ...] = ()
    """Every eviction with its time, for loop checks; the figures above are per cycle."""

    def summary(self) -> dict[str, Any]:
        first, last = self.cycles[0], self.cycles[-1]
        violations: Violations = dict.fromkeys(("pdb", "capacity", "spread"), 0)
        for row in self.cycles:
            for rule, count in row.violations.items():
                violations[rule] += count
        return {
            "weighted_cost_before": first.weighted_cost,
            "weighted_cost_after": last.weighted_cost,
            "monthly_cost_before": first.monthly_cost,
            "monthly_cost_after": last.monthly_cost,
            "crossing_before": first.crossing,
            "crossing_after": last.crossing,
            "moves": sum(row.evictions for row in self.cycles),
            "landed_in_target": sum(row.landed_in_target for row in self.cycles),
            "refused_by_pdb": sum(row.refused_by_pdb for row in self.cycles),
            "violations": violations,
            **(
                {
                    "optimal_weighted_cost": self.optimum and self.optimum.weighted_cost,
                    "min_moves_to_optimum": self.optimum and self.optimum.min_moves,
                }
                if self.optimum_asked
                else {}
            ),
        }


def _figure_policy(policy: Policy) -> Policy:
    """The policy's levels and price, but every pair counted: figures report all the traffic."""
    thresholds = policy.thresholds.model_copy(update={"min_pair_rate": 0.0})
    return policy.model_copy(update={"thresholds": thresholds})


def measure(cluster: SimulatedCluster, policy: Policy) -> Figures:
    counted = _figure_policy(policy)
    view = build_view(counted, cluster.snapshot, cluster.traffic())
    return view.cost.figures(cluster.snapshot, price_of(counted, view.topology))


def violations(cluster: SimulatedCluster) -> Violations:
    """Rules broken now: budgets short of Ready pods, nodes over capacity, hard spread skewed."""
    pdb = sum(
        1
        for workload in cluster.scenario.workloads
        if len(cluster.ready_of(workload)) < workload.promised_ready
    )
    capacity = sum(
        1
        for node in cluster.snapshot.nodes.values()
        if not cluster.occupancy.requested.get(node.name, _NOTHING).fits_in(node.allocatable)
    )
    spread = 0
    for workload in cluster.scenario.workloads:
        for constraint in (c for c in workload.spread if c.hard):
            counts = domain_counts(
                LEVEL_LABELS[constraint.level],
                (node.labels for node in cluster.snapshot.nodes.values()),
                (
                    cluster.snapshot.nodes[pod.node_name].labels
                    for pod in cluster.ready_of(workload)
                    if pod.node_name
                ),
            )
            if counts and max(counts.values()) - min(counts.values()) > constraint.max_skew:
                spread += 1
    return {"pdb": pdb, "capacity": capacity, "spread": spread}


def _row(
    number: int,
    cluster: SimulatedCluster,
    policy: Policy,
    counts: tuple[int, int, int],
    moved: tuple[str, ...] = (),
) -> CycleFigures:
    figures = measure(cluster, policy)
    evictions, landed, refused = counts
    return CycleFigures(
        number,
        figures.crossing,
        figures.weighted_cost,
        figures.monthly_cross_zone_cost,
        evictions,
        landed,
        refused,
        violations(cluster),
        moved,
    )


def _protected(snapshot: Snapshot, policy: Policy) -> frozenset[str]:
    """The pods the policy never moves, which the optimum must leave where they are."""
    indexes = snapshot.indexes()
    return frozenset(
        key
        for key, pod in snapshot.pods.items()
        if protection_reason(pod, snapshot, indexes, policy) is not None
    )


def simulate(
    scenario: Scenario,
    policy: Policy,
    *,
    cycles: int,
    mode: SimulatedMode,
    seed: int,
    optimum: bool = False,
) -> SimulationResult:
    """Run the planner `cycles` times; the clock advances one policy interval per cycle. With
    `optimum`, also solve for the best placement from the start, to hold the result against."""
    cluster = SimulatedCluster(scenario.in_phase(0), Scheduler(seed))
    best = None
    if optimum:
        topology = topology_of(policy, cluster.snapshot)
        protected = _protected(cluster.snapshot, policy)
        best = solve(cluster.snapshot, topology, cluster.traffic().rates, scenario, protected)
    by_key = {w.key: w for w in scenario.workloads}
    acting = policy.model_copy(update={"mode": mode})
    state = PlannerState()
    rows = [_row(0, cluster, policy, (0, 0, 0))]
    history: list[tuple[Move, float]] = []
    for number in range(1, cycles + 1):
        now = number * policy.interval_seconds
        cluster.scenario = scenario.in_phase(number)
        cluster.refresh_budgets()
        outcome = plan_cycle(acting, cluster.snapshot, cluster.traffic(), state, now=now)
        assert outcome.plan is not None  # simulated traffic never fails
        evicted: list[Move] = []
        judged: list[Judged] = []
        moved: list[str] = []
        landed = refused = 0
        disrupted: Counter[str] = Counter()
        for move in outcome.plan.moves:
            old = cluster.snapshot.pods[move.pod]
            workload = by_key[_workload_key(old)]
            # The Eviction API's check: replacements are not Ready before the next cycle.
            if (
                len(cluster.ready_of(workload)) - disrupted[workload.key] <= workload.promised_ready
                and workload.pdb is not None
            ):
                refused += 1
                continue
            disrupted[workload.key] += 1
            cluster.remove(move.pod)
            steering = None
            if mode == "migrate":
                steering = Steering(move.target_labels, acting.migrate.required)
            new = cluster.create(workload, _ordinal(old), steering=steering)
            result: LandingResult = "not-scheduled"
            if new.node_name:
                labels = cluster.snapshot.nodes[new.node_name].labels
                inside = move.target_labels.items() <= labels.items()
                result = "landed-in-target" if inside else "landed-elsewhere"
                landed += inside
            hint = expected_landing(
                move,
                required=steering is not None and steering.required,
                weight=acting.migrate.weight,
                expires=now + acting.migrate.hint_ttl_seconds,
            )
            if hint is not None:  # judged at once, as the controller does at its next cycle
                landing = Landing(hint=hint, evicted_pod=move.pod, evicted_at=now)
                judged.append(Judged(landing, result, new.key))
            evicted.append(move)
            moved.append(workload.key)
        history += [(move, now) for move in evicted]
        state = outcome.state.record_moves(evicted, now, policy.cooldown.per_workload_seconds)
        state = state.with_landings(judged, [])
        counts = (len(evicted), landed, refused)
        rows.append(_row(number, cluster, policy, counts, tuple(dict.fromkeys(moved))))
    return SimulationResult(
        scenario.name, mode, seed, tuple(rows), policy.price.currency, best, optimum, tuple(history)
    )


def naive_baseline(scenario: Scenario, policy: Policy, *, seed: int) -> SimulationResult:
    """What a traffic-blind fix does: one pass that evicts every pod with any cross-zone flow
    (through the Eviction API, so PDBs still refuse some) and lets the scheduler re-place it."""
    cluster = SimulatedCluster(scenario, Scheduler(seed))
    by_key = {w.key: w for w in scenario.workloads}
    zone_label = LEVEL_LABELS["zone"]
    rows = [_row(0, cluster, policy, (0, 0, 0))]
    cluster.refresh_budgets()
    zone_of = {
        key: cluster.snapshot.nodes[pod.node_name].labels.get(zone_label)
        for key, pod in cluster.snapshot.pods.items()
        if pod.node_name
    }
    crossing = sorted(
        {
            pod
            for a, b in cluster.traffic().rates
            if zone_of.get(a) != zone_of.get(b)
            for pod in (a, b)
        }
    )
    evicted = refused = 0
    disrupted: Counter[str] = Counter()
    moved: list[str] = []
    for key in crossing:
        old = cluster.snapshot.pods[key]
        workload = by_key[_workload_key(old)]
        healthy = len(cluster.ready_of(workload)) - disrupted[workload.key]
        if workload.pdb is not None and healthy <= workload.promised_ready:
            refused += 1
            continue
        disrupted[workload.key] += 1
        cluster.remove(key)
        cluster.create(workload, _ordinal(old), steering=None)
        evicted += 1
        moved.append(workload.key)
    rows.append(_row(1, cluster, policy, (evicted, 0, refused), tuple(dict.fromkeys(moved))))
    return SimulationResult(scenario.name, "evict", seed, tuple(rows), policy.price.currency)


def _ordinal(pod: Pod) -> int:
    return int(pod.annotations.get("topology-rebalancer.io/ordinal", "0"))


def result_json(result: SimulationResult) -> dict[str, Any]:
    return {
        "scenario": result.scenario,
        "mode": result.mode,
        "seed": result.seed,
        "currency": result.currency,
        "cycles": rounded([dataclasses.asdict(row) for row in result.cycles]),
        "summary": rounded(result.summary()),
    }


def result_table(result: SimulationResult) -> str:
    levels = list(result.cycles[0].crossing)
    header = ["cycle", *(f"{level} x" for level in levels), "cost", "per month", "moves"]
    header += ["landed", "violations"]
    lines = ["  ".join(f"{name:>10}" for name in header)]
    for row in result.cycles:
        monthly = "-" if row.monthly_cost is None else f"{row.monthly_cost:.2f}"
        cells = [str(row.cycle), *(f"{row.crossing[level]:.1f}" for level in levels)]
        cells += [f"{row.weighted_cost:.1f}", monthly, str(row.evictions)]
        cells += [str(row.landed_in_target), str(sum(row.violations.values()))]
        lines.append("  ".join(f"{cell:>10}" for cell in cells))
    summary = result.summary()
    lines += ["", f"{'':24}{'before':>12}{'after':>12}"]
    lines.append(
        f"{'weighted cost':<24}{summary['weighted_cost_before']:>12.1f}"
        f"{summary['weighted_cost_after']:>12.1f}"
    )
    for level in levels:
        lines.append(
            f"{'crossing ' + level:<24}{summary['crossing_before'][level]:>12.1f}"
            f"{summary['crossing_after'][level]:>12.1f}"
        )
    if result.optimum_asked:
        best = result.optimum
        lines.append(
            "optimum: not computable here"
            if best is None
            else f"{'optimum':<24}{best.weighted_cost:>24.1f}  (min moves {best.min_moves})"
        )
    lines.append(
        f"moves {summary['moves']}, landed in target {summary['landed_in_target']}, "
        f"refused by PDB {summary['refused_by_pdb']}, violations {summary['violations']}"
    )
    return "\n".join(lines)
