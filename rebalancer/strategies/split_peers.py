"""split-peers: a pod whose traffic mostly goes to peers in another domain should live there.

This is the common microservice case: a client and its server split across zones or racks. The
pod moves to the domain that holds most of its traffic, if that is where at least `min_share` of it
goes; the planner then checks that it fits and that the move is worth it. With `down_to`, the same
judgement is made again at each finer level, so a pair already sharing a zone can share a rack or
a host too; the planner takes the best of a pod's candidates that fits.

When that domain has no room for the pod, and the pod's own domain none for its heaviest peer
there, neither can join the other: the two are proposed to move together into a third domain
with room for both, as one joint move.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from typing import Annotated

from pydantic import Field

from rebalancer.cluster.fit import first_fit
from rebalancer.cluster.model import Pod
from rebalancer.cluster.topology import Domain
from rebalancer.cost.model import HeavyDomain
from rebalancer.strategies.framework import Candidate, ClusterView, Strategy, StrategyArgs

PLUGIN_NAME = "split-peers"


class SplitPeersArgs(StrategyArgs):
    min_share: Annotated[float, Field(gt=0, le=1)] = 0.5
    """Least share of a pod's traffic that must go to the target domain."""
    down_to: str | None = None
    """A finer level than `level`, such as rack: also propose moves to domains down to it.
    Host targets fight kube-scheduler's default host spreading (maxSkew 3, ScheduleAnyway): in
    the simulator, replacements steered to a host that already holds several replicas were put
    elsewhere, sometimes in another zone, so the built-in policies stop at rack. None: only
    `level`."""

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
        holding = view.cost.heavy_domains(range(widest, finest + 1), self.args.min_share)
        holding.sort(key=lambda row: (row.pod, row.level, -row.weight, row.key))
        return [
            candidate
            for (pod, level), rows in groupby(holding, key=lambda row: (row.pod, row.level))
            for candidate in self._at_level(view, pod, level, list(rows))
        ]

    def _at_level(
        self, view: ClusterView, pod: str, level: int, holding: list[HeavyDomain]
    ) -> list[Candidate]:
        """Candidates into the domains holding the pod's traffic, heaviest first: every one that
        holds the share, not just the heaviest, as at a 50/50 split the other may have room."""
        level_name = view.topology.levels[level].name
        candidates = []
        for row in holding:
            if row.gain <= 0:
                continue
            there = Domain(level, row.key)
            reason = f"{row.share:.0%} of its traffic goes to {level_name} {there.name}"
            candidates.append(
                Candidate(pod=pod, target=there, gain=row.gain, reason=reason, strategy=self.name)
            )
        pods = view.snapshot.pods
        if not candidates or any(_room_for(view, [pods[pod]], c.target) for c in candidates):
            return candidates
        here = view.topology.domain_of(view.cost.locations[pod], level)
        assert here is not None  # a pod in an unknown domain holds nothing (see heavy_domains)
        heaviest = candidates[0]
        pair = self._pair(view, pod, here, heaviest.target)
        if pair is not None:
            peer, third, joint_gain = pair
            candidates.append(
                Candidate(
                    pod=pod,
                    target=third,
                    gain=joint_gain,
                    reason=f"{heaviest.reason}, which has no room: moves with {peer} "
                    f"to {third.name}",
                    strategy=self.name,
                    companions=((peer, third),),
                )
            )
        return candidates

    def _pair(
        self, view: ClusterView, pod: str, here: Domain, there: Domain
    ) -> tuple[str, Domain, float] | None:
        """The pod's heaviest peer in `there`, and the third domain where the two together gain
        most, when `here` has no room for that peer either."""
        topology, cost, pods = view.topology, view.cost, view.snapshot.pods
        level = here.level
        peers = [
            (weight, peer)
            for peer, weight in cost.peers[pod].items()
            if topology.domain_of(cost.locations[peer], level) == there
        ]
        _weight, peer = max(peers)
        if _room_for(view, [pods[peer]], here):
            return None
        best: tuple[float, Domain] | None = None
        for third in topology.domains_at(level):
            if third in (here, there) or not _room_for(view, [pods[pod], pods[peer]], third):
                continue
            gain = cost.joint_gain({pod: third, peer: third})
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, third)
        return None if best is None else (peer, best[1], best[0])


def _room_for(view: ClusterView, movers: list[Pod], domain: Domain) -> bool:
    """Whether the domain's nodes would take all these pods at once, each on a node it fits, by
    the scheduler's rules (soft spread counted as hard: proposing is no place to gamble)."""
    occupancy = view.occupancy.copy() if len(movers) > 1 else view.occupancy
    for index, mover in enumerate(movers):
        node = first_fit(
            mover,
            view.topology.nodes_by_domain.get(domain, []),
            view.snapshot.nodes,
            occupancy,
            True,
            besides=mover.node_name,
        )
        if node is None:
            return False
        if index < len(movers) - 1:
            occupancy.reserve(mover, node)  # a copy: the view stays as the cluster is
    return True


def new(args: StrategyArgs) -> Strategy:
    assert isinstance(args, SplitPeersArgs)
    return SplitPeers(args)
