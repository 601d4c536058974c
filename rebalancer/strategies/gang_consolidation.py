"""gang-consolidation: a tightly communicating group spread over more domains than it needs.

Training jobs (all-reduce rings, parameter servers) and other gangs talk all-to-all, so each extra
rack or zone they span adds traffic across the slowest links. Groups come from a label (a job
name), the namespace (one application per namespace) or, when nothing declares them, from
communities of the communication graph. The group is packed into the fewest domains that can hold
it, keeping the domains where most members already run, so the fewest pods move.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Annotated, Literal

import networkx as nx
from pydantic import Field

from rebalancer.cluster.model import Resources
from rebalancer.cluster.topology import Domain
from rebalancer.strategies.framework import Candidate, ClusterView, Strategy, StrategyArgs

PLUGIN_NAME = "gang-consolidation"


class GangConsolidationArgs(StrategyArgs):
    group_by: Literal["label", "namespace", "community"] = "label"
    """`label`: groups are pods sharing a label value; `namespace`: each namespace is a group,
    for clusters that give every application its own; `community`: groups are found in the
    traffic graph (Louvain), for gangs that carry no common label."""
    group_label: str = "job-name"
    """With group_by=label: pods of one namespace sharing this label's value form a group."""
    min_group_size: Annotated[int, Field(ge=2)] = 2
    """Smaller groups are left to split-peers."""
    min_internal_share: Annotated[float, Field(ge=0, le=1)] = 0.5
    """Least share of the group's traffic that stays inside the group: "tightly communicating"."""
    resolution: Annotated[float, Field(gt=0)] = 1.0
    """With group_by=community: Louvain resolution; higher finds smaller communities."""


class GangConsolidation:
    name = PLUGIN_NAME

    def __init__(self, args: GangConsolidationArgs) -> None:
        self.args = args

    def groups(self, view: ClusterView) -> dict[str, list[str]]:
        if self.args.group_by == "community":
            communities = nx.community.louvain_communities(
                view.cost.graph, weight="weight", resolution=self.args.resolution, seed=0
            )
            return {f"community of {min(c)}": sorted(c) for c in communities}
        groups: dict[str, list[str]] = defaultdict(list)
        for pod in sorted(view.cost.peers):
            namespace = view.snapshot.pods[pod].namespace
            if self.args.group_by == "namespace":
                groups[f"namespace {namespace}"].append(pod)
                continue
            value = view.snapshot.pods[pod].labels.get(self.args.group_label)
            if value:
                groups[f"{namespace}/{value}"].append(pod)
        return groups

    def propose(self, view: ClusterView) -> list[Candidate]:
        candidates: list[Candidate] = []
        for name, members in sorted(self.groups(view).items()):
            if len(members) >= self.args.min_group_size and self._tight(view, members):
                candidates.extend(self._consolidate(view, name, members))
        return candidates

    def _tight(self, view: ClusterView, members: list[str]) -> bool:
        internal, external = view.cost.group_traffic(set(members))
        total = internal + external
        return total > 0 and internal / total >= self.args.min_internal_share

    def _consolidate(self, view: ClusterView, name: str, members: list[str]) -> list[Candidate]:
        packing = fewest_domains(view, members, view.topology.level_index(self.args.level))
        if packing is None:
            return []
        cost = view.cost
        spare = {d: packing.room[d] for d in packing.chosen}
        candidates = []
        for pod in packing.outside:
            open_domains = [d for d in packing.chosen if spare[d] > 0]
            if not open_domains:
                break
            target = max(open_domains, key=lambda d: (cost.gain(pod, d), d.key))
            gain = cost.gain(pod, target)
            if gain <= 0:
                continue
            spare[target] -= 1
            candidates.append(
                Candidate(
                    pod=pod,
                    target=target,
                    gain=gain,
                    reason=f"group {name} spans {len(packing.spanned)} {self.args.level}s "
                    f"but fits in {len(packing.chosen)}",
                    strategy=self.name,
                )
            )
        return candidates


@dataclass(frozen=True)
class Packing:
    """A group spread over more domains of a level than it needs, and the fewest that hold it."""

    spanned: dict[Domain, list[str]]
    """Each domain the group runs in now, with its members there."""
    chosen: list[Domain]
    """The fewest domains that can hold the whole group, where most members already run first."""
    room: dict[Domain, int]
    """How many more group-sized pods each domain of the level can take."""

    @property
    def outside(self) -> list[str]:
        """The members that would move: those outside the chosen domains."""
        chosen = set(self.chosen)
        return sorted(p for d, pods in self.spanned.items() if d not in chosen for p in pods)


def fewest_domains(view: ClusterView, members: list[str], level: int) -> Packing | None:
    """The group's packing at `level`, or None when it already runs in as few domains as can
    hold it, or part of it runs where the topology is unknown (never guessed)."""
    topology, cost = view.topology, view.cost
    spanned: dict[Domain, list[str]] = defaultdict(list)
    for pod in members:
        domain = topology.domain_of(cost.locations[pod], level)
        if domain is None:
            return None
        spanned[domain].append(pod)
    if len(spanned) < 2:
        return None
    room = {d: _room(view, d, members) for d in topology.domains_at(level)}
    ranked = sorted(room, key=lambda d: (-len(spanned.get(d, [])), -room[d], d.key))
    chosen: list[Domain] = []
    capacity = 0
    for domain in ranked:
        chosen.append(domain)
        capacity += len(spanned.get(domain, [])) + room[domain]
        if capacity >= len(members):
            break
    if capacity < len(members) or len(chosen) >= len(spanned):
        return None
    return Packing(dict(spanned), chosen, room)


def _room(view: ClusterView, domain: Domain, members: list[str]) -> int:
    """How many more group-sized pods the domain's nodes can take, by free requests (GPUs and
    other extended resources included: on GPU racks they run out first)."""
    requests = [view.snapshot.pods[member].requests for member in members]
    scalars: dict[str, int] = {}
    for each in requests:
        for name, amount in each.scalars:
            scalars[name] = max(scalars.get(name, 0), amount)
    largest = Resources(
        max(r.cpu_millis for r in requests),
        max(r.memory_bytes for r in requests),
        1,
        tuple(sorted(scalars.items())),
    )
    room = 0
    for node_name in view.topology.nodes_by_domain.get(domain, []):
        node = view.snapshot.nodes[node_name]
        if node.unschedulable or not node.ready:
            continue
        room += largest.copies_in(view.occupancy.free(node))
    return max(room, 0)


def new(args: StrategyArgs) -> Strategy:
    assert isinstance(args, GangConsolidationArgs)
    return GangConsolidation(args)
