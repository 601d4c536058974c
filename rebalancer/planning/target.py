"""A target placement for the cycle: where a local search puts each pod, so that the moves of
the coming cycles head for one placement rather than each following its own greedy pull.

Greedy on gain, the planner sends the first pod of a group of services to the host that holds
most of its peers at that moment, and the rest follow it there. The best place for the group may
be another host, beside pods that cannot move (a single-replica load generator, a store), and
once the group has gathered no single or paired move pays to take it there: it would have to
move at once. The search sees that before the first move. It places pods in the domains of one
level (the host, with the built-in simulation policy). It descends, moving one pod at a time
into the domain of its peers where it saves most (a pod may move several times); then it tries
each group of pods that share a domain and talk to each other in the domains of their outside
peers, with a descent around the group after it, and keeps a group's first try that saves
anything, until none does or its work runs out. Every step keeps to what the planner would
allow: pods it protects and the ranks of jobs (moved whole, planning/jobs.py) stay, a workload
keeps its HA floor, no move undoes a remembered one of its workload, and a pod goes only to a
node the scheduler would take it on, with room counted as the placement fills (an evicted
pod's room is free again by the time the next cycle's moves are made).

Each cycle's search resumes from the last cycle's target, so the moves of consecutive cycles
head the same way, and its cost is that of what changed since; only when the resumed target saves
nothing more (reached, or no longer worth heading for) is the search made afresh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from rebalancer.cluster.topology import Domain, DomainKey, Location
from rebalancer.config.resolved import PlanningRules
from rebalancer.cost.model import CostModel
from rebalancer.planning.floor import HaFloor
from rebalancer.planning.protections import WorkloadSettling
from rebalancer.planning.state import PlannerState, by_workload
from rebalancer.planning.target_scope import TargetScope
from rebalancer.planning.target_search import GROUP, TOLERANCE, Search, Target
from rebalancer.strategies.framework import Candidate, ClusterView

STRATEGY = "target-placement"
"""What the target's moves report as their strategy."""


def target_placement(
    view: ClusterView,
    rules: PlanningRules,
    state: PlannerState,
    now: float,
    *,
    levels: range,
    leads: Iterable[str] = (),
) -> Target:
    """The placement the search reaches from where the pods are now, with pods placed in the
    domains of the last of `levels` (its moves may be made into the wider ones: `Target`),
    under the planner's rules; the view is left as it is. `leads`: the pods to weigh first (the
    strategies' candidates', best first), then the rest."""
    level = levels[-1]
    snapshot, topology, cost = view.snapshot, view.topology, view.cost
    indexes = snapshot.indexes()
    floor = HaFloor(rules, topology, indexes, state, now, cost.locations)
    settling = WorkloadSettling(snapshot, indexes)
    scope = TargetScope(snapshot, topology, rules, indexes, cost.locations, level, settling)
    order = list(dict.fromkeys([*leads, *cost.locations]))
    remembered = by_workload(state.recent_moves)

    def search(start: Mapping[str, DomainKey]) -> Target:
        run = Search(
            snapshot,
            topology,
            level,
            cost.copy(),
            view.occupancy.copy(),
            lambda pod, domain, where: floor.refusal(pod, domain, where) is None,
            rules.protections.honor_soft_spread,
            scope,
            remembered,
        )
        return dataclasses.replace(run.target(order, start), widest=levels[0])

    if state.target:
        kept = search(state.target)
        if kept.saved > TOLERANCE:
            return kept
    return search({})


def proposals(target: Target, cost: CostModel) -> list[Candidate]:
    """A move for each pod the target places elsewhere, straight into its domain there, with
    what it saves now: most save little until the peers they are to join are there too, and
    the planner makes each only once it pays. Pods that leave one domain for the same other one
    are also proposed in pairs, those that talk most together first, and all together, as
    joint moves: a group that talks mostly within itself gains nothing apart. Proposed every
    cycle the target stands, so their persistence is counted while they wait."""
    saves = f"in all the target saves {target.saved:.3g}"
    candidates = [
        Candidate(
            pod=key,
            target=domain,
            gain=cost.gain(key, domain),
            reason=f"the target placement puts it on {domain.name}; {saves}",
            strategy=STRATEGY,
        )
        for key, domain in sorted(target.places.items())
    ]
    journeys: dict[tuple[Location, Domain], list[str]] = {}
    for key, domain in sorted(target.places.items()):
        origin = cost.locations[key][: domain.level + 1]
        journeys.setdefault((origin, domain), []).append(key)
    for (_origin, domain), keys in journeys.items():
        groups = _pairs(cost, keys)
        if len(keys) > 2:
            groups.append(keys[:GROUP])
        for lead, *others in groups:
            candidates.append(
                Candidate(
                    pod=lead,
                    target=domain,
                    gain=cost.joint_gain(dict.fromkeys((lead, *others), domain)),
                    reason=f"the target placement puts it and {', '.join(others)} on "
                    f"{domain.name}; {saves}",
                    strategy=STRATEGY,
                    companions=tuple((other, domain) for other in others),
                )
            )
    return candidates


def _pairs(cost: CostModel, keys: list[str]) -> list[list[str]]:
    """The pods matched in pairs, each in one at most, the pairs that talk most first."""
    peers = cost.peers
    rated = sorted(
        (
            (-peers[a].get(b, 0.0), a, b)
            for index, a in enumerate(keys)
            for b in keys[index + 1 :]
            if peers[a].get(b, 0.0) > 0
        )
    )
    paired: set[str] = set()
    pairs = []
    for _rate, a, b in rated:
        if a not in paired and b not in paired:
            paired.update((a, b))
            pairs.append([a, b])
    return pairs
