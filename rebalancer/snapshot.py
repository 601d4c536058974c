"""One consistent, immutable picture of the cluster per cycle, parsed from a Kubernetes `List`.

The input is exactly what `kubectl get nodes,pods,poddisruptionbudgets,replicasets,deployments,
statefulsets -A -o json` prints, and also what the API client returns, so a user's real cluster
state and the live controller go through the same parser. Parsing is pure; reading files and the
API happens at the edges (`load_snapshot`, `rebalancer.kube`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import msgspec
from kubernetes.utils import parse_quantity

from rebalancer.errors import InputError, one_line, where_and_what
from rebalancer.files import read_bytes
from rebalancer.selectors import matches_label_selector

SNAPSHOT_KINDS = (
    "nodes",
    "pods",
    "poddisruptionbudgets",
    "replicasets",
    "deployments",
    "statefulsets",
)
SYSTEM_CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


class Resources(msgspec.Struct, frozen=True, gc=False):
    """A Struct for the speed of making one: the occupancy adds every pod's requests to its
    node's, a new Resources each time."""

    cpu_millis: int = 0
    memory_bytes: int = 0
    pods: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millis + other.cpu_millis,
            self.memory_bytes + other.memory_bytes,
            self.pods + other.pods,
        )

    def __sub__(self, other: Resources) -> Resources:
        return Resources(
            self.cpu_millis - other.cpu_millis,
            self.memory_bytes - other.memory_bytes,
            self.pods - other.pods,
        )

    def fits_in(self, free: Resources) -> bool:
        return (
            self.cpu_millis <= free.cpu_millis
            and self.memory_bytes <= free.memory_bytes
            and self.pods <= free.pods
        )


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
    object.__setattr__, and building 100k of them took a fifth of reading a snapshot. Untracked
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
    has_local_storage: bool = False
    has_pvc: bool = False
    created: str = ""
    uid: str = ""
    """metadata.uid: tells the pod planned for from a namesake made since (a StatefulSet's
    replacement has the same name). Empty where the source gives none."""

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


@dataclass
class Snapshot:
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    pdbs: list[Pdb] = field(default_factory=list)
    workloads: dict[WorkloadRef, Workload] = field(default_factory=dict)

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
    """Lookups that would otherwise scan the snapshot for each candidate: with limits lifted,
    planning 84k candidates at 100k pods read every pod for each one's workload, and every PDB
    for each one's budget."""

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


# The objects as the parser reads them: only the fields it uses, for every kind at once (no
# field name means different things in two kinds). msgspec decodes JSON, or converts the API
# client's dicts, into these in C, skipping everything else (managedFields, templates, most of
# status), and names the path of a field of the wrong type. An optional field may be null.
# Reading a List of 100k pods this way took 1.8 s, where json.loads and walking the dicts
# took 4.2 s; the watch cache's 100k dicts took 1.6 s, against 3.4 s.


class _OwnerReference(msgspec.Struct):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class _Metadata(msgspec.Struct):
    name: str = ""
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[_OwnerReference] | None = None  # noqa: N815 - the API's own names
    creationTimestamp: str | None = None  # noqa: N815
    uid: str | None = None
    generation: int | None = None


_Quantities = dict[str, str | int | float]


class _Requirements(msgspec.Struct):
    requests: _Quantities | None = None


class _Container(msgspec.Struct):
    resources: _Requirements | None = None


class _AffinityTerm(msgspec.Struct):
    labelSelector: dict[str, Any] | None = None  # noqa: N815
    topologyKey: str = ""  # noqa: N815
    namespaces: list[str] | None = None


class _PodAffinity(msgspec.Struct):
    requiredDuringSchedulingIgnoredDuringExecution: list[_AffinityTerm] | None = None  # noqa: N815


class _NodeSelector(msgspec.Struct):
    nodeSelectorTerms: list[dict[str, Any]] | None = None  # noqa: N815


class _NodeAffinity(msgspec.Struct):
    requiredDuringSchedulingIgnoredDuringExecution: _NodeSelector | None = None  # noqa: N815


class _Affinity(msgspec.Struct):
    nodeAffinity: _NodeAffinity | None = None  # noqa: N815
    podAffinity: _PodAffinity | None = None  # noqa: N815
    podAntiAffinity: _PodAffinity | None = None  # noqa: N815


class _SpreadConstraint(msgspec.Struct):
    maxSkew: int = 1  # noqa: N815
    topologyKey: str = ""  # noqa: N815
    whenUnsatisfiable: str = "DoNotSchedule"  # noqa: N815
    labelSelector: dict[str, Any] | None = None  # noqa: N815


class _Taint(msgspec.Struct):
    key: str = ""
    value: str = ""
    effect: str = ""


class _Spec(msgspec.Struct):
    # Pod
    nodeName: str | None = None  # noqa: N815
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None  # noqa: N815
    affinity: _Affinity | None = None
    volumes: list[dict[str, Any]] | None = None
    nodeSelector: dict[str, str] | None = None  # noqa: N815
    tolerations: list[dict[str, Any]] | None = None
    topologySpreadConstraints: list[_SpreadConstraint] | None = None  # noqa: N815
    priority: int | None = None
    priorityClassName: str | None = None  # noqa: N815
    # Node
    taints: list[_Taint] | None = None
    unschedulable: bool | None = None
    # PodDisruptionBudget, and the workloads
    selector: dict[str, Any] | None = None
    replicas: int | None = None


class _Condition(msgspec.Struct):
    type: str = ""
    status: str = ""


class _Status(msgspec.Struct):
    phase: str | None = None
    conditions: list[_Condition] | None = None
    allocatable: _Quantities | None = None
    disruptionsAllowed: int | None = None  # noqa: N815
    observedGeneration: int | None = None  # noqa: N815


class _Object(msgspec.Struct):
    kind: str | None = None
    metadata: _Metadata | None = None
    spec: _Spec | None = None
    status: _Status | None = None


class _List(msgspec.Struct):
    items: list[_Object]
    kind: str | None = None


_NO_METADATA, _NO_SPEC, _NO_STATUS = _Metadata(), _Spec(), _Status()
_LIST_DECODER = msgspec.json.Decoder(_List)


class _Reader:
    """Names where in the input a value came from, for the one-line error when it is bad."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def whole(self, path: str, raw: str | int | float, scale: int) -> int:
        try:
            return _whole(raw, scale)
        except (ValueError, TypeError, InvalidOperation):
            raise self._refused(path, raw) from None

    def request(
        self, field: str, index: int, resource: str, raw: str | int | float, scale: int
    ) -> int:
        """`whole`, for a container's request, its path put together only for an error: the
        paths and the Decimal arithmetic for every pod were about 0.05 s of the 0.7 s it took to
        read 100k pods."""
        try:
            return _whole(raw, scale)
        except (ValueError, TypeError, InvalidOperation):
            path = f"spec.{field}[{index}].resources.requests.{resource}"
            raise self._refused(path, raw) from None

    def _refused(self, path: str, raw: object) -> InputError:
        return InputError(f"{self.origin}: {path}: invalid quantity {raw!r}")


def _whole(raw: str | int | float, scale: int) -> int:
    """A quantity in whole units of 1/`scale` (millicores at 1000), rounded up, as the
    scheduler's `MilliValue()` and `Value()` round: the API server keeps 1.5 bytes of memory as
    "1500m", and truncated to 1 byte a pod would count as smaller than the scheduler counts it."""
    return _scaled_text(raw, scale) if type(raw) is str else _scaled(raw, scale)


def _scaled(raw: Any, scale: int) -> int:
    return math.ceil(Decimal(parse_quantity(raw)) * scale)  # type: ignore[no-untyped-call]


_scaled_text = functools.lru_cache(maxsize=4096)(_scaled)
"""Requests and capacities repeat the same few texts ("100m", "128Mi") across a cluster; each
is parsed once per scale. Errors are not cached."""


def _resources(reader: _Reader, path: str, values: _Quantities) -> Resources:
    def whole(resource: str, scale: int) -> int:
        raw = values.get(resource)
        return 0 if raw is None else reader.whole(f"{path}.{resource}", raw, scale)

    return Resources(whole("cpu", 1000), whole("memory", 1), whole("pods", 1))


def _pod_requests(reader: _Reader, spec: _Spec) -> Resources:
    """Effective requests, as the scheduler counts them: containers summed, init containers max.
    Counted in plain integers, one Resources at the end: a Resources per container and per sum
    took a third of the time to read a pod."""
    cpu = memory = 0
    for index, container in enumerate(spec.containers or ()):
        container_cpu, container_memory = _cpu_and_memory(reader, "containers", index, container)
        cpu, memory = cpu + container_cpu, memory + container_memory
    for index, container in enumerate(spec.initContainers or ()):
        init_cpu, init_memory = _cpu_and_memory(reader, "initContainers", index, container)
        cpu, memory = max(cpu, init_cpu), max(memory, init_memory)
    return Resources(cpu, memory, 1)


def _cpu_and_memory(
    reader: _Reader, field: str, index: int, container: _Container
) -> tuple[int, int]:
    requests = container.resources.requests if container.resources else None
    if not requests:
        return 0, 0
    cpu, memory = requests.get("cpu"), requests.get("memory")
    return (
        reader.request(field, index, "cpu", cpu, 1000) if cpu is not None else 0,
        reader.request(field, index, "memory", memory, 1) if memory is not None else 0,
    )


def _controller_of(metadata: _Metadata) -> tuple[str, str] | None:
    for owner in metadata.ownerReferences or ():
        if owner.controller:
            return owner.kind, owner.name
    return None


def _affinity_terms(affinity: _PodAffinity | None, namespace: str) -> tuple[PodAffinityTerm, ...]:
    if affinity is None:
        return ()
    return tuple(
        PodAffinityTerm(
            label_selector=term.labelSelector,
            topology_key=term.topologyKey,
            namespaces=tuple(term.namespaces or (namespace,)),
        )
        for term in affinity.requiredDuringSchedulingIgnoredDuringExecution or ()
    )


def _condition_true(status: _Status, kind: str) -> bool:
    for condition in status.conditions or ():
        if condition.type == kind and condition.status == "True":
            return True
    return False


def _parse_node(reader: _Reader, item: _Object) -> Node:
    metadata, spec, status = _parts(item)
    return Node(
        name=metadata.name,
        labels=metadata.labels or {},
        allocatable=_resources(reader, "status.allocatable", status.allocatable or {}),
        taints=tuple(Taint(t.key, t.value, t.effect) for t in spec.taints or ()),
        unschedulable=bool(spec.unschedulable),
        ready=_condition_true(status, "Ready"),
    )


def _replicaset_owner(
    metadata: _Metadata,
    controller: tuple[str, str] | None,
    owners: Mapping[tuple[str, str], tuple[str, str] | None],
) -> tuple[str, str] | None:
    """The controller of the pod's ReplicaSet, if the pod has one and it has one."""
    if controller is None or controller[0] != "ReplicaSet":
        return None
    return owners.get((metadata.namespace or "default", controller[1]))


def _parse_pod(
    reader: _Reader,
    item: _Object,
    controller: tuple[str, str] | None,
    replicaset_owner: tuple[str, str] | None,
) -> Pod:
    metadata, spec, status = _parts(item)
    namespace = metadata.namespace or "default"
    workload = None
    if controller is not None:
        # A ReplicaSet owned by a Deployment is an implementation detail of that Deployment.
        kind, name = replicaset_owner or controller
        workload = WorkloadRef(kind, namespace, name)
    affinity = spec.affinity
    node_affinity = affinity.nodeAffinity if affinity else None
    node_selector = (
        node_affinity.requiredDuringSchedulingIgnoredDuringExecution if node_affinity else None
    )
    volumes = spec.volumes or ()
    return Pod(
        namespace=namespace,
        name=metadata.name,
        node_name=spec.nodeName,
        phase=status.phase or "Unknown",
        ready=_condition_true(status, "Ready"),
        labels=metadata.labels or {},
        annotations=metadata.annotations or {},
        workload=workload,
        controller_kind=controller[0] if controller else None,
        controller_name=controller[1] if controller else None,
        requests=_pod_requests(reader, spec),
        node_selector=spec.nodeSelector or {},
        required_node_terms=tuple(node_selector.nodeSelectorTerms or ()) if node_selector else (),
        tolerations=tuple(spec.tolerations or ()),
        spread_constraints=tuple(
            SpreadConstraint(
                max_skew=c.maxSkew,
                topology_key=c.topologyKey,
                hard=c.whenUnsatisfiable == "DoNotSchedule",
                label_selector=c.labelSelector,
            )
            for c in spec.topologySpreadConstraints or ()
        ),
        required_affinity=_affinity_terms(affinity.podAffinity if affinity else None, namespace),
        required_anti_affinity=_affinity_terms(
            affinity.podAntiAffinity if affinity else None, namespace
        ),
        priority=spec.priority or 0,
        priority_class_name=spec.priorityClassName or "",
        has_local_storage=any("emptyDir" in v or "hostPath" in v for v in volumes),
        has_pvc=any("persistentVolumeClaim" in v or "ephemeral" in v for v in volumes),
        created=metadata.creationTimestamp or "",
        uid=metadata.uid or "",
    )


def _parse_pdb(item: _Object) -> Pdb:
    metadata, spec, status = _parts(item)
    observed = status.observedGeneration
    return Pdb(
        namespace=metadata.namespace or "default",
        name=metadata.name,
        selector=spec.selector,
        disruptions_allowed=status.disruptionsAllowed or 0,
        status_observed=observed is not None and observed >= (metadata.generation or 0),
    )


def _parts(item: _Object) -> tuple[_Metadata, _Spec, _Status]:
    return item.metadata or _NO_METADATA, item.spec or _NO_SPEC, item.status or _NO_STATUS


def parse_snapshot(document: Any, origin: str) -> Snapshot:
    """Build a Snapshot from a Kubernetes List, already decoded from JSON."""
    if not isinstance(document, Mapping) or not isinstance(document.get("items"), list):
        raise InputError(f"{origin}: not a Kubernetes List (expected an object with 'items')")
    try:
        listed = msgspec.convert(document, _List)
    except msgspec.ValidationError as error:
        raise _misread(error, origin, document["items"]) from None
    return _snapshot_of(listed, origin)


def decode_snapshot(body: bytes, origin: str) -> Snapshot:
    """Build a Snapshot from a Kubernetes List as JSON bytes, as a file or the API holds it."""
    try:
        listed = _LIST_DECODER.decode(body)
    except msgspec.ValidationError:  # a DecodeError too, so it must come first
        # Read again untyped, which names the object at fault, or finds the JSON itself broken
        # further on than the first field of the wrong type.
        return parse_snapshot(_decoded(body, origin), origin)
    except msgspec.DecodeError as error:
        raise _not_json(error, origin) from None
    return _snapshot_of(listed, origin)


def _decoded(body: bytes, origin: str) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        raise _not_json(error, origin) from None


def _not_json(error: msgspec.DecodeError, origin: str) -> InputError:
    return InputError(f"{origin}: not valid JSON ({one_line(error, 200)})")


def _snapshot_of(listed: _List, origin: str) -> Snapshot:
    list_kind = listed.kind.removesuffix("List") if listed.kind else ""
    return parse_items([(item, item.kind or list_kind) for item in listed.items], origin)


def _misread(error: msgspec.ValidationError, origin: str, items: list[Any]) -> InputError:
    """The error about a List's field, with the object it is in named as in every other error
    about one: "origin: items[3] (Pod web-1): metadata.name: expected `str`, got `int`"."""
    path, problem = where_and_what(error)
    found = re.fullmatch(r"\.items\[(\d+)\]\.?(.*)", path)
    if found is None:
        return InputError(f"{origin}: {path.lstrip('.') or 'the List'}: {problem}")
    index = int(found.group(1))
    return _item_error(f"{origin}: items[{index}]", items[index], found.group(2), problem)


def _item_error(where: str, item: Any, field_path: str, problem: str) -> InputError:
    if not field_path:
        return InputError(f"{where}: {problem}")
    return InputError(f"{where}{_naming(item)}: {field_path}: {problem}")


def _naming(item: Any) -> str:
    """ " (Pod web-1)" for an item whose kind and name are readable, else nothing."""
    if not isinstance(item, Mapping):
        return ""
    metadata = item.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    kind = item.get("kind")
    named = [text for text in (kind, name) if isinstance(text, str) and text]
    return f" ({' '.join(named)})" if named else ""


_ReadPod = tuple[_Object, tuple[str, str] | None, Pod]
"""An object, the owner of its ReplicaSet then, and the pod read from them."""


@dataclass
class PodsRead:
    """Pods as an earlier snapshot read them, by the object each was read from, for a source
    that hands over the same objects cycle after cycle: the watch cache, where a watch event
    replaces an object rather than changing it. Only new and replaced objects, and pods whose
    ReplicaSet changed owner, are read again. With nothing changed, a snapshot of 100k pods
    took 0.5-0.6 s so, against 1.4-1.5 s reading every pod."""

    by_object: dict[int, _ReadPod] = field(default_factory=dict)
    """By id(object); holding the object keeps that id its own."""


def parse_items(
    items: list[tuple[Any, str]], origin: str, pods_read: PodsRead | None = None
) -> Snapshot:
    """Items with their kinds, in any order: owners are resolved after everything is read.
    Each item is a decoded object or a dict as the API client returns it. `pods_read` is
    consulted, and then holds this snapshot's pods, when it is built without an error."""
    snapshot = Snapshot()
    replicaset_owners: dict[tuple[str, str], tuple[str, str] | None] = {}
    pods: list[tuple[int, _Object]] = []
    for index, (raw, kind) in enumerate(items):
        item = raw if type(raw) is _Object else _converted(raw, f"{origin}: items[{index}]")
        metadata = item.metadata or _NO_METADATA
        if kind == "Pod":
            pods.append((index, item))
            continue
        reader = _Reader(f"{origin}: items[{index}] ({kind} {metadata.name or '?'})")
        if kind == "Node":
            node = _parse_node(reader, item)
            snapshot.nodes[node.name] = node
        elif kind == "PodDisruptionBudget":
            snapshot.pdbs.append(_parse_pdb(item))
        elif kind == "ReplicaSet":
            key = (metadata.namespace or "default", metadata.name)
            replicaset_owners[key] = _controller_of(metadata)
        elif kind in {"Deployment", "StatefulSet"}:
            ref = WorkloadRef(kind, metadata.namespace or "default", metadata.name)
            replicas = (item.spec or _NO_SPEC).replicas
            snapshot.workloads[ref] = Workload(
                ref, 1 if replicas is None else replicas, metadata.annotations or {}
            )
    earlier = pods_read.by_object if pods_read is not None else {}
    read_now = _read_pods(pods, replicaset_owners, origin, earlier)
    for _item, _owner, pod in read_now.values():
        snapshot.pods[pod.key] = pod
        if pod.workload is not None and pod.workload not in snapshot.workloads:
            snapshot.workloads[pod.workload] = Workload(pod.workload, None, {})
    if pods_read is not None:
        pods_read.by_object = read_now
    return snapshot


def _read_pods(
    pods: list[tuple[int, _Object]],
    replicaset_owners: Mapping[tuple[str, str], tuple[str, str] | None],
    origin: str,
    earlier: Mapping[int, _ReadPod],
) -> dict[int, _ReadPod]:
    read: dict[int, _ReadPod] = {}
    for index, item in pods:
        metadata = item.metadata or _NO_METADATA
        controller = _controller_of(metadata)
        owner = _replicaset_owner(metadata, controller, replicaset_owners)
        known = earlier.get(id(item))
        if known is not None and known[1] == owner:  # the same object: see PodsRead
            read[id(item)] = known
            continue
        reader = _Reader(f"{origin}: items[{index}] (Pod {metadata.name or '?'})")
        pod = _parse_pod(reader, item, controller, owner)
        read[id(item)] = (item, owner, pod)
    return read


def prepared(item: Any) -> Any:
    """The object as `parse_items` reads it fastest, for a cache that holds objects between
    snapshots: converted once, when it arrives, to only the fields the rebalancer reads. One that
    does not convert is kept as given, so building a snapshot raises its error, naming it, as
    it would have."""
    try:
        return msgspec.convert(item, _Object)
    except msgspec.ValidationError:
        return item


def _converted(raw: Any, where: str) -> _Object:
    try:
        return msgspec.convert(raw, _Object)
    except msgspec.ValidationError as error:
        path, problem = where_and_what(error)
        raise _item_error(where, raw, path.lstrip("."), problem) from None


def load_snapshot(path: Path) -> Snapshot:
    return decode_snapshot(read_bytes(path, "snapshot"), str(path))
