"""`rebalancer simulate`: the real planner, cycle after cycle, on a simulated cluster.

Only the cluster is simulated. The planner, strategies and fit checks are the controller's own.
Each cycle re-derives the traffic from where pods run now, following each pair's routing model, so
the planner's assumption that flows stay pinned to pods is tested, not taken for granted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from rebalancer.cluster.model import Pod, Resources
from rebalancer.cluster.scoring import Steering
from rebalancer.config.policy import Policy
from rebalancer.config.resolved import price_of
from rebalancer.cost.figures import Figures
from rebalancer.errors import InputError
from rebalancer.planning.cycle import (
    Acted,
    build_view,
    judge_landings,
    plan_cycle,
    remember,
)
from rebalancer.planning.landing import expected_landing
from rebalancer.planning.state import PlannerState
from rebalancer.planning.types import Move
from rebalancer.simulator.cluster import SimulatedCluster, workload_key
from rebalancer.simulator.fair import FairProblem, Rules
from rebalancer.simulator.results import (
    CycleFigures,
    Optimum,
    SimulatedMode,
    SimulationResult,
    Violations,
)
from rebalancer.simulator.scenario import (
    LEVEL_LABELS,
    Scenario,
    WorkloadSpec,
    domain_counts,
)
from rebalancer.simulator.scheduler import Scheduler

_NOTHING = Resources()

DEFAULT_POLICY = """
# The scenarios' own levels and two strategies; the safety settings (persistence, cooldown,
# limits, thresholds) are the controller's defaults. The clock advances one interval per cycle.
topology:
  levels:
    - {name: zone, label: topology.kubernetes.io/zone, weight: 10}
    - {name: rack, label: topology.kubernetes.io/rack, weight: 3}
    - {name: host, label: kubernetes.io/hostname, weight: 1}
strategies:
  - {name: split-peers, args: {level: zone, down_to: host}}
  - {name: gang-consolidation, args: {level: rack, group_by: namespace}}
"""
"""What `rebalancer simulate` plans with when no --policy is given."""


def _figure_policy(policy: Policy) -> Policy:
    """The policy's levels and price, but every pair counted: figures report all the traffic."""
    thresholds = policy.thresholds.model_copy(update={"min_pair_rate": 0.0})
    return policy.model_copy(update={"thresholds": thresholds})


def measure(cluster: SimulatedCluster, policy: Policy, scenario: Scenario | None = None) -> Figures:
    """The figures under the cluster's traffic now, or under that of `scenario`."""
    counted = _figure_policy(policy)
    view = build_view(counted, cluster.snapshot, cluster.traffic(scenario))
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
    *,
    rerouted: int = 0,
    averaged: Scenario | None = None,
    steps: tuple[tuple[int, dict[str, float]], ...] = (),
) -> CycleFigures:
    """`averaged`: the scenario with its phases averaged, for a phased one."""
    figures = measure(cluster, policy)
    evictions, landed, refused = counts
    average = None if averaged is None else measure(cluster, policy, averaged).weighted_cost
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
        rerouted,
        average,
        steps,
    )


def _optima(
    cluster: SimulatedCluster, policy: Policy, scenario: Scenario
) -> tuple[Optimum | None, Optimum | None]:
    """The fair optimum, under the rules the planner obeys (protected pods and pods without
    traffic above the thresholds stay, soft spread as the policy honours it, the HA floor), and
    the unconstrained one beside it, for the traffic of a phased scenario averaged over a
    period. HiGHS is in the `sim` extra: the controller never needs it."""
    try:
        from rebalancer.simulator.bound import lower_bound  # noqa: PLC0415
        from rebalancer.simulator.optimum import solve  # noqa: PLC0415
    except ImportError:
        raise InputError(
            "simulate --optimum needs the HiGHS solver: pip install 'topology-rebalancer[sim]'"
        ) from None
    problem = FairProblem.of(cluster, policy, scenario)
    snapshot, topology, rates = problem.snapshot, problem.topology, problem.rates

    def best(rules: Rules) -> Optimum | None:
        exact = solve(snapshot, topology, rates, problem.judged, rules)
        if exact is not None:
            return exact
        bound = lower_bound(snapshot, topology, rates, rules)
        return None if bound is None else Optimum(bound, None, exact=False)

    constrained, free = best(problem.fair), best(Rules())
    if (
        constrained is not None
        and not constrained.exact
        and free is not None
        and free.weighted_cost > constrained.weighted_cost
    ):
        # Every fair placement is a placement: no fair one beats the unconstrained optimum,
        # a tighter bound than the domain relaxation when that one is loose.
        constrained = Optimum(free.weighted_cost, None, exact=False)
    return constrained, free


def bound_within_limits(
    scenario: Scenario, policy: Policy, *, seed: int, cycles: int, best: float
) -> float | None:
    """A cost that no run of `cycles` cycles under the policy's limits goes below, from the
    placement `simulate` starts at with this seed (`best`: the fair optimum or a bound on it).
    None where the limits do not bound the pods moved, or no bound within them is in reach."""
    try:
        from rebalancer.simulator.bound import budgeted_bound  # noqa: PLC0415
    except ImportError:
        raise InputError(
            "bounds need the HiGHS solver: pip install 'topology-rebalancer[sim]'"
        ) from None
    cluster = SimulatedCluster(scenario.in_phase(0), Scheduler(seed))
    problem = FairProblem.of(cluster, policy, scenario)
    moves = problem.moves_allowed(policy, cycles)
    if moves is None:
        return None
    before = measure(cluster, policy, problem.judged).weighted_cost
    if moves == 0:
        return before
    scale = max(before - best, 0.0) / moves
    found = budgeted_bound(
        problem.snapshot, problem.topology, problem.rates, problem.fair, moves=moves, scale=scale
    )
    return None if found is None else max(found, best)  # `best` bounds every run too


@dataclass
class _Acting:
    """One simulated cycle's moves, made as the controller makes them."""

    cluster: SimulatedCluster
    policy: Policy
    mode: SimulatedMode
    by_key: dict[str, WorkloadSpec]
    now: float
    evicted: list[Acted] = field(default_factory=list)
    surged: list[Move] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)
    """Workloads whose surge was undone, which back off as the controller's do."""
    moved: list[str] = field(default_factory=list)
    landed: int = 0
    refused: int = 0
    fresh: Counter[str] = field(default_factory=Counter)
    """Per workload, the replacements made this cycle that the simulator has Ready at once,
    which the API server would not count as healthy yet."""

    def make(self, moves: list[Move]) -> None:
        """One move, or all the moves of a job: those are evicted first and replaced after, as
        a job's pods all go at once and its ranks may take each other's room."""
        evicted = []
        for move in moves:
            old = self.cluster.snapshot.pods[move.pod]
            workload = self.by_key[workload_key(old)]
            if move.method == "surge":
                self._surge(move, workload, old)
            elif self._evicted(workload, move):
                evicted.append((move, workload, old))
        for move, workload, old in evicted:
            self._replace(move, workload, old)

    def _surge(self, move: Move, workload: WorkloadSpec, old: Pod) -> None:
        """Make-before-break: the new pod, steered as the required hint steers it, then the old
        one removed; a new pod outside the target is removed instead."""
        cluster = self.cluster
        steering = Steering(move.target_labels, True)
        new = cluster.replacement(workload, old, steering=steering)
        labels = cluster.snapshot.nodes[new.node_name].labels if new.node_name else {}
        if move.target_labels.items() <= labels.items():
            cluster.remove(move.pod)
            self.landed += 1
            self.surged.append(move)
            self.moved.append(workload.key)
        else:
            cluster.remove(new.key)
            self.undone.append(workload.key)

    def _evicted(self, workload: WorkloadSpec, move: Move) -> bool:
        """The Eviction API's check (replacements are not Ready before the next cycle), then the
        pod removed."""
        cluster = self.cluster
        if (
            len(cluster.ready_of(workload)) - self.fresh[workload.key] <= workload.promised_ready
            and workload.pdb is not None
        ):
            self.refused += 1
            return False
        cluster.remove(move.pod)
        return True

    def _replace(self, move: Move, workload: WorkloadSpec, old: Pod) -> None:
        cluster, migrate = self.cluster, self.policy.migrate
        steering = None
        if self.mode == "migrate":
            steering = Steering(move.target_labels, migrate.required)
        new = cluster.replacement(workload, old, steering=steering)
        self.fresh[workload.key] += new.ready
        if new.node_name:
            self.landed += (
                move.target_labels.items() <= cluster.snapshot.nodes[new.node_name].labels.items()
            )
        hint = None
        if steering is not None:  # the hint the controller records before a migrate eviction
            hint = expected_landing(
                move,
                required=steering.required,
                weight=migrate.weight,
                expires=self.now + migrate.hint_ttl_seconds,
            )
        self.evicted.append(Acted(move, hint))
        self.moved.append(workload.key)


def simulate(
    scenario: Scenario,
    policy: Policy,
    *,
    cycles: int,
    mode: SimulatedMode,
    seed: int,
    optimum: bool = False,
    moves: bool = True,
    routing: bool = False,
    steps: bool = False,
) -> SimulationResult:
    """Run the planner `cycles` times; the clock advances one policy interval per cycle. With
    `optimum`, also solve for the best placement from the start, to hold the result against.
    `moves`: make the plan's moves; `routing`: make the routing changes it recommends, each
    taking effect from the next cycle, as a patched Service's hints do. `steps`: measure the
    crossing after each move too (see `CycleFigures.steps`)."""
    cluster = SimulatedCluster(scenario.in_phase(0), Scheduler(seed))
    best = unconstrained = None
    if optimum:
        best, unconstrained = _optima(cluster, policy, scenario)
    by_key = {w.key: w for w in scenario.workloads}
    acting = policy.model_copy(update={"mode": mode})
    state = PlannerState()
    averaged = scenario.averaged() if scenario.traffic_phases else None
    rows = [_row(0, cluster, policy, (0, 0, 0), averaged=averaged)]
    history: list[tuple[Move, float]] = []
    for number in range(1, cycles + 1):
        now = number * policy.interval_seconds
        cluster.scenario = scenario.in_phase(number)
        cluster.clock = now
        cluster.refresh_budgets()
        cluster.refresh_services()
        state, _judged = judge_landings(state, cluster.snapshot, now)
        outcome = plan_cycle(acting, cluster.snapshot, cluster.traffic(), state, now=now)
        assert outcome.plan is not None  # simulated traffic never fails
        rerouted = 0
        for advice in outcome.routing if routing else ():
            if advice.recommended is not None:  # a Service's key is its workload's
                cluster.distributions[advice.service] = advice.recommended
                rerouted += 1
        acting_now = _Acting(cluster, acting, mode, by_key, now)
        made = [(0, measure(cluster, policy).crossing)] if steps else []
        for batch in _batches(outcome.plan.moves if moves else ()):
            acting_now.make(batch)
            if steps:
                done = len(acting_now.evicted) + len(acting_now.surged)
                made.append((done, measure(cluster, policy).crossing))
        evicted, surged = acting_now.evicted, acting_now.surged
        history += [(item.move, now) for item in evicted] + [(move, now) for move in surged]
        # Judged by the next cycle's judge_landings, as the controller judges them; a surge
        # judged its own landing.
        state = remember(outcome.state, evicted, policy, now).record_moves(
            surged, now, policy.cooldown
        )
        for workload in acting_now.undone:
            state = state.surge_result(f"Deployment/{workload}", landed=False, now=now)
        counts = (len(evicted) + len(surged), acting_now.landed, acting_now.refused)
        moved = acting_now.moved
        rows.append(
            _row(
                number,
                cluster,
                policy,
                counts,
                tuple(dict.fromkeys(moved)),
                rerouted=rerouted,
                averaged=averaged,
                steps=tuple(made),
            )
        )
    return SimulationResult(
        scenario.name,
        mode,
        seed,
        tuple(rows),
        policy.price.currency,
        best,
        optimum,
        tuple(history),
        unconstrained,
    )


def _batches(moves: Iterable[Move]) -> list[list[Move]]:
    """The plan's moves in order, a job's together where its first one is."""
    batches: list[list[Move]] = []
    jobs: dict[str, list[Move]] = {}
    for move in moves:
        if move.job is None:
            batches.append([move])
        elif move.job in jobs:
            jobs[move.job].append(move)
        else:
            jobs[move.job] = [move]
            batches.append(jobs[move.job])
    return batches


def naive_baseline(scenario: Scenario, policy: Policy, *, seed: int) -> SimulationResult:
    """What a traffic-blind fix does: one pass that evicts every pod with any cross-zone flow
    (through the Eviction API, so PDBs still refuse some) and lets the scheduler re-place it.
    With traffic phases, a flow of any phase counts."""
    cluster = SimulatedCluster(scenario.in_phase(0), Scheduler(seed))
    by_key = {w.key: w for w in scenario.workloads}
    zone_label = LEVEL_LABELS["zone"]
    averaged = scenario.averaged() if scenario.traffic_phases else None
    rows = [_row(0, cluster, policy, (0, 0, 0), averaged=averaged)]
    cluster.refresh_budgets()
    zone_of = {
        key: cluster.snapshot.nodes[pod.node_name].labels.get(zone_label)
        for key, pod in cluster.snapshot.pods.items()
        if pod.node_name
    }
    crossing = sorted(
        {
            pod
            for a, b in cluster.traffic(averaged).rates
            if zone_of.get(a) != zone_of.get(b)
            for pod in (a, b)
        }
    )
    evicted = refused = 0
    fresh: Counter[str] = Counter()  # as in _Acting
    moved: list[str] = []
    for key in crossing:
        old = cluster.snapshot.pods[key]
        workload = by_key[workload_key(old)]
        healthy = len(cluster.ready_of(workload)) - fresh[workload.key]
        if workload.pdb is not None and healthy <= workload.promised_ready:
            refused += 1
            continue
        cluster.remove(key)
        fresh[workload.key] += cluster.replacement(workload, old, steering=None).ready
        evicted += 1
        moved.append(workload.key)
    counts = (evicted, 0, refused)
    rows.append(_row(1, cluster, policy, counts, tuple(dict.fromkeys(moved)), averaged=averaged))
    return SimulationResult(scenario.name, "evict", seed, tuple(rows), policy.price.currency)
