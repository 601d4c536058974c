"""Gangs whose placement another scheduler owns, spread over more domains than they need.

Their members are never moved (see protections); what the rebalancer can do is say which gangs
pay for their spread, and how to ask their owner, with its own mechanism, to keep them together.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rebalancer.cluster.gang_owners import GangMembership, gang_membership
from rebalancer.strategies.framework import ClusterView
from rebalancer.strategies.gang_consolidation import fewest_domains


@dataclass(frozen=True)
class OwnedGang:
    owner: str
    gang: str
    """namespace/name of the owner's group."""
    pods: int
    level: str
    spans: int
    """Domains of the level the gang runs in now."""
    fits_in: int
    """The fewest domains of the level whose free room and members could hold the gang."""
    crossing: float
    """Traffic between members in different domains of the level, in the source's unit."""
    fix: str
    """How to keep it in one domain with the owner's mechanism."""


def owned_gangs(view: ClusterView, level: int) -> list[OwnedGang]:
    """Each gang with an owner, talking across domains of `level`, that fits in fewer of them;
    heaviest crossing first."""
    members: dict[tuple[str, str], list[str]] = defaultdict(list)
    fixes: dict[tuple[str, str], GangMembership] = {}
    peers, locations = view.cost.peers, view.cost.locations
    for key in peers:
        if key in locations:
            membership = gang_membership(view.snapshot.pods[key])
            if membership is not None:
                # One gang, whichever of its owner's keys each member was known by.
                gang = (membership.owner, membership.gang)
                members[gang].append(key)
                fixes.setdefault(gang, membership)
    topology = view.topology
    level_name = topology.levels[level].name
    label = topology.levels[level].label
    reports = []
    for gang, pods in members.items():
        membership = fixes[gang]
        pods.sort()
        if len(pods) < 2:
            continue
        crossing = _crossing(view, pods, level)
        packing = fewest_domains(view, pods, level) if crossing > 0 else None
        if packing is None:
            continue
        reports.append(
            OwnedGang(
                owner=membership.owner,
                gang=membership.gang,
                pods=len(pods),
                level=level_name,
                spans=len(packing.spanned),
                fits_in=len(packing.chosen),
                crossing=crossing,
                fix=membership.fix(label),
            )
        )
    return sorted(reports, key=lambda r: (-r.crossing, r.owner, r.gang))


def _crossing(view: ClusterView, pods: list[str], level: int) -> float:
    topology, cost = view.topology, view.cost
    domain = {pod: topology.domain_of(cost.locations[pod], level) for pod in pods}
    total = 0.0
    for pod in pods:
        for peer, rate in cost.peers[pod].items():
            if peer in domain and pod < peer and domain[pod] != domain[peer]:
                total += rate
    return total
