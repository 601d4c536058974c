"""One cycle, from a snapshot and a traffic answer to a plan and the state after it, with no I/O
of its own.

The CLI, the controller and the simulator all call `plan_cycle`, so the moves a user previews with
`rebalancer plan` are the moves the controller would make on the same data. The controller and the
simulator also share the bookkeeping around it: `judge_landings` before planning, `remember` after
acting, so a simulated run backs off and cools down exactly as the controller would.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

from rebalancer.cluster.doubts import stray_pods
from rebalancer.cluster.fit import Occupancy
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Topology
from rebalancer.config.policy import Policy
from rebalancer.config.resolved import PlanningRules, thresholds_of
from rebalancer.cost.edge_arrays import EdgeArrays
from rebalancer.cost.figures import Figures, Price
from rebalancer.cost.model import CostModel
from rebalancer.cost.pod_pairs import PodCostModel
from rebalancer.cost.routing import RoutingAdvice, advise, changes
from rebalancer.cost.service_calls import Calls, ServiceCalls
from rebalancer.cost.workload_calls import WorkloadCalls
from rebalancer.cost.workload_pairs import WorkloadCostModel
from rebalancer.planning.jobs import Job, whole_jobs
from rebalancer.planning.landing import Hint, Judged, Landing, expected_landing, judge
from rebalancer.planning.owned_gangs import OwnedGang, owned_gangs
from rebalancer.planning.planner import plan
from rebalancer.planning.state import PlannerState
from rebalancer.planning.target import proposals, target_placement
from rebalancer.planning.types import Move, Plan
from rebalancer.strategies.framework import Candidate, ClusterView
from rebalancer.strategies.gang_consolidation import PLUGIN_NAME as GANG_CONSOLIDATION
from rebalancer.strategies.registry import STRATEGIES
from rebalancer.traffic.model import Traffic, TrafficFailure, WorkloadTraffic

CycleResult = Literal["ok", "skipped-no-data", "skipped-stale", "error"]
"""How a controller cycle ended: only `ok` may act; the others moved nothing, and say why."""


@dataclass(frozen=True)
class CycleOutcome:
    topology: Topology
    state: PlannerState
    """The state to carry into the next cycle (streaks advanced; the moves made are added by
    `remember` once acted on)."""
    plan: Plan | None = None
    failure: TrafficFailure | None = None
    traffic: Traffic | None = None
    stray_pods: Mapping[str, str] = field(default_factory=dict)
    """Pods on nodes the snapshot lacks (pod key -> node): never moved, said in warnings."""
    routing: tuple[RoutingAdvice, ...] = ()
    """Per Service with calls, what PreferSameZone would keep in its zone."""
    today: Figures | None = None
    """The traffic as routed now, when the plan was made on the traffic as the recommended
    routing would send it: the plan's `before` is then after those routing changes."""
    owned_gangs: tuple[OwnedGang, ...] = ()
    """Gangs another scheduler places, spread wider than they need: reported, never moved."""


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run a cycle without Python's cyclic garbage collector. A cycle builds millions of small
    dicts and tuples, none in reference cycles, so reference counting frees them all; the
    collector, started by allocation counts, would walk every live object again and again while
    they are built, which more than doubled the time to decode a large answer. Nesting keeps
    the outer setting."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def topology_of(policy: Policy, snapshot: Snapshot) -> Topology:
    return Topology.from_node_labels(
        policy.topology.resolved_levels,
        {name: node.labels for name, node in snapshot.nodes.items()},
    )


def build_view(
    policy: Policy, snapshot: Snapshot, traffic: Traffic, topology: Topology | None = None
) -> ClusterView:
    topology = topology or topology_of(policy, snapshot)
    cost = cost_model(policy, snapshot, traffic, topology)
    return ClusterView(snapshot, topology, cost, Occupancy.from_snapshot(snapshot))


def cost_model(
    policy: Policy, snapshot: Snapshot, traffic: Traffic, topology: Topology
) -> CostModel:
    node_locations = topology.node_locations
    locations = {
        key: node_locations[pod.node_name]
        for key, pod in snapshot.pods.items()
        if pod.node_name in node_locations
    }
    min_pair_rate = thresholds_of(policy).min_pair_rate
    if isinstance(traffic, WorkloadTraffic):
        return WorkloadCostModel.of(traffic, topology, locations, min_pair_rate)
    arrays = EdgeArrays.of(traffic, locations, min_pair_rate)
    return PodCostModel(arrays, topology, {pod: locations[pod] for pod in arrays.pods})


def propose(policy: Policy, view: ClusterView) -> list[Candidate]:
    candidates: list[Candidate] = []
    for config in policy.strategies:
        if config.enabled:
            candidates.extend(STRATEGIES[config.name].build(config.args).propose(view))
    return candidates


def plan_cycle(
    policy: Policy,
    snapshot: Snapshot,
    traffic: Traffic | TrafficFailure,
    state: PlannerState,
    *,
    now: float,
    persistence_required: int | None = None,
) -> CycleOutcome:
    """Plan one cycle; a traffic failure plans nothing and resets the persistence streaks."""
    if isinstance(traffic, TrafficFailure):
        return CycleOutcome(
            topology_of(policy, snapshot),
            state.observe([]),
            failure=traffic,
            stray_pods=stray_pods(snapshot),
        )
    topology = topology_of(policy, snapshot)
    rules = PlanningRules.of(policy, topology)
    routing, planned = weigh_routing(policy, snapshot, traffic, rules.price)
    view = build_view(policy, snapshot, planned, topology)
    candidates = propose(policy, view)
    jobs: dict[str, Job] = {}
    if policy.jobs.whole:
        candidates, jobs = whole_jobs(view, candidates, rules, state.last_moved, now)
    levels = target_levels(policy, topology) if rules.steered else None
    target = None
    if levels is not None:
        leads = (c.pod for c in sorted(candidates, key=lambda c: -c.gain))
        target = target_placement(view, rules, state, now, levels=levels, leads=leads)
        candidates += proposals(target, view.cost)
    placed = {} if target is None else {pod: d.key for pod, d in target.places.items()}
    observed = state.observe(candidates).model_copy(update={"target": placed or None})
    required = policy.persistence.cycles if persistence_required is None else persistence_required
    undo = policy.persistence.undo_cycles if persistence_required is None else required
    result = plan(
        view,
        candidates,
        rules,
        observed,
        now=now,
        persistence_required=required,
        undo_required=undo,
        jobs=jobs,
        target=target,
    )
    gangs = tuple(owned_gangs(view, gang_level(policy, topology)))
    today = None
    if planned is not traffic:
        actual = cost_model(policy, snapshot, traffic, topology)
        today = actual.tally(snapshot).figures(topology, rules.price)
    return CycleOutcome(
        topology,
        observed,
        plan=result,
        traffic=traffic,
        stray_pods=stray_pods(snapshot),
        routing=routing,
        today=today,
        owned_gangs=gangs,
    )


def target_levels(policy: Policy, topology: Topology) -> range | None:
    """The levels the target placement's moves are made at, widest first: the widest any
    enabled strategy judges at, down to the one the target places pods at (see `Target.level`).
    None when it is off, or no strategy runs to say how fine."""
    enabled = [config.args for config in policy.strategies if config.enabled]
    if not policy.target.enabled or not enabled:
        return None
    finest = max(topology.level_index(args.finest) for args in enabled)
    if policy.target.level is not None:
        finest = topology.level_index(policy.target.level)
    widest = min(finest, *(topology.level_index(args.level) for args in enabled))
    return range(widest, finest + 1)


def gang_level(policy: Policy, topology: Topology) -> int:
    """The level gangs are judged at: gang-consolidation's, when it runs, else the narrowest
    level in force with a domain of several nodes (a rack where racks are labelled, not the
    host), where a training gang's traffic is."""
    for config in policy.strategies:
        if config.enabled and config.name == GANG_CONSOLIDATION:
            return topology.level_index(config.args.level)
    shared = {d.level for d, nodes in topology.nodes_by_domain.items() if len(nodes) > 1}
    in_force = [i for i in range(len(topology.levels)) if i not in topology.not_in_force]
    zone = topology.level_index(policy.topology.zone_level)
    return max((i for i in in_force if i in shared), default=zone)


def weigh_routing(
    policy: Policy, snapshot: Snapshot, traffic: Traffic, price: Price
) -> tuple[tuple[RoutingAdvice, ...], Traffic]:
    """The routing advice, and the traffic to plan moves on: as the recommended routing would
    send it with `routing.plan_around`. The calls are let go on return: at 100k pods they hold
    tens of MB, and kept through the stages after they made building the graph 0.13 s slower."""
    calls = service_calls(policy, snapshot, traffic)
    routing = routing_advice(policy, calls, price)
    assumed = changes(routing, snapshot) if policy.routing.plan_around else {}
    if assumed and calls is not None:
        return routing, calls.rerouted(assumed)
    return routing, traffic


def service_calls(policy: Policy, snapshot: Snapshot, traffic: Traffic) -> Calls | None:
    """The traffic read as calls to Services, when the policy weighs routing."""
    if not policy.routing.advise or not snapshot.services:
        return None
    if isinstance(traffic, WorkloadTraffic):
        return WorkloadCalls.of(traffic, snapshot)
    return ServiceCalls.of(traffic, snapshot)


def routing_advice(policy: Policy, calls: Calls | None, price: Price) -> tuple[RoutingAdvice, ...]:
    """Per Service, what PreferSameZone would keep in its zone."""
    if calls is None:
        return ()
    return tuple(advise(calls, policy.routing.max_endpoint_load, price))


def judge_landings(
    state: PlannerState, snapshot: Snapshot, now: float
) -> tuple[PlannerState, list[Judged]]:
    """The replacements awaited that can be judged on this snapshot, and the state that keeps
    the rest awaited and counts each workload's misses (a miss backs it off, a landing in its
    target clears them)."""
    judged, pending = judge(state.landings, snapshot, now)
    return state.with_landings(judged, pending), judged


@dataclass(frozen=True)
class Acted:
    """An eviction that went through, with the hint recorded for its replacement (migrate)."""

    move: Move
    hint: Hint | None = None


def remember(
    state: PlannerState, acted: Iterable[Acted], policy: Policy, now: float
) -> PlannerState:
    """The state after acting: each move made is remembered (see `cooldown.memory_seconds`), and its
    replacement awaited, to be judged by a later `judge_landings`. Without a hint (evict mode)
    the replacement is awaited in the planned domain all the same, so a workload whose
    replacements the scheduler keeps putting elsewhere backs off in evict mode too."""
    done = list(acted)
    state = state.record_moves([item.move for item in done], now, policy.cooldown)
    landings = []
    for item in done:
        hint = item.hint or expected_landing(
            item.move,
            required=False,
            weight=policy.migrate.weight,
            expires=now + policy.migrate.hint_ttl_seconds,
        )
        if hint is not None:
            landings.append(Landing(hint=hint, evicted_pod=item.move.pod, evicted_at=now))
    return state.awaiting(landings)
