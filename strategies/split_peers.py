"""split-peers: a pod whose traffic mostly goes to peers in another domain should live there.

This is the common microservice case: a client and its server split across zones or racks. The
pod moves to the domain that holds most of its traffic, if that is where at least `min_share` of it
goes; the planner then checks that it fits and that the move is worth it. With `down_to`, the same
judgement is made again at each finer level, so a pair already sharing a zone can share a rack or
a host too; the planner takes the best of a pod's candidates that fits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

from pydantic import Field

from rebalancer.topology import Domain
from strategies.base import Candidate, ClusterView, Strategy, StrategyArgs

PLUGIN_NAME = "split-peers"


class SplitPeersArgs(StrategyArgs):
    min_share: Annotated[float, Field(gt=0, le=1)] = 0.5
    """Least share of a pod's traffic that must go to the target domain."""
    down_to: str | None = None
    """A finer level than `level` (for example rack or host): also propose moves to domains
    down to it. Packing peers onto one host trades some failure isolation for locality, so keep
    HA in pod spread constraints or `protections.min_spread`. None: only `level`."""

    def level_problems(self, names: Sequence[str]) -> list[str]:
        problems = super().level_problems(names)
        if problems or self.down_to is None:
            return problems
        if self.down_to not in names:
            return [f"down_to: unknown level {self.down_to!r} (levels: {', '.join(names)})"]
        if names.index(self.down_to) < names.index(self.level):
            return [f"down_to: {self.down_to!r} is wider than level {self.level!r}"]
        return []


class SplitPeers:
    name = PLUGIN_NAME

    def __init__(self, args: SplitPeersArgs) -> None:
        self.args = args

    def propose(self, view: ClusterView) -> list[Candidate]:
        topology = view.topology
        widest = topology.level_index(self.args.level)
        finest = topology.level_index(self.args.down_to or self.args.level)
        return [
            candidate
            for pod in sorted(view.cost.graph.nodes)
            for level in range(widest, finest + 1)
            if (candidate := self._candidate(view, pod, level)) is not None
        ]

    def _candidate(self, view: ClusterView, pod: str, level: int) -> Candidate | None:
        topology, cost = view.topology, view.cost
        here = topology.domain_of(cost.locations[pod], level)
        if here is None:
            return None
        by_domain: dict[Domain, float] = {}
        total = 0.0
        for peer, data in cost.graph.adj[pod].items():
            total += data["weight"]
            there = topology.domain_of(cost.locations[peer], level)
            if there is not None:
                by_domain[there] = by_domain.get(there, 0.0) + data["weight"]
        if not by_domain:
            return None
        best = max(by_domain, key=lambda d: (by_domain[d], d.key))
        share = by_domain[best] / total
        if best == here or share < self.args.min_share:
            return None
        if by_domain[best] <= by_domain.get(here, 0.0):
            return None
        gain = cost.gain(pod, best)
        if gain <= 0:
            return None
        level_name = topology.levels[level].name
        return Candidate(
            pod=pod,
            target=best,
            gain=gain,
            reason=f"{share:.0%} of its traffic goes to {level_name} {'/'.join(best.key)}",
            strategy=self.name,
        )


def new(args: StrategyArgs) -> Strategy:
    assert isinstance(args, SplitPeersArgs)
    return SplitPeers(args)
