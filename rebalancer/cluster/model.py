"""The cluster as one cycle sees it: nodes, pods, budgets and workloads, immutable once read.

Every stage after the snapshot reads these records and nothing else, so the CLI, the controller
and the simulator plan on the same picture whatever it was read from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from rebalancer.cluster.selectors import matches_label_selector

SYSTEM_CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


class Resources(msgspec.Struct, frozen=True, gc=False):
    """A Struct for the speed of making one: the occupancy adds every pod's requests to its
    node's, a new Resources each time."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    pods: int = 0
    scalars: tuple[tuple[str, int], ...] = ()
    """Every other resource the scheduler's fit counts, by name and in whole units, sorted:
    extended resources such as nvidia.com/gpu, ephemeral-storage, hugepages. A GPU node is full
    when its GPUs are taken, however much CPU it has left. Empty for most pods, which keeps
    their sums on the fast path."""

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millis + other.cpu_millis,
            self.memory_bytes + other.memory_bytes,
            self.pods + other.pods,
            _combined(self.scalars, other.scalars, 1) if other.scalars else self.scalars,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millis - other.cpu_millis,
            self.memory_bytes - other.memory_bytes,
            self.pods - other.pods,
            _combined(self.scalars, other.scalars, -1) if other.scalars else self.scalars,
        )

    def fits_in(self, free: Resources) -> bool:
        return (
            self.cpu_millis <= free.cpu_millis
            and self.memory_bytes <= free.memory_bytes
            and self.pods <= free.pods
            and (not self.scalars or self.scalars_fit(free))
        )

    def scalars_fit(self, free: Resources) -> bool:
        """A resource the node does not offer is none free, as the scheduler counts it."""
        available = dict(free.scalars)
        return all(amount <= available.get(name, 0) for name, amount in self.scalars)

    def scalar(self, name: str) -> int:
        return dict(self.scalars).get(name, 0)

    def amount(self, name: str) -> int:
        """By name: a field (cpu_millis, memory_bytes, pods) or a scalar resource."""
        if name in _FIELDS:
            return int(getattr(self, name))
        return self.scalar(name)

    def copies_in(self, free: Resources) -> int:
        """How many pods of these requests `free` holds: the least over the resources they
        request (negative when `free` is)."""
        counts = [free.amount(name) // amount for name in _FIELDS if (amount := self.amount(name))]
        available = dict(free.scalars)
        counts += [available.get(name, 0) // amount for name, amount in self.scalars if amount]
        return min(counts) if counts else 0


_FIELDS = ("cpu_millis", "memory_bytes", "pods")


def _combined(
    ours: tuple[tuple[str, int], ...], theirs: tuple[tuple[str, int], ...], sign: int
) -> tuple[tuple[str, int], ...]:
    totals = dict(ours)
    for name, amount in theirs:
        totals[name] = totals.get(name, 0) + sign * amount
    return tuple(sorted((name, amount) for name, amount in totals.items() if amount))


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    allocatable: Resources
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True


class WorkloadRef(msgspec.Struct, frozen=True, gc=False):
    """A Struct: every pod of a workload has one, made as the pod is read, and the snapshot and
    the planner key dicts by it; a frozen dataclass hashes in Python."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True)
class PodAffinityTerm:
    label_selector: Mapping[str, Any] | None
    topology_key: str
    namespaces: tuple[str, ...]


@dataclass(frozen=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    hard: bool
    """whenUnsatisfiable: DoNotSchedule."""
    label_selector: Mapping[str, Any] | None


class Pod(msgspec.Struct, frozen=True, gc=False):
    """A Struct, not a dataclass: a frozen dataclass sets each of its 23 fields through
    object.__setattr__, in Python, where a Struct is made in C. Untracked
    by the cyclic collector (`gc=False`): a pod refers to no object that refers back to it."""

    namespace: str
    name: str
    node_name: str | None
    phase: str
    ready: bool
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    workload: WorkloadRef | None
    """The owning workload, resolved through ReplicaSets to Deployments; None for bare pods."""
    controller_kind: str | None
    requests: Resources
    controller_name: str | None = None
    """The direct controller (a ReplicaSet, not its Deployment): it creates the replacement."""
    node_selector: Mapping[str, str] = msgspec.field(default_factory=dict)
    required_node_terms: tuple[Mapping[str, Any], ...] = ()
    tolerations: tuple[Mapping[str, Any], ...] = ()
    spread_constraints: tuple[SpreadConstraint, ...] = ()
    required_affinity: tuple[PodAffinityTerm, ...] = ()
    required_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    priority: int = 0
    priority_class_name: str = ""
    local_volumes: tuple[str, ...] = ()
    """Names of the volumes whose data lives on the node and goes with the pod, as the cluster
    autoscaler counts them (`parse_pods.local_volumes`)."""
    has_pvc: bool = False
    claims: tuple[str, ...] = ()
    """The PersistentVolumeClaims it mounts (not generic ephemeral ones, made afresh with each
    pod): their volumes are bound to the zone it runs in."""
    created: str = ""
    uid: str = ""
    """metadata.uid: tells the pod planned for from a namesake made since (a StatefulSet's
    replacement has the same name). Empty where the source gives none."""
    scheduler_name: str = ""
    """spec.schedulerName; empty where the source gives none (the default scheduler)."""
    pod_group: str = ""
    """The upstream PodGroup API's group the pod belongs to (spec.schedulingGroup, or 1.35's
    spec.workloadRef); empty for none."""
    restart_policy: str = ""
    """spec.restartPolicy; empty where the source gives none."""
    restarts: int = 0
    """Its containers' and init containers' restarts, summed: what the Job controller counts
    against backoffLimit for pods under restartPolicy OnFailure."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Pdb:
    namespace: str
    name: str
    selector: Mapping[str, Any] | None
    disruptions_allowed: int
    status_observed: bool
    """status.observedGeneration has caught up with metadata.generation."""


@dataclass(frozen=True)
class Workload:
    ref: WorkloadRef
    replicas: int | None
    annotations: Mapping[str, str]
    paused: bool = False
    """A Deployment's spec.paused."""
    rollout: str | None = None
    """Why a rollout is under way (the controller has not seen the latest spec, or not every
    pod runs it), or None when it is done or not known."""
    one_at_a_time: str | None = None
    """How a Deployment says never to run an extra pod (strategy Recreate, or maxSurge 0), as a
    singleton holding a lock or a ReadWriteOnce volume does; None when it does not."""
    failures_left: int | None = None
    """A Job's pods that may still fail before the Job itself fails (backoffLimit minus the
    failed count); None for other kinds."""
    failures_per_index: int | None = None
    """A Job's backoffLimitPerIndex: each index fails for good past this many failures (its
    pods count theirs in the `batch.kubernetes.io/job-index-failure-count` annotation)."""
    evictions_fail: bool = True
    """Whether an evicted pod of the Job counts as failed: not when its pod failure policy
    ignores the DisruptionTarget condition. The ranks a restart makes abort count still."""
    backoff_limit: int | None = None
    """A Job's backoffLimit (6 when unset), which under restartPolicy OnFailure the restarts
    of its running pods' containers must stay below; None for other kinds, or a Job limited
    per index only."""


class Endpoint(msgspec.Struct, frozen=True, gc=False):
    """One address behind a Service, as its EndpointSlice lists it: where kube-proxy may send a
    connection. A Struct: a large cluster has an endpoint for most of its pods."""

    pod: str | None
    """namespace/name of the pod it reaches (its targetRef); None for an address set by hand."""
    node: str | None
    zone: str | None
    ready: bool
    """An unset condition counts as ready, as kube-proxy reads it."""
    serving: bool
    terminating: bool
    zone_hints: tuple[str, ...] = ()
    """hints.forZones: the zones whose clients kube-proxy sends here when every ready endpoint
    has such a hint."""
    node_hints: tuple[str, ...] = ()
    """hints.forNodes, written for trafficDistribution PreferSameNode."""


@dataclass(frozen=True)
class Service:
    namespace: str
    name: str
    selector: Mapping[str, str] | None
    """None for a Service without one, whose endpoints someone else writes."""
    traffic_distribution: str | None
    """spec.trafficDistribution as set: PreferSameZone, PreferClose (its older name),
    PreferSameNode, or None for cluster-wide."""
    internal_traffic_policy: str
    """Cluster, or Local: node-local endpoints only."""
    annotations: Mapping[str, str]
    headless: bool = False
    """clusterIP None: clients connect to pod addresses themselves, so no routing applies."""
    endpoints: tuple[Endpoint, ...] = ()
    """From every EndpointSlice of the Service, each pod once (a dual-stack Service lists it in
    a slice per address family)."""
    resource_version: str = ""
    """As read: a routing change is made at it, so one made on a Service changed since fails."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Snapshot:
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    pdbs: list[Pdb] = field(default_factory=list)
    workloads: dict[WorkloadRef, Workload] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)
    """By namespace/name; empty where the source listed none (an older snapshot file)."""
    autoscaled: dict[WorkloadRef, str] = field(default_factory=dict)
    """Workloads a HorizontalPodAutoscaler scales, with its name."""

    def indexes(self) -> SnapshotIndexes:
        """Built afresh on every call: the simulator changes its snapshot between cycles."""
        pods_of: dict[WorkloadRef, list[Pod]] = {}
        for pod in self.pods.values():
            if pod.workload is not None:
                pods_of.setdefault(pod.workload, []).append(pod)
        pdbs_in: dict[str, list[Pdb]] = {}
        for pdb in self.pdbs:
            pdbs_in.setdefault(pdb.namespace, []).append(pdb)
        return SnapshotIndexes(pods_of, pdbs_in)


@dataclass(frozen=True)
class SnapshotIndexes:
    """Lookups that would otherwise scan the snapshot for each candidate: every pod for its
    workload, and every PDB for its budget."""

    pods_by_workload: Mapping[WorkloadRef, list[Pod]]
    pdbs_by_namespace: Mapping[str, list[Pdb]]

    def pods_of(self, workload: WorkloadRef) -> list[Pod]:
        return self.pods_by_workload.get(workload, [])

    def pdbs_for(self, pod: Pod) -> list[Pdb]:
        return [
            pdb
            for pdb in self.pdbs_by_namespace.get(pod.namespace, ())
            if matches_label_selector(pdb.selector, pod.labels)
        ]
