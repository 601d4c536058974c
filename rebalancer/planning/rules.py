"""Whether a pod may move into a domain now: every safety rule, judged once for all strategies,
cheapest first, with the reason of the first that forbids it. What is refused is reported with
that reason, so a dry run tells the operator exactly why a pod stayed.
"""

from __future__ import annotations

from collections.abc import Callable

from rebalancer.cluster.model import Pod
from rebalancer.cluster.topology import Domain
from rebalancer.cost.model import Worth
from rebalancer.planning.cooldown import cooldown_refusal, entered_name, undone
from rebalancer.planning.job_failures import failure_refusal
from rebalancer.planning.planning_pass import PlanningPass
from rebalancer.planning.protections import protection_reason, surge_refusal
from rebalancer.planning.state import streak_key
from rebalancer.planning.types import SkipCategory
from rebalancer.strategies.framework import Candidate

_UNDO_GAIN = 2.0
"""A move that undoes a remembered one must save this many times what that one saved. Moves
picked greedily, each worth a little as the others left the cluster, otherwise trade a workload
back and forth while the traffic stays as it was (see docs/design.md)."""


def refusal(
    cycle: PlanningPass, pod: Pod, candidate: Candidate, target: Domain, worth: Worth
) -> tuple[SkipCategory, str] | None:
    """The first rule that forbids moving `pod` into `target` now, cheapest checks first;
    `worth` is the whole candidate's."""
    protected = protection_reason(pod, cycle.view.snapshot, cycle.indexes, cycle.rules)
    if protected is not None:
        return "protected", protected
    if pod.workload is not None:
        # Whatever the method now: a surge under way holds its Deployment.
        if str(pod.workload) in cycle.surging:
            return "surge", "a surge of its Deployment is under way"
        if cycle.surges(pod, candidate):
            refused = surge_refusal(pod, cycle.view.snapshot, cycle.rules)
            if refused is None and str(pod.workload) in cycle.moved_now:
                refused = "another pod of its Deployment is surged this cycle"
            if refused is not None:
                return "surge", refused
        settling = cycle.settling.reason(pod.workload)
        if settling is not None:
            return "settling", f"workload still settling: {settling}"
        held = cooldown_refusal(cycle, pod, target, this_cycle=candidate.job is None)
        if held is not None:
            return "cooldown", held
    seen = cycle.state.streaks.get(streak_key(candidate), 0)
    if seen < cycle.persistence_required:
        return "persistence", (
            f"proposed {seen} of {cycle.persistence_required} consecutive cycles"
        )
    undoes = [] if pod.workload is None else undone(cycle, str(pod.workload), pod.key, target)
    if undoes and seen < cycle.undo_required:
        latest = undoes[-1]
        return "persistence", (
            f"proposed {seen} of {cycle.undo_required} consecutive cycles, as it would "
            f"undo its workload's move into {entered_name(cycle, latest)} "
            f"{cycle.now - latest.at:.0f}s ago"
        )
    # Relative to the pod's own cost, not the cluster's: a cluster-wide share would grow with
    # the cluster until no single move could clear it.
    threshold = max(cycle.min_gain, cycle.rules.thresholds.min_gain_ratio * worth.cost)
    gain = worth.gain
    if gain <= 0 or gain < threshold:
        return "below-threshold", f"gain {gain:.3g} below threshold {threshold:.3g}"
    if undoes and pod.key != candidate.pod and candidate.job is None:
        return "persistence", (
            f"would undo its workload's move into {entered_name(cycle, undoes[-1])}: a pod is "
            "never taken along by another's move out of where its workload was moved"
        )
    dearest = max(undoes, key=lambda move: move.gain or 0.0, default=None)
    saved = gain / len(candidate.pods)  # each move of a joint one records its share
    if dearest is not None and dearest.gain is not None and saved <= _UNDO_GAIN * dearest.gain:
        return "persistence", (
            f"would undo its workload's move into {entered_name(cycle, dearest)}, which saved "
            f"{dearest.gain:.3g}, for less than twice that ({saved:.3g})"
        )
    checks: tuple[tuple[SkipCategory, Callable[[], str | None]], ...] = (
        # A job's limits are checked once, for all its pods, in `attempt`.
        ("limit", lambda: None if candidate.job else cycle.budget.refusal(cycle.scopes(pod))),
        ("pdb", lambda: pdb_refusal(cycle, pod, candidate)),
        # A job's restart fails all of its pods: counted once, in `attempt`.
        ("limit", lambda: None if candidate.job else failure_refusal(cycle, pod)),
        ("spread", lambda: cycle.floor.refusal(pod, target, cycle.cost.locations)),
    )
    for category, check in checks:
        reason = check()
        if reason is not None:
            return category, reason
    for joined in cycle.anchored.get(pod.key, ()):
        if target.key[: len(joined.key)] != joined.key:
            return "cooldown", f"a peer moved to join it in {joined.name} this cycle"
    return None


def pdb_refusal(cycle: PlanningPass, pod: Pod, candidate: Candidate) -> str | None:
    """A surge evicts nothing and keeps as many pods Ready as desired throughout, so it
    needs no disruption allowed unless the policy says so (surge.zero_disruption_pdb)."""
    surge = cycle.rules.surge
    if surge is not None and surge.zero_disruption_pdb and cycle.surges(pod, candidate):
        return None
    pdbs = cycle.indexes.pdbs_for(pod)
    if len(pdbs) > 1:
        return "more than one PDB selects the pod (the Eviction API refuses it)"
    if not pdbs:
        return None
    pdb = pdbs[0]
    if not pdb.status_observed:
        return f"PDB {pdb.name} status not yet observed"
    if pdb.disruptions_allowed - cycle.pdb_spent[pdb.name] < 1:
        return f"PDB {pdb.name} allows no more disruptions"
    return None
