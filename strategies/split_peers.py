"""split-peers: a pod whose traffic mostly goes to peers in another domain should live there.

This is the common microservice case: a client and its server split across zones or racks. The
pod moves to the domain that holds most of its traffic, if that is where at least `min_share` of it
goes; the planner then checks that it fits and that the move is worth it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rebalancer.topology import Domain
from strategies.base import Candidate, ClusterView, Strategy, StrategyArgs

PLUGIN_NAME = "split-peers"


class SplitPeersArgs(StrategyArgs):
    min_share: Annotated[float, Field(gt=0, le=1)] = 0.5
    """Least share of a pod's traffic that must go to the target domain."""


class SplitPeers:
    name = PLUGIN_NAME

    def __init__(self, args: SplitPeersArgs) -> None:
        self.args = args

    def propose(self, view: ClusterView) -> list[Candidate]:
        topology, cost = view.topology, view.cost
        level = topology.level_index(self.args.level)
        candidates = []
        for pod in sorted(cost.graph.nodes):
            here = topology.domain_of(cost.locations[pod], level)
            if here is None:
                continue
            by_domain: dict[Domain, float] = {}
            total = 0.0
            for peer, data in cost.graph.adj[pod].items():
                total += data["weight"]
                there = topology.domain_of(cost.locations[peer], level)
                if there is not None:
                    by_domain[there] = by_domain.get(there, 0.0) + data["weight"]
            if not by_domain:
                continue
            best = max(by_domain, key=lambda d: (by_domain[d], d.key))
            share = by_domain[best] / total
            if best == here or share < self.args.min_share:
                continue
            if by_domain[best] <= by_domain.get(here, 0.0):
                continue
            gain = cost.gain(pod, best)
            if gain > 0:
                candidates.append(
                    Candidate(
                        pod=pod,
                        target=best,
                        gain=gain,
                        reason=f"{share:.0%} of its traffic goes to {self.args.level} "
                        f"{'/'.join(best.key)}",
                        strategy=self.name,
                    )
                )
        return candidates


def new(args: StrategyArgs) -> Strategy:
    assert isinstance(args, SplitPeersArgs)
    return SplitPeers(args)
