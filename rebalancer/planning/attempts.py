"""A candidate tried in the planning pass: every pod of it judged by the rules and given a node,
all of its moves made or none. A joint move is tried on a copy of the pass's models and budgets,
so a refusal of its last pod undoes nothing by hand. A move into a wide domain is first tried in
the finer domain within it where it saves most, and a target placement's move whose replacement
would land outside its domain in the narrowest domain around it where it would land.
"""

from __future__ import annotations

from collections import Counter

from rebalancer.cluster.model import Pod, WorkloadRef
from rebalancer.cluster.topology import Domain
from rebalancer.cost.model import Worth
from rebalancer.planning.job_failures import restart_failures, restart_refusal
from rebalancer.planning.landing_odds import landing_refusal
from rebalancer.planning.narrowing import narrower
from rebalancer.planning.nodes import NoFit
from rebalancer.planning.planning_pass import PlanningPass
from rebalancer.planning.protections import protection_reason
from rebalancer.planning.rules import refusal
from rebalancer.planning.target import STRATEGY as TARGET_PLACEMENT
from rebalancer.planning.types import Move, SkipCategory
from rebalancer.strategies.framework import Candidate


def attempt(
    cycle: PlanningPass, candidate: Candidate, worth: Worth
) -> list[Move] | tuple[SkipCategory, str]:
    """All of the candidate's moves, or why not. A joint move is tried on a copy of the
    pass's models and budgets, so a refusal of its last pod undoes nothing by hand."""
    targets = candidate.targets
    failing: Counter[WorkloadRef] = Counter()
    scopes: dict[tuple[str, str], None] = {}
    if candidate.job is not None:
        refused = restart_refusal(cycle, candidate, worth)
        if refused is not None:
            return refused
        stays = cycle.jobs[candidate.job].stays
        if stays is not None:
            lead = cycle.view.snapshot.pods[candidate.pod]
            protected = protection_reason(lead, cycle.view.snapshot, cycle.indexes, cycle.rules)
            if protected is not None:
                return "protected", protected
            return "no-fit", f"job {candidate.job}: {stays}"
        costs = restart_failures(cycle, cycle.jobs[candidate.job], targets)
        if isinstance(costs, str):
            return "limit", costs
        failing = costs
        pods = cycle.view.snapshot.pods
        scopes = dict.fromkeys(item for p in targets for item in cycle.scopes(pods[p]).items())
        over = cycle.budget.refusal_once(scopes)
        if over is not None:
            return "limit", over
    if len(targets) > 1 and candidate.job is None:
        # The rules only tighten as pods are accepted, so a pod they refuse now would be
        # refused in the trial too: judged first, before a trial copies the cycle's models
        # (milliseconds each at 100,000 pods).
        for pod_key, target in targets.items():
            pod = cycle.view.snapshot.pods[pod_key]
            refused = refusal(cycle, pod, candidate, target, worth)
            if refused is not None:
                category, reason = refused
                return category, reason if pod_key == candidate.pod else f"{pod_key}: {reason}"
    trial = cycle if len(targets) == 1 and candidate.job is None else cycle.trial()
    if candidate.job is not None:  # all its pods go at once: each leaves room for others
        for pod_key in targets:
            trial.occupancy.release(cycle.view.snapshot.pods[pod_key])
    share = worth.gain / len(targets)  # the moves' gains must add up to the cost they save
    moves = []
    for pod_key, target in targets.items():
        pod = cycle.view.snapshot.pods[pod_key]
        placed = _place(trial, pod, candidate, target, worth)
        if isinstance(placed, tuple):
            category, reason = placed
            return category, reason if pod_key == candidate.pod else f"{pod_key}: {reason}"
        moves.append(trial.accept(pod, candidate, target, share, placed))
    if candidate.job is not None:
        trial.budget.spend_once(scopes)
        trial.failures_spent.update(failing)
        # Each evicted pod holds its room until it is gone: later candidates may not count
        # on it, only the job's own replacements, which wait for it.
        for pod_key in targets:
            pod = cycle.view.snapshot.pods[pod_key]
            assert pod.node_name is not None  # protection_reason: running on a known node
            trial.occupancy.hold(pod.requests, pod.node_name)
            trial.node_order.reserved(pod.node_name)
    if trial is not cycle:
        cycle.adopt(trial)
    return moves


def attempt_narrowed(cycle: PlanningPass, candidate: Candidate) -> list[Move] | None:
    """The candidate's moves into the finer domain within its target where they save most
    and every rule allows them (`narrower`); None: there is none, and the candidate is
    tried as proposed."""
    for inside in narrower(cycle.cost, cycle.view.topology, candidate):
        narrowed = candidate.into(inside)
        attempted = attempt(cycle, narrowed, cycle.cost.worth(narrowed.targets))
        if not isinstance(attempted, tuple):
            return attempted
    return None


def attempt_widened(cycle: PlanningPass, candidate: Candidate, widest: int) -> list[Move] | None:
    """A target placement's move whose replacement would land outside its domain, made
    into the narrowest domain around it, down to level `widest`, where it would land, of
    those holding none of the moving pods yet (the scheduler's spreading can outweigh a
    hint to one crowded host, not to its rack); None: there is none."""
    if candidate.strategy != TARGET_PLACEMENT:
        return None
    locations = cycle.cost.locations
    there = candidate.target
    for level in range(there.level - 1, widest - 1, -1):
        wider = Domain(level, there.key[: level + 1])
        if any(locations[pod][: level + 1] == wider.key for pod in candidate.pods):
            break
        widened = candidate.into(wider)
        attempted = attempt(cycle, widened, cycle.cost.worth(widened.targets))
        if not isinstance(attempted, tuple):
            return attempted
    return None


def _place(
    cycle: PlanningPass, pod: Pod, candidate: Candidate, target: Domain, worth: Worth
) -> str | tuple[SkipCategory, str]:
    """The node `pod` would go to in `target`, or why it may not move there."""
    refused = refusal(cycle, pod, candidate, target, worth)
    if refused is not None:
        return refused
    node = cycle.node_in(pod, target)
    if isinstance(node, NoFit):
        return "no-fit", node.reason
    if cycle.rules.predict_landing:
        elsewhere = landing_refusal(cycle, pod, candidate, target)
        if elsewhere is not None:
            return "landing", elsewhere
    return node
