"""Where kube-scheduler's default profile would put a new pod, in miniature: what the simulated
scheduler places replacements by, and what evict mode asks before it evicts a pod.

The filters are the planner's own (`fit.rejection`). The scores are: least allocated (weight 1);
the default soft spreading over zones and hosts, scored and normalized as PodTopologySpread does,
for the pods it holds for (weight 2); and preferred node affinity, which migrate mode adds to a
replacement (weight 2).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rebalancer.cluster.fit import Occupancy, rejection
from rebalancer.cluster.model import Node, Pod, Snapshot
from rebalancer.cluster.topology import ZONE_LABEL

_LEAST_ALLOCATED, _SPREAD, _NODE_AFFINITY = 1, 2, 2
"""kube-scheduler's default weights for the score plugins modelled."""
_DEFAULT_ZONE_SKEW, _DEFAULT_HOST_SKEW = 5, 3
"""The max skews of kube-scheduler's default (ScheduleAnyway) spread constraints."""


@dataclass(frozen=True)
class Steering:
    """Node affinity for the target's labels, as migrate mode adds it to a replacement. Its
    weight does not matter: as a pod's only preferred term it always normalizes to 100."""

    labels: Mapping[str, str]
    required: bool


def scores(
    pod: Pod,
    snapshot: Snapshot,
    occupancy: Occupancy,
    *,
    within: Mapping[str, str],
    steering: Steering | None,
) -> dict[str, float]:
    """Each node that would take a new pod like `pod` (its labels within `within`, and the
    steering's when required), with its score; empty when none would. The pod itself, if
    placed, counts as gone for spreading (PodTopologySpread skips terminating pods) but holds
    its room (the scheduler's cache keeps it until it has terminated)."""
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
        return {}
    spreading = (
        _spreading(pod, feasible, snapshot, occupancy) if spread_by_default(pod, snapshot) else {}
    )
    found: dict[str, float] = {}
    for node in feasible:
        score = _LEAST_ALLOCATED * _least_allocated(pod, node, occupancy)
        score += _SPREAD * spreading.get(node.name, 0.0)
        if steering is not None and steering.labels.items() <= node.labels.items():
            score += _NODE_AFFINITY * 100
        found[node.name] = score
    return found


@dataclass(frozen=True)
class SpreadWeights:
    """The largest weights the spreading score can give a sibling in the node's zone and on the
    node: those with every zone and node of the cluster feasible. Worked out once per plan, as
    every node is read for them."""

    zone: float
    host: float

    @classmethod
    def of(cls, snapshot: Snapshot) -> SpreadWeights:
        zones = {node.labels.get(ZONE_LABEL) for node in snapshot.nodes.values()}
        return cls(math.log(len(zones) + 2), math.log(len(snapshot.nodes) + 2))


def surely_inside(
    pod: Pod,
    snapshot: Snapshot,
    occupancy: Occupancy,
    steering: Steering,
    inside: Iterable[str],
    *,
    weights: SpreadWeights,
) -> bool:
    """Whether a node of `inside`, all of which carry the steering's labels, is sure to score
    higher than every node without them, as `scores` would score them. Then only those nodes
    are among the best, and the rest of the cluster need not be scored: scored for each move,
    every node of a large cluster made a long plan's time grow as moves times nodes.

    A node without the labels scores at most 100 (least allocated) + 2 x 100 (spreading). One
    with them scores 2 x 100 for the affinity, its exact least-allocated score, and for
    spreading at least 100 x 6 / its raw value (the raw value is at least 6, the two default
    skews less one, and at most the highest, by which the score is normalized), which is
    bounded above with `weights`."""
    spreads = spread_by_default(pod, snapshot)
    per_zone, per_host = _siblings(pod, snapshot, occupancy)
    floor = (_DEFAULT_ZONE_SKEW - 1) + (_DEFAULT_HOST_SKEW - 1)
    outside_most = _LEAST_ALLOCATED * 100 + (_SPREAD * 100 if spreads else 0)
    for name in inside:
        node = snapshot.nodes[name]
        if not steering.labels.items() <= node.labels.items():
            continue
        raw = (
            per_zone[node.labels.get(ZONE_LABEL)] * weights.zone
            + per_host[name] * weights.host
            + floor
        )
        least = (
            _LEAST_ALLOCATED * _least_allocated(pod, node, occupancy)
            + (_SPREAD * 100 * floor / raw if spreads else 0)
            + _NODE_AFFINITY * 100
        )
        if (
            least > outside_most
            and rejection(pod, node, occupancy, honor_soft_spread=False) is None
        ):
            return True
    return False


_SPREAD_BY_DEFAULT = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
"""The controllers whose selector kube-scheduler's default spread constraints take."""


def spread_by_default(pod: Pod, snapshot: Snapshot) -> bool:
    """Whether kube-scheduler's default spread constraints hold for the pod: they count the
    pods its ReplicaSet, StatefulSet or ReplicationController selects and those of the Services
    that select it (helper.DefaultSelector); with neither, as for a Job's pod or one owned by a
    pod (a Spark executor), the selector is empty and PodTopologySpread skips the pod."""
    if pod.controller_kind in _SPREAD_BY_DEFAULT:
        return True
    return any(
        service.namespace == pod.namespace
        and service.selector
        and service.selector.items() <= pod.labels.items()
        for service in snapshot.services.values()
    )


def best(scored: Mapping[str, float]) -> list[str]:
    """The nodes of the highest score, sorted: the scheduler picks one of them at random."""
    if not scored:
        return []
    top = max(scored.values())
    return sorted(name for name, score in scored.items() if score == top)


def _fraction(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def _least_allocated(pod: Pod, node: Node, occupancy: Occupancy) -> float:
    free = occupancy.free(node) - pod.requests
    allocatable = node.allocatable
    cpu = _fraction(free.cpu_millis, allocatable.cpu_millis)
    memory = _fraction(free.memory_bytes, allocatable.memory_bytes)
    return 100 * (cpu + memory) / 2


def _spreading(
    pod: Pod, feasible: list[Node], snapshot: Snapshot, occupancy: Occupancy
) -> dict[str, float]:
    """PodTopologySpread's score under the default constraints (zone, max skew 5; host, max
    skew 3; both ScheduleAnyway), normalized as kube-scheduler does: fewer pods of the same
    workload nearby scores higher, and the spread of scores is compressed."""
    zone_of = {name: node.labels.get(ZONE_LABEL) for name, node in snapshot.nodes.items()}
    per_zone, per_host = _siblings(pod, snapshot, occupancy)
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


def _siblings(
    pod: Pod, snapshot: Snapshot, occupancy: Occupancy
) -> tuple[Counter[str | None], Counter[str]]:
    """The other placed pods of the pod's workload, counted per zone and per node."""
    per_zone: Counter[str | None] = Counter()
    per_host: Counter[str] = Counter()
    for other, node_name in occupancy.placed_in([pod.namespace]):
        if other.key != pod.key and other.workload == pod.workload:
            per_host[node_name] += 1
            per_zone[snapshot.nodes[node_name].labels.get(ZONE_LABEL)] += 1
    return per_zone, per_host
