"""gang-consolidation: a tightly communicating group spread over more domains than it needs.

Training jobs (all-reduce rings, parameter servers) and other gangs talk all-to-all, so each extra
rack or zone they span adds traffic across the slowest links. Groups come from a label (a job
name), the namespace (one application per namespace) or, when nothing declares them, from
communities of the communication graph. The group is packed into the fewest domains that can hold
it, keeping the domains where most members already run, so the fewest pods move.
"""

from __future__ import annotations

from collections import defaultdict
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
        topology, cost = view.topology, view.cost
        level = topology.level_index(self.args.level)
        by_domain: dict[Domain, list[str]] = defaultdict(list)
        for pod in members:
            domain = topology.domain_of(cost.locations[pod], level)
            if domain is None:
                return []  # part of the group sits where the topology is unknown: do not guess
            by_domain[domain].append(pod)
        if len(by_domain) < 2:
            return []
        room = {d: self._room(view, d, members) for d in topology.domains_at(level)}
        ranked = sorted(room, key=lambda d: (-len(by_domain.get(d, [])), -room[d], d.key))
        chosen: list[Domain] = []
        capacity = 0
        for domain in ranked:
            chosen.append(domain)
            capacity += len(by_domain.get(domain, [])) + room[domain]
            if capacity >= len(members):
                break
        if capacity < len(members) or len(chosen) >= len(by_domain):
            return []
        spare = {d: room[d] for d in chosen}
        outside = [pod for d, pods in by_domain.items() if d not in chosen for pod in pods]
        candidates = []
        for pod in sorted(outside):
            open_domains = [d for d in chosen if spare[d] > 0]
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
                    reason=f"group {name} spans {len(by_domain)} {self.args.level}s "
                    f"but fits in {len(chosen)}",
                    strategy=self.name,
                )
            )
        return candidates

    def _room(self, view: ClusterView, domain: Domain, members: list[str]) -> int:
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
