"""Moves that would undo a workload's recent moves, and the cooldown and back-off that hold a
workload after its moves: the rules that keep the rebalancer from moving pods back and forth.
"""

from __future__ import annotations

from collections.abc import Iterable

from rebalancer.cluster.model import Pod
from rebalancer.cluster.topology import Domain
from rebalancer.planning.planning_pass import PlanningPass
from rebalancer.planning.state import RecentMove

_MAX_BACKOFF_DOUBLINGS = 5


def cooldown_refusal(
    cycle: PlanningPass, pod: Pod, target: Domain, *, this_cycle: bool = True
) -> str | None:
    """A workload may keep moving the same way, but not undo a recent move nor move more pods
    in one cooldown than it has (a pod moved again so soon is churn: a replacement
    refined within the domain it was just moved into waits), and after missed landings it
    waits, doubling the wait with each miss in a row. `this_cycle`: this cycle's moves
    count too; not among a job's own moves, which are planned as one."""
    assert pod.workload is not None
    workload = str(pod.workload)
    cooldown = cycle.rules.cooldown_seconds
    misses = cycle.state.misses.get(workload, 0)
    last = cycle.state.last_moved.get(workload)
    if misses and last is not None:
        doublings = min(misses - 1, _MAX_BACKOFF_DOUBLINGS)
        remaining = cooldown * 2**doublings - (cycle.now - last)
        if remaining > 0:
            return (
                f"backing off {remaining:.0f}s more after {misses} replacement(s) "
                "missed their target"
            )
    recents = [
        *cycle.earlier_moves.get(workload, ()),
        *(cycle.moved_now.get(workload, ()) if this_cycle else ()),
    ]
    since = cycle.now - cooldown
    undone = _undone(cycle, recents, pod.key, target, since=since)
    if undone:
        recent = undone[-1]
        remaining = cooldown - (cycle.now - recent.at)
        return (
            f"would undo its workload's move into {entered_name(cycle, recent)}; "
            f"cooldown {remaining:.0f}s more"
        )
    fresh = [m.at for m in recents if m.at > since]
    if fresh and len(fresh) >= cycle.live_pods(pod.workload):
        remaining = cooldown - (cycle.now - min(fresh))
        return f"moved {len(fresh)} pods in this cooldown, as many as it has; {remaining:.0f}s more"
    return None


def undone(cycle: PlanningPass, workload: str, pod: str, target: Domain) -> list[RecentMove]:
    """The remembered moves of the workload that moving `pod` into `target` undoes, oldest
    first."""
    return _undone(cycle, cycle.earlier_moves.get(workload, ()), pod, target, since=None)


def _undone(
    cycle: PlanningPass,
    moves: Iterable[RecentMove],
    pod: str,
    target: Domain,
    *,
    since: float | None,
) -> list[RecentMove]:
    """Those of `moves` (made after `since`, when given) that the move undoes."""
    moves = [move for move in moves if since is None or move.at > since]
    if not moves:
        return []
    topology = cycle.view.topology
    location = topology.named(cycle.cost.locations[pod])
    destination = target.describe(topology.levels)
    return [move for move in moves if move.undone_by(location, destination)]


def entered_name(cycle: PlanningPass, move: RecentMove) -> str:
    """The domain a remembered move entered, widest level first, as domains are named everywhere
    else (a state read back may list its levels in another order)."""
    levels = [level.name for level in cycle.view.topology.levels]
    ordered = [name for name in levels if name in move.entered]
    ordered += [name for name in move.entered if name not in levels]
    return "/".join(move.entered[name] for name in ordered)
