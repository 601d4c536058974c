"""The local search behind a cycle's target placement (planning/target.py): pods placed in the
domains of one level, one at a time into the domain of their peers where they save most, then
groups of pods that share a domain and talk to each other tried in their outside peers' domains.
Every step keeps to what the planner would allow (the scope of movable pods, the HA floor, no
remembered move undone, a node the scheduler would take the pod on), and its work is counted in
peers visited, not time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import networkx as nx

from rebalancer.cluster.fit import Occupancy, first_fit
from rebalancer.cluster.model import Pod, Snapshot
from rebalancer.cluster.topology import Domain, DomainKey, Location, Topology
from rebalancer.cost.model import CostModel
from rebalancer.planning.state import RecentMove
from rebalancer.planning.target_scope import TargetScope

WORK = 2_000_000
"""Peers a search may visit, in all its gain evaluations (two passes over the pod's peers
each): a second or two whatever the cluster's size. The strategies' candidates are weighed
first, the best first, so a search cut short has spent its work where most is to be saved,
and leaves the rest to the strategies."""
OPTIONS = 8
"""Domains weighed for a pod, those holding most of its traffic, each a pass over the pod's
peers: on large-500 eight reached what weighing every domain reached (four did not)."""
TRIES = 200
"""Groups tried in another domain, each followed by a descent around it."""
GROUP = 16
"""The most pods moved as one group."""
TOLERANCE = 1e-9

Allowed = Callable[[Pod, Domain, Mapping[str, Location]], bool]
"""Whether the rules let the pod into the domain, with the other pods where these say."""


@dataclass(frozen=True)
class Target:
    """Where the search put the pods it moved, and what the placement saves in all."""

    places: Mapping[str, Domain]
    """Pod -> the domain it ends in, for each pod not left in its own."""
    saved: float
    anchors: frozenset[str] = frozenset()
    """Pods the target leaves where they are, in a domain others are to join them in: moved
    elsewhere, they would leave those moves for nothing."""
    widest: int = 0
    """The widest level a move toward the target may be made at, when its replacement would
    land outside its domain (the strategies' widest)."""


@dataclass
class Search:
    """One search: the models it moves pods in, copies of the cycle's, and its work left."""

    snapshot: Snapshot
    topology: Topology
    level: int
    """The search places pods in this level's domains."""
    model: CostModel
    occupancy: Occupancy
    allowed: Allowed
    honor_soft_spread: bool
    scope: TargetScope
    """The pods the search may move."""
    remembered: Mapping[str, list[RecentMove]]
    """The state's remembered moves, by workload."""
    journeys: dict[str, dict[str, tuple[DomainKey, DomainKey]]] = field(default_factory=dict)
    """Workload -> pod -> (domain left, domain entered): the target's moves so far."""
    known: dict[str, list[tuple[float, Domain]]] = field(default_factory=dict)
    """Pod -> its `options`, while neither it nor a peer has moved."""
    seen: dict[str, None] = field(default_factory=dict)
    """The pods weighed or moved, in the order they first were."""
    degrees: dict[str, int] = field(default_factory=dict)
    left: int = WORK
    tries: int = TRIES
    undo: list[tuple[Pod, Domain, str]] | None = None
    """While a group is tried: each pod moved, with its domain and node before, to undo the
    try by (a copy of the models would cost milliseconds a try at 100,000 pods)."""

    def gain(self, key: str, domain: Domain) -> float:
        self.left -= 2 * self.degree(key)  # the pod's cost where it is and there
        return self.model.gain(key, domain)

    def degree(self, key: str) -> int:
        if key not in self.degrees:
            self.degrees[key] = len(self.model.peers[key])
        return self.degrees[key]

    def here(self, key: str) -> Domain | None:
        return self.topology.domain_of(self.model.locations[key], self.level)

    def options(self, key: str) -> list[tuple[float, Domain]]:
        """Of the few domains that hold most of the pod's traffic, those where it would save
        anything, best first; kept until the pod or a peer of it moves."""
        known = self.known.get(key)
        if known is not None:
            return known
        self.seen[key] = None
        self.left -= self.degree(key)
        here = self.here(key)
        locations = self.model.locations
        held: dict[Domain, float] = {}
        for peer, rate in self.model.peers[key].items():
            domain = self.topology.domain_of(locations[peer], self.level)
            if domain is not None and domain != here:
                held[domain] = held.get(domain, 0.0) + rate
        tries = heapq.nsmallest(OPTIONS, held, key=lambda domain: (-held[domain], domain.key))
        self.left -= 2 * self.degree(key) * len(tries)  # as `gain` counts each
        gains = zip(self.model.gains(key, tries), tries, strict=True)
        found = sorted(
            ((gain, domain) for gain, domain in gains if gain > TOLERANCE),
            key=lambda item: (-item[0], item[1].key),
        )
        self.known[key] = found
        return found

    def node_in(self, pod: Pod, domain: Domain) -> str | None:
        nodes = self.topology.nodes_by_domain.get(domain, [])
        return first_fit(
            pod,
            nodes,
            self.snapshot.nodes,
            self.occupancy,
            self.honor_soft_spread,
            besides=self.occupancy.placement.get(pod.key),
        )

    def room(self, pod: Pod, domain: Domain) -> str | None:
        """The node the pod would go to in `domain`; None when the rules or the room keep it
        out."""
        if not self.may(pod, domain):
            return None
        return self.node_in(pod, domain)

    def may(self, pod: Pod, domain: Domain) -> bool:
        """Whether the rules allow the pod into the domain, where the search has put the rest:
        the HA floor, and no move of its workload undone (see `undoes`)."""
        return not self.undoes(pod, domain) and self.allowed(pod, domain, self.model.locations)

    def undoes(self, pod: Pod, domain: Domain) -> bool:
        """Whether the pod's move from where it runs into `domain` would undo a move of its
        workload, one remembered or one of this target: take a pod out of the domain another
        entered, or into the one another left. Replicas are alike, so two such moves leave
        the workload as it was, and the planner refuses the second."""
        if pod.workload is None:
            return False
        workload = str(pod.workload)
        origin = self.scope.origin(pod.key)
        target = domain.key
        for other, (left, entered) in self.journeys.get(workload, {}).items():
            if other != pod.key and target != origin and (origin == entered or target == left):
                return True
        remembered = self.remembered.get(workload, ())
        if remembered and target != origin:
            here, there = self.topology.named(origin), self.topology.named(target)
            return any(move.undone_by(here, there) for move in remembered)
        return False

    def place(self, pod: Pod, domain: Domain, node: str) -> None:
        if self.undo is not None:
            location = self.model.locations[pod.key]
            known = next((i for i, value in enumerate(location) if value is None), len(location))
            # All that is known of where it was, to put it back as it was.
            exact = Domain(known - 1, tuple(v for v in location[:known] if v is not None))
            self.undo.append((pod, exact, self.occupancy.placement[pod.key]))
        self.occupancy.release(pod)
        self.occupancy.reserve(pod, node)
        self.model.move(pod.key, domain)
        self.seen[pod.key] = None
        self.known.pop(pod.key, None)
        for peer in self.model.peers[pod.key]:
            self.known.pop(peer, None)  # a pod's gains depend on where its peers are
        if pod.workload is not None:
            journeys = self.journeys.setdefault(str(pod.workload), {})
            origin, entered = self.scope.origin(pod.key), domain.key[: self.level + 1]
            if entered == origin:
                journeys.pop(pod.key, None)
            else:
                journeys[pod.key] = (origin, entered)

    def descend(self, pods: list[str]) -> float:
        """Best move first, each judged again when its turn comes, until none saves anything or
        the work runs out; the pods weighed in the order given, up to half the work left."""
        snapshot = self.snapshot
        heap = []
        kept = self.left // 2  # for the moves: weighing every pod first would leave none
        for key in pods:
            if self.left <= kept:
                break
            if key not in self.scope:
                continue
            best = self.options(key)[:1]
            if best:
                heap.append((-best[0][0], key))
        heapq.heapify(heap)
        saved = 0.0
        while heap and self.left > 0:
            negative, key = heapq.heappop(heap)
            options = self.options(key)
            if not options:
                continue
            if heap and options[0][0] < -heap[0][0] - TOLERANCE:
                heapq.heappush(heap, (-options[0][0], key))  # outdated by earlier moves
                continue
            pod = snapshot.pods[key]
            for gain, domain in options:
                node = self.room(pod, domain)
                if node is None:
                    continue
                self.place(pod, domain, node)
                saved += gain
                for peer in self.model.peers[key]:
                    if peer in self.scope:
                        heapq.heappush(heap, (negative, peer))  # its gains changed
                heapq.heappush(heap, (negative, key))
                break
        return saved

    def target(self, order: list[str], start: Mapping[str, DomainKey]) -> Target:
        """Descend from `start` (pod -> domain key, the last cycle's target: each pod put there
        where it still may go), then regroup while that saves anything."""
        original = self.model.locations.copy()
        saved = self.resume(start)
        saved += self.descend(order)
        while (regrouped := self.regroup()) > TOLERANCE:
            saved += regrouped
        places = {
            key: domain
            for key in self.seen
            if self.model.locations[key] != original[key] and (domain := self.here(key)) is not None
        }
        joined = set(places.values())
        anchors = frozenset(
            peer
            for key in places
            for peer in self.model.peers[key]
            if peer not in places and peer in self.scope and self.here(peer) in joined
        )
        return Target(places, saved, anchors)

    def resume(self, start: Mapping[str, DomainKey]) -> float:
        saved = 0.0
        for key, domain_key in sorted(start.items()):
            if key not in self.scope:
                continue
            domain = Domain(self.level, tuple(domain_key))
            if domain != self.here(key) and domain in self.topology.nodes_by_domain:
                saved += self.put(key, domain) or 0.0
        return saved

    def put(self, key: str, domain: Domain) -> float | None:
        """What moving the pod into `domain` saves, once moved; None when the rules or the room
        keep it out."""
        pod = self.snapshot.pods[key]
        node = self.room(pod, domain)
        if node is None:
            return None
        gain = self.gain(key, domain)
        self.place(pod, domain, node)
        return gain

    def regroup(self) -> float:
        """Each group of pods that share a domain and talk to each other tried in the domains
        of their outside peers, the members that fit moved there and a descent around them
        following; a try that saves anything in all is kept, the others undone."""
        saved = 0.0
        for group in self.groups():
            for domain in self.outside(group):
                if self.left <= 0 or self.tries <= 0:
                    return saved
                if len({self.here(key) for key in group}) > 1:
                    break  # parted by an earlier try
                self.tries -= 1
                self.undo = []
                moved = self.move_group(group, domain)
                tried = None if moved is None else moved + self.descend(self.around(group))
                undo, self.undo = self.undo, None
                if tried is not None and tried > TOLERANCE:
                    saved += tried
                    break
                for pod, domain_before, node_before in reversed(undo):
                    self.place(pod, domain_before, node_before)
        return saved

    def move_group(self, group: list[str], domain: Domain) -> float | None:
        """What moving the members that may go and fit into `domain` saves, one by one; None
        when fewer than two do."""
        gains = [gain for key in group if (gain := self.put(key, domain)) is not None]
        return sum(gains) if len(gains) >= 2 else None

    def around(self, group: list[str]) -> list[str]:
        """The group's pods and their peers, and those peers' peers, that the search may move."""
        peers = self.model.peers
        near = dict.fromkeys(group)
        for _hop in range(2):
            for key in list(near):
                near.update(dict.fromkeys(peer for peer in peers[key] if peer in self.scope))
        return list(near)

    def groups(self) -> list[list[str]]:
        """Movable pods in one domain that talk to each other, the groups with most traffic
        first."""
        by_domain: dict[Domain, list[str]] = {}
        for key in self.seen:
            here = self.here(key)
            if here is not None:
                by_domain.setdefault(here, []).append(key)
        found: list[tuple[float, list[str]]] = []
        peers = self.model.peers
        for members in by_domain.values():
            if len(members) < 2:
                continue
            graph: nx.Graph[str] = nx.Graph()
            graph.add_nodes_from(members)
            inside = set(members)
            graph.add_edges_from(
                (key, peer) for key in members for peer in peers[key] if peer in inside
            )
            for component in nx.connected_components(graph):
                if 2 <= len(component) <= GROUP:
                    group = sorted(component)
                    weight = sum(rate for key in group for rate in peers[key].values())
                    found.append((weight, group))
        found.sort(key=lambda item: (-item[0], item[1]))
        return [group for _weight, group in found]

    def outside(self, group: list[str]) -> list[Domain]:
        """The domains the group's other peers are in."""
        members = set(group)
        here = self.here(group[0])
        domains = {
            domain
            for key in group
            for peer in self.model.peers[key]
            if peer not in members and (domain := self.here(peer)) is not None and domain != here
        }
        return sorted(domains, key=lambda domain: domain.key)
