"""Where a replacement would land: the scheduler's default profile scores the nodes, with the
hint's preferred affinity as one score among the others in migrate mode, and picks one of the
best at random. A move whose replacement would land elsewhere, or only on a coin flip, is a
disruption for nothing, or for worse.
"""

from __future__ import annotations

from contextlib import nullcontext

from rebalancer.cluster.model import Pod
from rebalancer.cluster.scoring import Steering, best, scores, surely_inside
from rebalancer.cluster.topology import Domain
from rebalancer.planning.planning_pass import PlanningPass
from rebalancer.strategies.framework import Candidate


def landing_refusal(
    cycle: PlanningPass, pod: Pod, candidate: Candidate, target: Domain
) -> str | None:
    """The replacement goes where the scheduler's default profile scores highest: in evict
    mode unsteered, in migrate mode with the hint's preferred affinity as one score among
    the others, picking one of the best at random. A pod is moved only where more than half
    of those nodes lie in the target: elsewhere, or on a coin flip, the move is a disruption
    for nothing, or for worse. An evicted pod's own room counts as free: the conservative
    side, as a replacement then tends to go back where it was (a pod's grace period may yet
    hold it). A surge keeps the old pod until the new one is Ready, so its room stays
    taken."""
    occupancy = cycle.occupancy
    leaves = not cycle.surges(pod, candidate)
    steering = (
        Steering(target.node_labels(cycle.view.topology.levels), required=False)
        if cycle.rules.steered
        else None
    )
    inside = cycle.view.topology.nodes_by_domain.get(target, [])
    snapshot = cycle.view.snapshot
    # Unsteered, the scores do not depend on the target, and a pod is often tried in several
    # (narrowed, as proposed, widened): scored once while nothing has changed.
    labels = None if steering is None else tuple(sorted(steering.labels.items()))
    key = (pod.key, leaves, labels, occupancy.serial, occupancy.version)
    tied = cycle.best_nodes.get(key)
    if tied is None:
        with occupancy.without(pod) if leaves else nullcontext():
            if steering is not None and surely_inside(
                pod, snapshot, occupancy, steering, inside, weights=cycle.spread_weights
            ):
                return None
            tied = best(scores(pod, snapshot, occupancy, within={}, steering=steering))
        cycle.best_nodes[key] = tied
    members = set(inside)
    landed_inside = sum(name in members for name in tied)
    if tied and 2 * landed_inside > len(tied):
        return None
    outside = next((name for name in tied if name not in members), None)
    if landed_inside:
        hinted = " with the hint" if steering is not None else ""
        odds = (
            f"{landed_inside} of the {len(tied)} nodes the scheduler scores highest{hinted} "
            f"lie there, {outside} among the rest"
        )
        if steering is not None:
            return (
                f"its replacement, steered to {target.name}, would land there at best by "
                f"a coin flip: {odds}"
            )
        return (
            f"evicted, its replacement would land in {target.name} at best by a coin flip: {odds}"
        )
    where = f"on {outside}" if outside is not None else "nowhere (no node would take it)"
    if steering is not None:
        return (
            f"its replacement, steered to {target.name}, would still land {where}, where "
            "the scheduler scores highest with the hint among its scores"
        )
    return (
        f"evicted, its replacement would land {where}, outside {target.name}, where the "
        "scheduler scores highest (evict mode steers nothing)"
    )
