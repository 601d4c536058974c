"""`rebalancer simulate`: the real planner, cycle after cycle, on a simulated cluster.

Only the cluster is simulated. The planner, strategies and fit checks are the controller's own.
Each cycle re-derives the traffic from where pods run now, following each pair's routing model, so
the planner's assumption that flows stay pinned to pods is tested, not taken for granted.
"""

from __future__ import annotations

from collections.abc import Iterable

from rebalancer.config.policy import Policy
from rebalancer.planning.cycle import judge_landings, plan_cycle, remember
from rebalancer.planning.state import PlannerState
from rebalancer.planning.types import Move
from rebalancer.simulator.acting import Acting
from rebalancer.simulator.cluster import SimulatedCluster
from rebalancer.simulator.measures import cycle_row, measure
from rebalancer.simulator.results import SimulatedMode, SimulationResult
from rebalancer.simulator.scenario import Scenario
from rebalancer.simulator.scheduler import Scheduler
from rebalancer.simulator.yardsticks import optima

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
        best, unconstrained = optima(cluster, policy, scenario)
    by_key = {w.key: w for w in scenario.workloads}
    acting = policy.model_copy(update={"mode": mode})
    state = PlannerState()
    averaged = scenario.averaged() if scenario.traffic_phases else None
    rows = [cycle_row(0, cluster, policy, (0, 0, 0), averaged=averaged)]
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
        acting_now = Acting(cluster, acting, mode, by_key, now)
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
            cycle_row(
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
