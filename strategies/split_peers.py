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
from typing import Annotated, NamedTuple

import numpy as np
from pydantic import Field

from rebalancer.fit import rejection
from rebalancer.graph import CostModel, DomainNumbers, Floats, group_sums
from rebalancer.snapshot import Pod
from rebalancer.topology import Domain, DomainKey
from strategies.base import Candidate, ClusterView, Strategy, StrategyArgs

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


class _Holding(NamedTuple):
    pod: str
    level: int
    weight: float
    """The pod's traffic to peers in the domain."""
    share: float
    key: DomainKey
    gain: float


class SplitPeers:
    name = PLUGIN_NAME

    def __init__(self, args: SplitPeersArgs) -> None:
        self.args = args

    def propose(self, view: ClusterView) -> list[Candidate]:
        topology, cost = view.topology, view.cost
        widest = topology.level_index(self.args.level)
        finest = topology.level_index(self.args.down_to or self.args.level)
        numbers = cost.domain_ids()
        total = cost.arrays.traffic_per_pod()
        holding: list[_Holding] = []
        for level in range(widest, finest + 1):
            holding += self._holding(cost, numbers, total, level)
        holding.sort(key=lambda row: (row.pod, row.level, -row.weight, row.key))
        return [
            candidate
            for (pod, level), rows in groupby(holding, key=lambda row: (row.pod, row.level))
            for candidate in self._at_level(view, pod, level, list(rows))
        ]

    def _holding(
        self, cost: CostModel, numbers: DomainNumbers, total: Floats, level: int
    ) -> list[_Holding]:
        """Every pod and domain at `level` holding at least `min_share` of the pod's traffic,
        and more of it than the pod's own domain, from one numpy pass over every pair: summing
        per domain was this strategy's whole cost, a Python loop over every pod's peers."""
        arrays, of_pod = cost.arrays, numbers.of_pod[level]
        peer_domain = of_pod[arrays.target]
        known = peer_domain >= 0  # peers whose domain is unknown count only in the total
        if not known.any():
            return []
        width = len(numbers.keys)
        found, position = np.unique(
            arrays.source[known] * width + peer_domain[known], return_inverse=True
        )
        weight = group_sums(position, arrays.rate[known], len(found))
        pod, domain = found // width, found % width
        own = of_pod[pod]
        at_home = domain == own
        local = np.zeros(len(arrays.pods))
        local[pod[at_home]] = weight[at_home]
        share = weight / total[pod]
        chosen = (own >= 0) & ~at_home & (share >= self.args.min_share) & (weight > local[pod])
        gain, _cost = cost.gains_and_costs(numbers, pod[chosen], domain[chosen], level)
        return [
            _Holding(cost.arrays.pods[p], level, w, s, numbers.keys[d], g)
            for p, w, s, d, g in zip(
                pod[chosen].tolist(),
                weight[chosen].tolist(),
                share[chosen].tolist(),
                domain[chosen].tolist(),
                gain.tolist(),
                strict=True,
            )
        ]

    def _at_level(
        self, view: ClusterView, pod: str, level: int, holding: list[_Holding]
    ) -> list[Candidate]:
        """Candidates into the domains holding the pod's traffic, heaviest first: every one that
        holds the share, not just the heaviest, as at a 50/50 split the other may have room."""
        topology, cost = view.topology, view.cost
        here = topology.domain_of(cost.locations[pod], level)
        assert here is not None  # a pod in an unknown domain holds nothing (see _holding)
        level_name = topology.levels[level].name
        candidates = []
        for row in holding:
            if row.gain <= 0:
                continue
            there = Domain(level, row.key)
            reason = f"{row.share:.0%} of its traffic goes to {level_name} {'/'.join(there.key)}"
            candidates.append(
                Candidate(pod=pod, target=there, gain=row.gain, reason=reason, strategy=self.name)
            )
        pods = view.snapshot.pods
        if not candidates or any(_room_for(view, [pods[pod]], c.target) for c in candidates):
            return candidates
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
                    f"to {'/'.join(third.key)}",
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
        node = next(
            (
                name
                for name in view.topology.nodes_by_domain.get(domain, [])
                if name != mover.node_name
                and rejection(mover, view.snapshot.nodes[name], occupancy, True) is None
            ),
            None,
        )
        if node is None:
            return False
        if index < len(movers) - 1:
            occupancy.reserve(mover, node)  # a copy: the view stays as the cluster is
    return True


def new(args: StrategyArgs) -> Strategy:
    assert isinstance(args, SplitPeersArgs)
    return SplitPeers(args)
