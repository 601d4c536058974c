"""Where, within a candidate's target, its pods should go: the finer domain where their peers
run and save them most.

A pod sent to its peers' zone but not to their rack or host would move again a few cycles
later, into that rack or host, and a move twice is a disruption twice. The strategy proposes,
and the planner ranks, the move at the level it was judged at; only the few candidates a cycle
tries are narrowed, on the model with the cycle's earlier moves in it.
"""

from __future__ import annotations

import heapq
from collections import defaultdict

from rebalancer.cluster.topology import Domain, Topology
from rebalancer.cost.model import CostModel
from rebalancer.strategies.framework import Candidate

_TRIES = 3
"""Finer domains weighed per candidate, those where its lead pod's traffic goes most: a zone
may hold hundreds of hosts with a peer, and each is a gain evaluation, then a try."""
_TOLERANCE = 1e-9


def narrower(cost: CostModel, topology: Topology, candidate: Candidate) -> list[Domain]:
    """Of the few domains at the candidate's finest level, within its target, that hold most of
    its lead pod's traffic, those where all its pods together save more than in the target as
    a whole, those that save most first; none when the candidate has no finer level."""
    finest, there = candidate.finest, candidate.target
    if finest is None or finest <= there.level:
        return []
    depth = there.level + 1
    held: defaultdict[Domain, float] = defaultdict(float)
    for peer, rate in cost.peers[candidate.pod].items():
        location = cost.locations[peer]
        if (
            location[:depth] == there.key
            and (domain := topology.domain_of(location, finest)) is not None
        ):
            held[domain] += rate
    if not held:
        return []
    pods = candidate.pods

    def gain(domain: Domain) -> float:
        if len(pods) == 1:
            return cost.gain(candidate.pod, domain)
        return cost.joint_gain(dict.fromkeys(pods, domain))

    alone = gain(there)
    tries = heapq.nsmallest(_TRIES, held, key=lambda d: (-held[d], d.key))
    gains = sorted(((gain(d), d) for d in tries), key=lambda item: (-item[0], item[1].key))
    return [domain for saved, domain in gains if saved > alone + _TOLERANCE]
