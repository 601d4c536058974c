"""The fewest moves to an optimal placement when each move must fit as it is made.

The program in optimum.py counts the pods whose node changes. On full nodes two pods that trade
places count two, yet no controller makes that trade without a third move through free room: the
replacement of the first is scheduled before the second has left. On small problems a breadth-first
search over placements settles it, each step moving one pod to a node that admits it and has room
for it then. Spread and the HA floor are not checked on the way, so the count is still a lower
bound on what the planner needs.
"""

from __future__ import annotations

from collections.abc import Mapping

from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Topology

MAX_PLACEMENTS = 100_000
"""Work limit: past this many placements reached the search gives up (None)."""


def fewest_in_order(
    snapshot: Snapshot,
    topology: Topology,
    rates: Mapping[tuple[str, str], float],
    allowed: Mapping[str, list[str]],
    best: float,
) -> int | None:
    """Moves in the shortest sequence that reaches a cost of `best` or less, moving only the pods
    in `allowed` onto their nodes there; None when the search is out of its work limit."""
    movable = sorted(key for key, nodes in allowed.items() if len(nodes) > 1)
    start = tuple(snapshot.pods[key].node_name or "" for key in movable)
    index = {key: i for i, key in enumerate(movable)}
    free = {name: node.allocatable for name, node in snapshot.nodes.items()}
    for pod in snapshot.pods.values():
        if pod.node_name in free and pod.key not in index:
            free[pod.node_name] = free[pod.node_name] - pod.requests
    pricing = _Pricing(topology, rates, index, snapshot)
    goal = best + max(1e-6, abs(best) * 1e-9)
    if pricing.cost(start) <= goal:
        return 0
    requests = [snapshot.pods[key].requests for key in movable]
    seen = {start}
    frontier = [start]
    depth = 0
    while frontier:
        depth += 1
        following = []
        for placement in frontier:
            room = dict(free)
            for node, needs in zip(placement, requests, strict=True):
                room[node] = room[node] - needs
            for i, key in enumerate(movable):
                for node in allowed[key]:
                    if node == placement[i] or not requests[i].fits_in(room[node]):
                        continue
                    moved = (*placement[:i], node, *placement[i + 1 :])
                    if moved in seen:
                        continue
                    if pricing.cost(moved) <= goal:
                        return depth
                    if len(seen) >= MAX_PLACEMENTS:
                        return None
                    seen.add(moved)
                    following.append(moved)
        frontier = following
    return None


class _Pricing:
    """The weighted cost of a placement of the movable pods, the others where they run."""

    def __init__(
        self,
        topology: Topology,
        rates: Mapping[tuple[str, str], float],
        index: Mapping[str, int],
        snapshot: Snapshot,
    ) -> None:
        self.locations = topology.node_locations
        self.weights = [level.weight for level in topology.levels]
        self.pairs: list[tuple[float, int | str, int | str]] = []
        for (a, b), rate in rates.items():
            first, second = (index.get(key, _node_of(snapshot, key)) for key in (a, b))
            if rate > 0 and a != b and first is not None and second is not None:
                self.pairs.append((rate, first, second))

    def cost(self, placement: tuple[str, ...]) -> float:
        total = 0.0
        for rate, a, b in self.pairs:
            here = self.locations.get(placement[a] if isinstance(a, int) else a)
            there = self.locations.get(placement[b] if isinstance(b, int) else b)
            if here is None or there is None:
                continue
            for level, weight in enumerate(self.weights):
                if here[: level + 1] != there[: level + 1]:
                    total += rate * weight
                    break
        return total


def _node_of(snapshot: Snapshot, key: str) -> str | None:
    pod = snapshot.pods.get(key)
    return None if pod is None else pod.node_name
