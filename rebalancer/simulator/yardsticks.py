"""What a run is held against: the fair optimum (or a bound on it) and the unconstrained one,
the least cost the policy's limits allow, and a traffic-blind fix (the naive baseline).

Apart from the loop (run.py): the solvers are in the `sim` extra and imported only here, when
asked for.
"""

from __future__ import annotations

from collections import Counter

from rebalancer.config.policy import Policy
from rebalancer.errors import InputError
from rebalancer.simulator.cluster import SimulatedCluster, workload_key
from rebalancer.simulator.fair import FairProblem, Rules
from rebalancer.simulator.measures import cycle_row, measure
from rebalancer.simulator.results import Optimum, SimulationResult
from rebalancer.simulator.scenario import LEVEL_LABELS, Scenario
from rebalancer.simulator.scheduler import Scheduler


def optima(
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


def naive_baseline(scenario: Scenario, policy: Policy, *, seed: int) -> SimulationResult:
    """What a traffic-blind fix does: one pass that evicts every pod with any cross-zone flow
    (through the Eviction API, so PDBs still refuse some) and lets the scheduler re-place it.
    With traffic phases, a flow of any phase counts."""
    cluster = SimulatedCluster(scenario.in_phase(0), Scheduler(seed))
    by_key = {w.key: w for w in scenario.workloads}
    zone_label = LEVEL_LABELS["zone"]
    averaged = scenario.averaged() if scenario.traffic_phases else None
    rows = [cycle_row(0, cluster, policy, (0, 0, 0), averaged=averaged)]
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
    fresh: Counter[str] = Counter()  # as in Acting
    moved: list[str] = []
    for key in crossing:
        old = cluster.snapshot.pods[key]
        workload = by_key[workload_key(old)]
        if not workload.recreated:
            continue  # evicted, it would be gone for good
        healthy = len(cluster.ready_of(workload)) - fresh[workload.key]
        if workload.pdb is not None and healthy <= workload.promised_ready:
            refused += 1
            continue
        cluster.remove(key)
        fresh[workload.key] += cluster.replacement(workload, old, steering=None).ready
        evicted += 1
        moved.append(workload.key)
    counts = (evicted, 0, refused)
    rows.append(
        cycle_row(1, cluster, policy, counts, tuple(dict.fromkeys(moved)), averaged=averaged)
    )
    return SimulationResult(scenario.name, "evict", seed, tuple(rows), policy.price.currency)
