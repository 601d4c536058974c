"""Would kube-scheduler accept this pod on that node? The filter plugins a move depends on.

The rebalancer only evicts; the scheduler decides where the replacement goes. A move is planned
only when the target domain has a node that passes the same filters the scheduler runs: resources,
nodeSelector, required node affinity, taints, required pod (anti-)affinity and topology spread.
The evicted pod's own resources are *not* released on its old node, because they stay held until
it has terminated, while its replacement already counts where it will land.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rebalancer.cluster.model import (
    Node,
    Pod,
    PodAffinityTerm,
    Resources,
    Snapshot,
    SpreadConstraint,
    Taint,
)
from rebalancer.cluster.selectors import matches_label_selector, matches_node_selector_terms
from rebalancer.cluster.topology import ZONE_LABEL

_RELEASED_PHASES = frozenset({"Succeeded", "Failed"})
_SERIALS = itertools.count()
_HARD_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass
class Occupancy:
    """Requested resources per node, and which node each pod counts on for spread and affinity."""

    snapshot: Snapshot
    requested: dict[str, Resources] = field(default_factory=dict)
    placement: dict[str, str] = field(default_factory=dict)
    """Pod key -> node; a planned pod counts on its target node."""
    by_namespace: dict[str, dict[str, str]] = field(default_factory=dict)
    """The same placements by namespace: spread and affinity terms count pods of a few
    namespaces, and scanning the whole cluster for each node checked made a check O(pods)."""
    anti_affine: set[str] = field(default_factory=set)
    """Placed pods with required anti-affinity, which also keeps newcomers off their domains."""
    serial: int = field(default_factory=lambda: next(_SERIALS))
    """This occupancy's own number, and `version` the count of its changes: together they say
    when what was worked out from it (a replacement's scores) still holds."""
    version: int = 0

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> Occupancy:
        """The pods running or waiting on the snapshot's nodes. A pod bound to a node the
        snapshot lacks (deleted, say, until its pods are gone) holds no room the scheduler
        counts, and its spread and affinity count on no node, as in kube-scheduler's cache."""
        occupancy = cls(snapshot)
        nodes = snapshot.nodes
        for pod in snapshot.pods.values():
            if pod.node_name in nodes and pod.phase not in _RELEASED_PHASES:
                occupancy.reserve(pod, pod.node_name)
        return occupancy

    def free(self, node: Node) -> Resources:
        return node.allocatable - self.requested.get(node.name, Resources())

    def reserve(self, pod: Pod, node_name: str) -> None:
        """Hold room for the replacement on `node_name`; the old pod still holds its own."""
        self.version += 1
        self.requested[node_name] = self.requested.get(node_name, Resources()) + pod.requests
        self.placement[pod.key] = node_name
        self.by_namespace.setdefault(pod.namespace, {})[pod.key] = node_name
        if pod.required_anti_affinity:
            self.anti_affine.add(pod.key)

    @contextmanager
    def trial(self, pods: Iterable[Pod]) -> Iterator[None]:
        """Reservations of these pods made within are taken back on leaving: room for a few pods
        at once checked without copying every placement (4 ms a copy at 100,000 pods)."""
        pods = list(pods)
        requested = dict(self.requested)  # per node, small beside the placements
        placed = {pod.key: self.placement.get(pod.key) for pod in pods}
        anti_affine = {pod.key for pod in pods} & self.anti_affine
        try:
            yield
        finally:
            self.version += 1
            self.requested.clear()  # in place: a NodeOrder may hold this dict
            self.requested.update(requested)
            for pod in pods:
                before = placed[pod.key]
                in_namespace = self.by_namespace.setdefault(pod.namespace, {})
                if before is None:
                    self.placement.pop(pod.key, None)
                    in_namespace.pop(pod.key, None)
                else:
                    self.placement[pod.key] = in_namespace[pod.key] = before
                if pod.key not in anti_affine:
                    self.anti_affine.discard(pod.key)

    def hold(self, requests: Resources, node_name: str) -> None:
        """Room taken on `node_name` by no pod the planner places: an evicted pod's, until it
        has terminated."""
        self.version += 1
        self.requested[node_name] = self.requested.get(node_name, Resources()) + requests

    def release(self, pod: Pod) -> None:
        """The pod is gone (the simulator removes evicted pods at once)."""
        self.version += 1
        node_name = self.placement.pop(pod.key, None)
        if node_name is not None:
            self.requested[node_name] = self.requested[node_name] - pod.requests
        self.by_namespace.get(pod.namespace, {}).pop(pod.key, None)
        self.anti_affine.discard(pod.key)

    @contextmanager
    def without(self, pod: Pod) -> Iterator[None]:
        """The pod's room and placement given up within, and taken back on leaving, the
        occupancy then as it was (its version too): what its replacement would see."""
        node_name = self.placement.get(pod.key)
        version = self.version
        if node_name is not None:
            self.release(pod)
        try:
            yield
        finally:
            if node_name is not None:
                self.reserve(pod, node_name)
            self.version = version

    def placed_in(self, namespaces: Iterable[str]) -> Iterator[tuple[Pod, str]]:
        """Each placed pod of these namespaces, with its node."""
        for namespace in namespaces:
            for key, node_name in self.by_namespace.get(namespace, {}).items():
                yield self.snapshot.pods[key], node_name

    def copy(self) -> Occupancy:
        return Occupancy(
            self.snapshot,
            dict(self.requested),
            dict(self.placement),
            {namespace: dict(pods) for namespace, pods in self.by_namespace.items()},
            set(self.anti_affine),
        )


def tolerates(tolerations: tuple[Mapping[str, Any], ...], taint: Taint) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect") or ""
        if effect and effect != taint.effect:
            continue
        key = toleration.get("key") or ""
        if toleration.get("operator") == "Exists":
            if not key or key == taint.key:
                return True
        elif key == taint.key and (toleration.get("value") or "") == taint.value:
            return True
    return False


def node_affinity_allows(pod: Pod, node: Node) -> bool:
    """nodeSelector and required node affinity: the node-level part of a pod's placement rules."""
    if any(node.labels.get(key) != value for key, value in pod.node_selector.items()):
        return False
    return not pod.required_node_terms or matches_node_selector_terms(
        list(pod.required_node_terms), node.name, node.labels
    )


def untolerated_taint(pod: Pod, node: Node) -> Taint | None:
    """The first NoSchedule or NoExecute taint of the node the pod does not tolerate."""
    for taint in node.taints:
        if taint.effect in _HARD_TAINT_EFFECTS and not tolerates(pod.tolerations, taint):
            return taint
    return None


def claimed_zone(pod: Pod, nodes: Mapping[str, Node]) -> str | None:
    """The zone the volumes of the pod's claims are bound to: that of the node it runs on, as a
    zonal disk attaches only there (the scheduler's VolumeBinding follows the volume's node
    affinity). None for a pod without claims."""
    if not pod.claims or pod.node_name is None or pod.node_name not in nodes:
        return None
    return nodes[pod.node_name].labels.get(ZONE_LABEL)


def admits(pod: Pod, node: Node, nodes: Mapping[str, Node]) -> bool:
    """Whether the node could ever take the pod, whatever else runs there: ready, schedulable,
    selected by the pod's node rules, every hard taint tolerated, and in its claims' zone."""
    zone = claimed_zone(pod, nodes)
    return (
        node.ready
        and not node.unschedulable
        and node_affinity_allows(pod, node)
        and untolerated_taint(pod, node) is None
        and (zone is None or node.labels.get(ZONE_LABEL) == zone)
    )


def first_fit(
    pod: Pod,
    names: Iterable[str],
    nodes: Mapping[str, Node],
    occupancy: Occupancy,
    honor_soft_spread: bool,
    *,
    besides: str | None,
) -> str | None:
    """The first of these nodes, other than `besides` (where the pod runs now), on which the
    scheduler would accept the pod; None when there is none."""
    return next(
        (
            name
            for name in names
            if name != besides and rejection(pod, nodes[name], occupancy, honor_soft_spread) is None
        ),
        None,
    )


def rejection(pod: Pod, node: Node, occupancy: Occupancy, honor_soft_spread: bool) -> str | None:
    """Why the scheduler would refuse `pod` on `node`, or None if it would accept it."""
    if node.unschedulable or not node.ready:
        return "node unschedulable or not ready"
    if not pod.requests.fits_in(occupancy.free(node)):
        return "insufficient resources"
    if not node_affinity_allows(pod, node):
        return "node selector or affinity"
    zone = claimed_zone(pod, occupancy.snapshot.nodes)
    if zone is not None and node.labels.get(ZONE_LABEL) != zone:
        return f"its volume claims are bound to zone {zone}"
    taint = untolerated_taint(pod, node)
    if taint is not None:
        return f"untolerated taint {taint.key}"
    if not _pod_affinity_allows(pod, node, occupancy):
        return "pod affinity or anti-affinity"
    for constraint in pod.spread_constraints:
        enforced = constraint.hard or honor_soft_spread
        if enforced and _spread_broken(pod, node, constraint, occupancy):
            return f"topology spread on {constraint.topology_key}"
    return None


def _others_near(
    pod: Pod, node: Node, term: PodAffinityTerm, occupancy: Occupancy
) -> list[Pod] | None:
    """Pods matching `term` in the candidate node's domain; None if the node lacks the key."""
    value = node.labels.get(term.topology_key)
    if value is None:
        return None
    snapshot = occupancy.snapshot
    near = []
    for other, node_name in occupancy.placed_in(term.namespaces):
        if other.key == pod.key:
            continue
        if not matches_label_selector(term.label_selector, other.labels):
            continue
        if (
            snapshot.nodes.get(node_name)
            and snapshot.nodes[node_name].labels.get(term.topology_key) == value
        ):
            near.append(other)
    return near


def _pod_affinity_allows(pod: Pod, node: Node, occupancy: Occupancy) -> bool:
    for term in pod.required_anti_affinity:
        if _others_near(pod, node, term, occupancy):
            return False
    for term in pod.required_affinity:
        near = _others_near(pod, node, term, occupancy)
        if near is None:
            return False
        if not near and not _no_match_anywhere_but_self(pod, term, occupancy):
            return False
    # Existing pods' anti-affinity also keeps newcomers away (the scheduler checks both ways).
    snapshot = occupancy.snapshot
    for key in occupancy.anti_affine:
        other = snapshot.pods[key]
        if key == pod.key:
            continue
        other_node = snapshot.nodes.get(occupancy.placement[key])
        for term in other.required_anti_affinity:
            if pod.namespace not in term.namespaces:
                continue
            if not matches_label_selector(term.label_selector, pod.labels):
                continue
            value = node.labels.get(term.topology_key)
            if (
                other_node
                and value is not None
                and other_node.labels.get(term.topology_key) == value
            ):
                return False
    return True


def _no_match_anywhere_but_self(pod: Pod, term: PodAffinityTerm, occupancy: Occupancy) -> bool:
    """The scheduler lets the first pod of a self-affine group go anywhere."""
    if not matches_label_selector(term.label_selector, pod.labels):
        return False
    return not any(
        other.key != pod.key and matches_label_selector(term.label_selector, other.labels)
        for other, _node_name in occupancy.placed_in(term.namespaces)
    )


def _spread_broken(
    pod: Pod, node: Node, constraint: SpreadConstraint, occupancy: Occupancy
) -> bool:
    """kube-scheduler's PodTopologySpread filter (count(target) + 1 - min <= maxSkew), and also
    the whole workload's skew must not grow past maxSkew: the scheduler never sees a pod *leave* a
    domain, but an eviction does, and HA beats locality."""
    key = constraint.topology_key
    target = node.labels.get(key)
    if target is None:
        return constraint.hard
    snapshot = occupancy.snapshot
    counts: dict[str, int] = {}
    for candidate in snapshot.nodes.values():
        value = candidate.labels.get(key)
        if value is not None and node_affinity_allows(pod, candidate):
            counts.setdefault(value, 0)
    origin = None
    for other, node_name in occupancy.placed_in([pod.namespace]):
        if not matches_label_selector(constraint.label_selector, other.labels):
            continue
        other_node = snapshot.nodes.get(node_name)
        value = other_node.labels.get(key) if other_node else None
        if other.key == pod.key:
            origin = value
        elif value in counts:
            counts[value] += 1
    if target not in counts:
        return False
    if counts[target] + 1 - min(counts.values()) > constraint.max_skew:
        return True
    before = dict(counts)
    if origin in before:
        before[origin] += 1
    after = dict(counts)
    after[target] += 1
    skew_before = max(before.values()) - min(before.values())
    skew_after = max(after.values()) - min(after.values())
    return skew_after > max(constraint.max_skew, skew_before)
