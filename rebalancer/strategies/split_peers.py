"""split-peers: a pod whose traffic mostly goes to peers in another domain should live there.

This is the common microservice case: a client and its server split across zones or racks. The
pod moves to the domain that holds most of its traffic, if that is where at least `min_share` of it
goes; the planner then checks that it fits and that the move is worth it. With `down_to`, the same
judgement is made again at each finer level, so a pair already sharing a zone can share a rack or
a host too; the planner takes the best of a pod's candidates that fits, and sends a pod it moves
into a wider domain on into the finer one within it where the pod's peers run, when that may
take it (planning/narrowing.py), rather than moving it again later.

When that domain has no room for the pod, and the pod's own domain none for its heaviest peer
there, neither can join the other: the two are proposed to move together into a third domain
with room for both, as one joint move.

A pod between two others (a search service called by the frontend and calling geo and rate)
often cannot follow its traffic alone: what it gains with the frontend it loses with the services
it leaves behind, and they cannot go first, as they gain nothing until it has. Such a chain is
proposed as one joint move: the pod with the peers in its own domain that add most to the gain,
one at a time, up to `chain` pods.

A move within the pod's own zone changes only the traffic it has in that zone, so the share a
rack or host there must hold is of that traffic (`HeavyDomain.share`): an API pod whose databases
are spread over three zones on purpose sends no zone, rack or host half of its traffic, yet the
host of the database in its own rack holds all it sends within the rack. That holds while the
pod's zone (and rack) holds as much of its traffic as any other; where another holds more, the
pod is likely to move there later, and a move within its own first would be undone.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from itertools import groupby
from typing import Annotated

import msgspec
from pydantic import Field

from rebalancer.cluster.fit import first_fit
from rebalancer.cluster.model import Pod
from rebalancer.cluster.topology import Domain
from rebalancer.cost.model import HeavyDomain
from rebalancer.strategies.framework import Candidate, ClusterView, Strategy, StrategyArgs

PLUGIN_NAME = "split-peers"


class SplitPeersArgs(StrategyArgs):
    min_share: Annotated[float, Field(gt=0, le=1)] = 0.5
    """Least share of a pod's traffic that must go to the target domain. For a rack or host in
    the pod's own zone (or rack), the share is of the traffic the pod has within that zone (or
    rack), as long as no other zone (or rack) holds more of the pod's traffic."""
    chain: Annotated[int, Field(ge=1, le=8)] = 2
    """The most pods moved together as one chain (see above); 1: every pod moves alone. A chain
    is one joint move, and all of it counts against the limits: under the default ones (2 a
    node, 3 a zone) a longer chain from one node or zone is never planned."""
    chain_share: Annotated[float, Field(gt=0, le=1)] = 0.25
    """Least share of a pod's traffic a domain must hold for the pod to lead a chain there."""
    down_to: str | None = None
    """A finer level than `level`, such as rack or host: also propose moves to domains down to
    it. kube-scheduler's default host spreading (maxSkew 3, ScheduleAnyway) outweighs a hint to
    a host that already holds several of the pod's replicas, so a host is targeted only where
    the steered replacement would land there (`migrate.predict_landing`; without it, in the
    simulator, such replacements went elsewhere, sometimes to another zone). None: only
    `level`."""

    @property
    def finest(self) -> str:
        return self.down_to or self.level

    def level_problems(self, names: Sequence[str]) -> list[str]:
        problems = super().level_problems(names)
        if problems or self.down_to is None:
            return problems
        if self.down_to not in names:
            return [f"down_to: unknown level {self.down_to!r} (levels: {', '.join(names)})"]
        if names.index(self.down_to) < names.index(self.level):
            return [f"down_to: {self.down_to!r} is wider than level {self.level!r}"]
        return []


_CHAIN_LEADS = 128
"""Pod and domain pairs, heaviest first, grown into chains per cycle: a cycle makes a few moves,
and each chain costs a dozen gain evaluations over its members' peers, which at 100,000 pods
cannot be spent on every pod."""
_CHAIN_TRIES = 3
"""Peers weighed at each step of a chain, those that talk most with it."""
_TOLERANCE = 1e-9


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
        room = _RoomOf(view)
        candidates = [
            candidate
            for (pod, level), rows in groupby(holding, key=lambda row: (row.pod, row.level))
            for candidate in self._at_level(view, room, pod, level, list(rows))
        ]
        if self.args.chain > 1:
            candidates += self._chains(view, range(widest, finest + 1))
        if finest > widest:  # the planner narrows the wider moves it makes (Candidate.finest)
            candidates = [
                msgspec.structs.replace(candidate, finest=finest)
                if candidate.target.level < finest
                else candidate
                for candidate in candidates
            ]
        return candidates

    def _at_level(
        self,
        view: ClusterView,
        room: Callable[[Pod, Domain], bool],
        pod: str,
        level: int,
        holding: list[HeavyDomain],
    ) -> list[Candidate]:
        """Candidates into the domains holding the pod's traffic, heaviest first: every one that
        holds the share, not just the heaviest, as at a 50/50 split the other may have room."""
        level_name = view.topology.levels[level].name
        candidates = []
        for row in holding:
            if row.gain <= 0:
                continue
            there = Domain(level, row.key)
            reason = f"{_share_of(view, row)} goes to {level_name} {there.name}"
            candidates.append(
                Candidate(pod=pod, target=there, gain=row.gain, reason=reason, strategy=self.name)
            )
        pods = view.snapshot.pods
        if not candidates or any(room(pods[pod], c.target) for c in candidates):
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

    def _chains(self, view: ClusterView, levels: range) -> list[Candidate]:
        """A joint move for each of the heaviest pod and domain pairs whose chain gains more
        than the pod alone."""
        leads = view.cost.heavy_domains(
            levels, self.args.chain_share, above_home=False, heaviest=_CHAIN_LEADS
        )
        leads.sort(key=lambda row: (-row.weight, row.pod, row.level, row.key))
        candidates = []
        for row in leads[:_CHAIN_LEADS]:
            there = Domain(row.level, row.key)
            chain = self._chain(view, row.pod, there, row.gain)
            if chain is None:
                continue
            members, gain = chain
            level_name = view.topology.levels[row.level].name
            candidates.append(
                Candidate(
                    pod=row.pod,
                    target=there,
                    gain=gain,
                    reason=f"chain of {', '.join([row.pod, *members])} moved together: "
                    f"{_share_of(view, row, row.pod)} goes to {level_name} {there.name}, "
                    "and apart they would cross",
                    strategy=self.name,
                    companions=tuple((member, there) for member in members),
                )
            )
        return candidates

    def _chain(
        self, view: ClusterView, pod: str, there: Domain, alone: float
    ) -> tuple[list[str], float] | None:
        """The peers in the pod's own domain to move with it into `there`: at each step, of the
        few that talk most with the chain so far, the one that adds most to the joint gain,
        while one adds anything. None unless they gain more than the pod `alone` (and anything
        at all) and `there` has room for all."""
        cost, topology = view.cost, view.topology
        depth = there.level + 1
        locations = cost.locations
        home = locations[pod][:depth]
        inside = topology.location_within(there)
        # What a pair at home saves once both are in `there`, beyond what each saves alone
        # (which counts the pair as crossing to `there`), per unit of their traffic.
        joined_back = 2 * topology.distance(inside, locations[pod]) - topology.distance(
            inside, inside
        )
        members = [pod]
        pull: dict[str, float] = {}  # peer at home -> its traffic with the chain
        gain, joined = alone, pod
        while len(members) < self.args.chain:
            for peer, rate in cost.peers[joined].items():
                if peer != pod and peer not in pull and locations[peer][:depth] == home:
                    pull[peer] = 0.0
                if peer in pull:
                    pull[peer] += rate
            tries = heapq.nlargest(
                _CHAIN_TRIES, (peer for peer in pull if peer not in members), key=pull.__getitem__
            )
            added = [(self._added(view, peer, there, members, joined_back), peer) for peer in tries]
            best = max(added, default=None)
            if best is None or best[0] <= _TOLERANCE:
                break
            joined = best[1]
            gain += best[0]
            members.append(joined)
        if len(members) < 2 or gain <= max(alone, 0.0) + _TOLERANCE:
            return None
        if not _room_for(view, [view.snapshot.pods[member] for member in members], there):
            return None
        return members[1:], cost.joint_gain(dict.fromkeys(members, there))

    @staticmethod
    def _added(
        view: ClusterView, peer: str, there: Domain, members: list[str], joined_back: float
    ) -> float:
        """What moving `peer` into `there` with the chain adds to the chain's gain: its gain
        alone, plus, for its traffic with the members, the crossing it no longer pays."""
        cost, topology, locations = view.cost, view.topology, view.cost.locations
        rates = cost.peers[peer]
        return cost.gain(peer, there) + sum(
            rates.get(member, 0.0)
            * (joined_back - topology.distance(locations[peer], locations[member]))
            for member in members
        )


def _share_of(view: ClusterView, row: HeavyDomain, whose: str = "its") -> str:
    """The share a reason names, with the domain it is of when that is not the whole cluster
    (see `HeavyDomain.share`): a share within a rack would read as one of all the traffic."""
    owner = whose if whose == "its" else f"{whose}'s"
    if row.within < 0:
        return f"{row.share:.0%} of {owner} traffic"
    scope = view.topology.domain_of(view.cost.locations[row.pod], row.within)
    assert scope is not None  # the pod shares it with the domain, so it is known
    return (
        f"{row.share:.0%} of {owner} traffic within {view.topology.levels[row.within].name} "
        f"{scope.name}"
    )


class _RoomOf:
    """`_room_for` one pod, kept for the pods of one controller alike: the pods of a ReplicaSet
    share its template, so without claims (bound to where each runs), spread constraints or
    pod (anti-)affinity (counted around where each runs) they fit the same nodes. At 100,000
    pods it is asked for nearly every one."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.known: dict[tuple[object, ...], bool] = {}

    def __call__(self, pod: Pod, domain: Domain) -> bool:
        alike = (
            pod.controller_name is not None
            and not pod.claims
            and not pod.spread_constraints
            and not pod.required_affinity
            and not pod.required_anti_affinity
        )
        if not alike:
            return _room_for(self.view, [pod], domain)
        key = (pod.namespace, pod.controller_kind, pod.controller_name, pod.requests, domain)
        found = self.known.get(key)
        if found is None:
            found = self.known[key] = _room_for(self.view, [pod], domain)
        return found


def _room_for(view: ClusterView, movers: list[Pod], domain: Domain) -> bool:
    """Whether the domain's nodes would take all these pods at once, each on a node it fits, by
    the scheduler's rules (soft spread counted as hard: proposing is no place to gamble). The
    view is left as the cluster is."""
    occupancy = view.occupancy
    nodes = view.topology.nodes_by_domain.get(domain, [])
    if len(movers) == 1:
        (mover,) = movers
        return (
            first_fit(mover, nodes, view.snapshot.nodes, occupancy, True, besides=mover.node_name)
            is not None
        )
    with occupancy.trial(movers):
        for mover in movers:
            node = first_fit(
                mover, nodes, view.snapshot.nodes, occupancy, True, besides=mover.node_name
            )
            if node is None:
                return False
            occupancy.reserve(mover, node)
    return True


def new(args: StrategyArgs) -> Strategy:
    assert isinstance(args, SplitPeersArgs)
    return SplitPeers(args)
