"""The simulated scheduler: kube-scheduler's default profile, in miniature.

The filters are the planner's own (`fit.rejection`). The scores are: least allocated (weight 1);
the default soft spreading over zones and hosts, scored and normalized as PodTopologySpread does
(weight 2); and preferred node affinity, which migrate mode adds to a replacement (weight 2). Ties
are broken by a seeded random choice, so a run is repeatable.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from rebalancer.cluster.fit import Occupancy, rejection
from rebalancer.cluster.model import Node, Pod, Snapshot
from rebalancer.cluster.topology import ZONE_LABEL

_LEAST_ALLOCATED, _SPREAD, _NODE_AFFINITY = 1, 2, 2
"""kube-scheduler's default weights for the score plugins the simulation models."""
_DEFAULT_ZONE_SKEW, _DEFAULT_HOST_SKEW = 5, 3
"""The max skews of kube-scheduler's default (ScheduleAnyway) spread constraints."""


@dataclass(frozen=True)
class SimulatedSteering:
    """What migrate mode adds to a replacement: node affinity for the target's labels. Its
    weight does not matter here: as a pod's only preferred term it always normalizes to 100."""

    labels: Mapping[str, str]
    required: bool


def _fraction(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


class Scheduler:
    """Filter with the planner's own fit checks, then score the way the default profile does."""

    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def place(
        self,
        pod: Pod,
        snapshot: Snapshot,
        occupancy: Occupancy,
        *,
        within: Mapping[str, str],
        steering: SimulatedSteering | None,
    ) -> str | None:
        # Both hold: a required hint cannot take a pod out of the zone its volume is bound to.
        required = [within.items()]
        if steering is not None and steering.required:
            required.append(steering.labels.items())
        feasible = [
            node
            for node in snapshot.nodes.values()
            if all(labels <= node.labels.items() for labels in required)
            and rejection(pod, node, occupancy, honor_soft_spread=False) is None
        ]
        if not feasible:
            return None
        spreading = self._spreading(pod, feasible, snapshot, occupancy)
        scores: dict[str, float] = {}
        for node in feasible:
            score = _LEAST_ALLOCATED * self._least_allocated(pod, node, occupancy)
            score += _SPREAD * spreading[node.name]
            if steering is not None and steering.labels.items() <= node.labels.items():
                score += _NODE_AFFINITY * 100  # the only preferred term, so it normalizes to 100
            scores[node.name] = score
        best = max(scores.values())
        return self.random.choice(sorted(name for name, s in scores.items() if s == best))

    @staticmethod
    def _least_allocated(pod: Pod, node: Node, occupancy: Occupancy) -> float:
        free = occupancy.free(node) - pod.requests
        allocatable = node.allocatable
        cpu = _fraction(free.cpu_millis, allocatable.cpu_millis)
        memory = _fraction(free.memory_bytes, allocatable.memory_bytes)
        return 100 * (cpu + memory) / 2

    @staticmethod
    def _spreading(
        pod: Pod, feasible: list[Node], snapshot: Snapshot, occupancy: Occupancy
    ) -> dict[str, float]:
        """PodTopologySpread's score under the default constraints (zone, max skew 5; host,
        max skew 3; both ScheduleAnyway), normalized as kube-scheduler does: fewer pods of the
        same workload nearby scores higher, and the spread of scores is compressed."""
        zone_of = {name: node.labels.get(ZONE_LABEL) for name, node in snapshot.nodes.items()}
        per_zone: Counter[str | None] = Counter()
        per_host: Counter[str] = Counter()
        for other, node_name in occupancy.placed_in([pod.namespace]):
            if other.key != pod.key and other.workload == pod.workload:
                per_host[node_name] += 1
                per_zone[zone_of[node_name]] += 1
        zone_weight = math.log(len({zone_of[n.name] for n in feasible}) + 2)
        host_weight = math.log(len(feasible) + 2)
        raw = {
            node.name: per_zone[zone_of[node.name]] * zone_weight
            + (_DEFAULT_ZONE_SKEW - 1)
            + per_host[node.name] * host_weight
            + (_DEFAULT_HOST_SKEW - 1)
            for node in feasible
        }
        highest, lowest = max(raw.values()), min(raw.values())
        if highest == lowest:
            return dict.fromkeys(raw, 100.0)
        return {name: 100 * (highest + lowest - value) / highest for name, value in raw.items()}
