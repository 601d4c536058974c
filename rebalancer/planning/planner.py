"""From the strategies' candidates to a short, safe plan.

The planner is greedy on gain and re-judges each candidate against a model that already contains
every move picked before it, so two moves never claim the same gain and the predicted cost can only
fall. Every safety rule is applied, once, for all strategies (planning/rules.py); what it refuses
is reported with the reason, so a dry-run tells the operator exactly why a pod stayed.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from rebalancer.cluster.scoring import SpreadWeights
from rebalancer.config.resolved import PlanningRules
from rebalancer.planning.attempts import attempt, attempt_narrowed, attempt_widened
from rebalancer.planning.budget import Budget, every_zone, zone_names
from rebalancer.planning.floor import HaFloor
from rebalancer.planning.jobs import Job
from rebalancer.planning.nodes import NodeOrder
from rebalancer.planning.planning_pass import PlanningPass
from rebalancer.planning.prejudged import Prejudged
from rebalancer.planning.protections import WorkloadSettling
from rebalancer.planning.state import PlannerState, by_workload
from rebalancer.planning.target import STRATEGY as TARGET_PLACEMENT
from rebalancer.planning.target_search import Target
from rebalancer.planning.types import Move, Plan, Skip, SkipCategory
from rebalancer.strategies.framework import Candidate, ClusterView

_GAIN_TOLERANCE = 1e-9


def plan(
    view: ClusterView,
    candidates: list[Candidate],
    rules: PlanningRules,
    state: PlannerState,
    *,
    now: float,
    persistence_required: int,
    undo_required: int | None = None,
    jobs: Mapping[str, Job] | None = None,
    target: Target | None = None,
) -> Plan:
    """Pick safe moves by largest gain; `state` must already have observed these candidates.
    `undo_required`: the persistence of a move that would undo a remembered one, past its
    cooldown (at least `persistence_required`). `target`: the cycle's target placement, which
    other strategies' moves of the pods it places may not contradict."""
    snapshot, topology = view.snapshot, view.topology
    price = rules.price
    tally = view.cost.tally(snapshot)
    before = tally.figures(topology, price)
    thresholds = rules.thresholds
    occupancy = view.occupancy.copy()
    indexes = snapshot.indexes()
    zones = zone_names(
        topology,
        rules.zone_level,
        (view.cost.locations[pod] for candidate in candidates for pod in candidate.pods),
    )
    cycle = PlanningPass(
        view=view,
        rules=rules,
        state=state,
        now=now,
        persistence_required=persistence_required,
        undo_required=max(undo_required or 0, persistence_required),
        min_gain=thresholds.min_gain,
        cost=view.cost.copy(),
        occupancy=occupancy,
        node_order=NodeOrder(topology, snapshot.nodes, occupancy),
        budget=Budget(rules.limits, every_zone(zones.values())),
        zone_names=zones,
        spread_weights=SpreadWeights.of(snapshot),
        indexes=indexes,
        floor=HaFloor(rules, topology, indexes, state, now, view.cost.locations),
        settling=WorkloadSettling(snapshot, indexes),
        earlier_moves=by_workload(state.recent_moves),
        surging=frozenset(record.workload for record in state.surges),
        jobs=jobs or {},
    )
    moves: list[Move] = []
    skipped: dict[str, Skip] = {}
    # Of equal gains the one with fewer moves first: the same saving for fewer disruptions (a
    # pair moved into a third zone saves what one pod moved to its peer saves, say).
    heap = [(-c.gain, len(c.pods), index, c) for index, c in enumerate(candidates)]
    heapq.heapify(heap)
    prejudged = Prejudged.of(view.cost, candidates)

    def skip(candidate: Candidate, category: SkipCategory, reason: str) -> None:
        if candidate.pod not in skipped:  # the first reason found for a pod is the one reported
            skipped[candidate.pod] = Skip(candidate.pod, reason, candidate.strategy, category)

    while heap and not (cycle.budget.exhausted() or cycle.budget.spent_in_every_zone()):
        _negative_gain, size, index, candidate = heapq.heappop(heap)
        if any(pod in cycle.cost.moved for pod in candidate.pods):
            continue
        worth = prejudged.get(index)
        if worth is None or not cycle.cost.untouched(candidate.pod):
            worth = cycle.cost.worth(candidate.targets)
        if heap and worth.gain < -heap[0][0] - _GAIN_TOLERANCE:
            heapq.heappush(heap, (-worth.gain, size, index, candidate))  # outdated by picks
            continue
        if target is not None and (elsewhere := _elsewhere(target, candidate)) is not None:
            if not any(pod in target.places for pod in candidate.pods):
                skip(candidate, "target", elsewhere)  # else the target's own move says why
            continue
        narrowed = attempt_narrowed(cycle, candidate)
        attempted = attempt(cycle, candidate, worth) if narrowed is None else narrowed
        if target is not None and isinstance(attempted, tuple) and attempted[0] == "landing":
            attempted = attempt_widened(cycle, candidate, target.widest) or attempted
        if isinstance(attempted, tuple):
            skip(candidate, *attempted)
            continue
        moves.extend(attempted)
        for move in attempted:
            skipped.pop(move.pod, None)
    spent: dict[str | None, str] = {}  # by zone: at 100,000 pods most candidates are left
    for _negative_gain, _size, _index, candidate in heap:
        if candidate.pod not in skipped and not any(p in cycle.cost.moved for p in candidate.pods):
            zone = cycle.zone_of(candidate.pod)
            if zone not in spent:
                spent[zone] = cycle.spent_reason(zone)
            skip(candidate, "limit", spent[zone])
    return Plan(
        moves=tuple(moves),
        skipped=tuple(sorted(skipped.values(), key=lambda s: s.pod)),
        before=before,
        after=cycle.cost.retally(tally, view.cost).figures(topology, price),
        candidates=len(candidates),
    )


def _elsewhere(target: Target, candidate: Candidate) -> str | None:
    """Why another strategy's candidate may not move its pods: the target placement moves one
    of them, and only its own moves, each into the pod's domain there, head for it (a wider
    move would be narrowed elsewhere), or keeps one where others are to join it."""
    if candidate.strategy == TARGET_PLACEMENT or candidate.job is not None:
        return None
    for pod in candidate.pods:
        host = target.places.get(pod)
        if host is not None:
            return f"the target placement puts {pod} on {host.name}"
        if pod in target.anchors:
            return f"the target placement keeps {pod} where it is, for others to join"
    return None
