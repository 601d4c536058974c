"""The order in which the planner tries a target domain's nodes: least loaded first."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping
from dataclasses import dataclass, field

from rebalancer.cluster.fit import Occupancy
from rebalancer.cluster.model import (
    Node,
)
from rebalancer.cluster.topology import Domain, Topology


@dataclass
class NodeOrder:
    """Each target domain's nodes, least loaded first (by free share of CPU plus memory, then
    name), kept in that order as moves reserve room, so the planner checks nodes in this order
    and takes the first that fits: the node a scan of the whole domain would pick, without
    scoring thousands of nodes for every candidate."""

    topology: Topology
    nodes: Mapping[str, Node]
    occupancy: Occupancy
    ordered: dict[Domain, list[tuple[float, str]]] = field(default_factory=dict)
    keys: dict[str, tuple[float, str]] = field(default_factory=dict)
    """Each node's place in the orders it is in."""

    def over(self, occupancy: Occupancy) -> NodeOrder:
        """A fresh order for a copy of the occupancy (a joint move's trial)."""
        return NodeOrder(self.topology, self.nodes, occupancy)

    def of(self, domain: Domain) -> list[tuple[float, str]]:
        order = self.ordered.get(domain)
        if order is None:
            names = self.topology.nodes_by_domain.get(domain, [])
            order = self.ordered[domain] = sorted(map(self._key, names))
        return order

    def reserved(self, node_name: str) -> None:
        """Moves `node_name` to its place after room on it was reserved."""
        old = self.keys.pop(node_name, None)
        if old is None:
            return  # in no order yet
        new = self._key(node_name)
        location = self.topology.node_locations.get(node_name, ())
        for level in range(len(location)):
            domain = self.topology.domain_of(location, level)
            order = self.ordered.get(domain) if domain is not None else None
            if order is not None:
                del order[bisect_left(order, old)]
                insort(order, new)

    def _key(self, node_name: str) -> tuple[float, str]:
        key = self.keys.get(node_name)
        if key is None:
            node = self.nodes[node_name]
            free = self.occupancy.free(node)
            score = _free_share(free.cpu_millis, node.allocatable.cpu_millis) + _free_share(
                free.memory_bytes, node.allocatable.memory_bytes
            )
            key = self.keys[node_name] = (-score, node_name)
        return key


@dataclass(frozen=True)
class NoFit:
    reason: str


def _free_share(free: int, allocatable: int) -> float:
    return free / allocatable if allocatable > 0 else 0.0
