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

Each cycle's search is made twice: afresh, and resumed from the last cycle's target, which is
kept unless the fresh one saves a tenth more, so the moves of consecutive cycles head the same
way.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx

from rebalancer.cluster.fit import Occupancy, first_fit
from rebalancer.cluster.model import Pod, Snapshot, SnapshotIndexes, WorkloadRef
from rebalancer.cluster.topology import Domain, DomainKey, Location, Topology
from rebalancer.config.resolved import PlanningRules
from rebalancer.cost.model import CostModel
from rebalancer.planning.floor import HaFloor
from rebalancer.planning.jobs import job_key
from rebalancer.planning.protections import protection_reason, unsettled_reason
from rebalancer.planning.state import PlannerState, RecentMove
from rebalancer.strategies.framework import Candidate, ClusterView

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
_RETARGET = 0.1
"""A fresh search replaces the last cycle's target, resumed, only if it saves this much more:
each change of target turns moves made toward the old one into moves to undo."""
_TOLERANCE = 1e-9
STRATEGY = "target-placement"
"""What the target's moves report as their strategy."""

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
class _Search:
    snapshot: Snapshot
    topology: Topology
    level: int
    """The search places pods in this level's domains."""
    model: CostModel
    occupancy: Occupancy
    allowed: Allowed
    honor_soft_spread: bool
    scope: _Scope
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
        gains = ((self.gain(key, domain), domain) for domain in tries)
        found = sorted(
            ((gain, domain) for gain, domain in gains if gain > _TOLERANCE),
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
            names = [level.name for level in self.topology.levels]
            here = dict(zip(names, origin, strict=False))
            there = dict(zip(names, target, strict=False))
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
            if heap and options[0][0] < -heap[0][0] - _TOLERANCE:
                heapq.heappush(heap, (-options[0][0], key))  # outdated by earlier moves
                continue
            pod = snapshot.pods[key]
            for gain, domain in options:
                if not self.may(pod, domain):
                    continue
                node = self.node_in(pod, domain)
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
        while (regrouped := self.regroup()) > _TOLERANCE:
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
        if not self.may(pod, domain):
            return None
        node = self.node_in(pod, domain)
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
                if tried is not None and tried > _TOLERANCE:
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
    scope = _Scope(snapshot, topology, rules, indexes, cost.locations, level)
    order = list(dict.fromkeys([*leads, *cost.locations]))
    remembered: dict[str, list[RecentMove]] = {}
    for move in state.recent_moves:
        remembered.setdefault(move.workload, []).append(move)

    def search(start: Mapping[str, DomainKey]) -> Target:
        run = _Search(
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

    fresh = search({})
    if not state.target:
        return fresh
    kept = search(state.target)
    return fresh if fresh.saved > kept.saved * (1 + _RETARGET) + _TOLERANCE else kept


@dataclass
class _Scope:
    """Which pods the search may move, each judged when first asked: at 100,000 pods most
    never are. Not protected, its workload settled, in a known domain, and not a rank of a
    job, which is moved whole or not at all (planning/jobs.py)."""

    snapshot: Snapshot
    topology: Topology
    rules: PlanningRules
    indexes: SnapshotIndexes
    found: Mapping[str, Location]
    level: int
    judged: dict[str, bool] = field(default_factory=dict)
    unsettled: dict[WorkloadRef, bool] = field(default_factory=dict)

    def __contains__(self, key: str) -> bool:
        known = self.judged.get(key)
        if known is None:
            known = self.judged[key] = self._movable(key)
        return known

    def origin(self, key: str) -> DomainKey:
        """The key of the pod's domain where the cycle found it."""
        domain = self.topology.domain_of(self.found[key], self.level)
        assert domain is not None  # a pod in an unknown domain is never in the scope
        return domain.key

    def _movable(self, key: str) -> bool:
        pod, location = self.snapshot.pods.get(key), self.found.get(key)
        if pod is None or location is None or self.topology.domain_of(location, self.level) is None:
            return False  # gone, or without traffic now (a pod the last target placed, say)
        rules = self.rules
        if protection_reason(pod, self.snapshot, self.indexes, rules) is not None:
            return False
        if rules.jobs.whole and job_key(pod, rules.jobs) is not None:
            return False
        workload = pod.workload
        if workload is None:
            return True
        if workload not in self.unsettled:
            spec = self.snapshot.workloads.get(workload)
            pods = self.indexes.pods_of(workload)
            self.unsettled[workload] = unsettled_reason(pods, spec) is not None
        return not self.unsettled[workload]


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
