"""One consistent, immutable picture of the cluster per cycle, parsed from a Kubernetes `List`.

The input is exactly what `kubectl get nodes,pods,poddisruptionbudgets,replicasets,deployments,
statefulsets -A -o json` prints, and also what the API client returns, so a user's real cluster
state and the live controller go through the same parser. Parsing is pure; reading files and the
API happens at the edges (`load_snapshot`, `rebalancer.kube`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from kubernetes.utils import parse_quantity

from rebalancer.errors import InputError, one_line
from rebalancer.files import read_json
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


@dataclass(frozen=True)
class Resources:
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


@dataclass(frozen=True)
class WorkloadRef:
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


@dataclass(frozen=True)
class Pod:
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
    node_selector: Mapping[str, str] = field(default_factory=dict)
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

    def pdbs_for(self, pod: Pod) -> list[Pdb]:
        return [
            pdb
            for pdb in self.pdbs
            if pdb.namespace == pod.namespace and matches_label_selector(pdb.selector, pod.labels)
        ]

    def pods_of(self, workload: WorkloadRef) -> list[Pod]:
        return [pod for pod in self.pods.values() if pod.workload == workload]


class _Field:
    """Reads nested fields of one item and names the exact path when one is malformed."""

    def __init__(self, origin: str, item: Mapping[str, Any]) -> None:
        self.origin = origin
        self.item = item

    def fail(self, path: str, problem: str) -> InputError:
        return InputError(f"{self.origin}: {path}: {problem}")

    def get(self, path: str, expected: type, default: Any = None) -> Any:
        value: Any = self.item
        for part in _path_parts(path):
            # `type is dict` first: a Mapping check goes through the ABC machinery, and this runs
            # for every field of every object of a large cluster.
            if type(value) is not dict and not isinstance(value, Mapping):
                raise self.fail(path, "expected an object")
            value = value.get(part)
            if value is None:
                return default
        if not isinstance(value, expected):
            raise self.fail(path, f"expected {expected.__name__}, got {type(value).__name__}")
        return value

    def quantity(self, path: str, raw: Any) -> Decimal:
        try:
            return _quantity(raw) if type(raw) is str else _parse_quantity(raw)
        except (ValueError, TypeError, InvalidOperation):
            raise self.fail(path, f"invalid quantity {raw!r}") from None


@functools.cache
def _path_parts(path: str) -> tuple[str, ...]:
    """A dotted field path split once: the parser reads the same few dozen paths from every
    object, some fifteen per pod."""
    return tuple(path.split("."))


def _parse_quantity(raw: Any) -> Decimal:
    return Decimal(parse_quantity(raw))  # type: ignore[no-untyped-call]


_quantity = functools.lru_cache(maxsize=4096)(_parse_quantity)
"""Requests and capacities repeat the same few texts ("100m", "128Mi") across a cluster; each
is parsed once. Decimal is immutable, so sharing one is safe; errors are not cached."""


def _resources(reader: _Field, path: str, values: Mapping[str, Any]) -> Resources:
    cpu = values.get("cpu")
    memory = values.get("memory")
    pods = values.get("pods")
    return Resources(
        cpu_millis=int(reader.quantity(f"{path}.cpu", cpu) * 1000) if cpu is not None else 0,
        memory_bytes=int(reader.quantity(f"{path}.memory", memory)) if memory is not None else 0,
        pods=int(reader.quantity(f"{path}.pods", pods)) if pods is not None else 0,
    )


def _pod_requests(reader: _Field, spec: Mapping[str, Any]) -> Resources:
    """Effective requests, as the scheduler counts them: containers summed, init containers max."""
    total = Resources(pods=1)
    for index, container in enumerate(spec.get("containers") or ()):
        path = f"spec.containers[{index}].resources.requests"
        total += _resources(reader, path, (container.get("resources") or {}).get("requests") or {})
    init_peak = Resources()
    for index, container in enumerate(spec.get("initContainers") or ()):
        path = f"spec.initContainers[{index}].resources.requests"
        request = _resources(reader, path, (container.get("resources") or {}).get("requests") or {})
        init_peak = Resources(
            max(init_peak.cpu_millis, request.cpu_millis),
            max(init_peak.memory_bytes, request.memory_bytes),
        )
    return Resources(
        max(total.cpu_millis, init_peak.cpu_millis),
        max(total.memory_bytes, init_peak.memory_bytes),
        1,
    )


def _controller_of(metadata: Mapping[str, Any]) -> tuple[str, str] | None:
    for owner in metadata.get("ownerReferences") or ():
        if owner.get("controller"):
            return str(owner.get("kind", "")), str(owner.get("name", ""))
    return None


def _affinity_terms(terms: Any, namespace: str) -> tuple[PodAffinityTerm, ...]:
    return tuple(
        PodAffinityTerm(
            label_selector=term.get("labelSelector"),
            topology_key=str(term.get("topologyKey", "")),
            namespaces=tuple(term.get("namespaces") or (namespace,)),
        )
        for term in terms or ()
    )


def _condition_true(conditions: Any, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions or ())


def _parse_node(reader: _Field) -> Node:
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
        for t in reader.get("spec.taints", list, [])
    )
    return Node(
        name=reader.get("metadata.name", str, ""),
        labels=dict(reader.get("metadata.labels", dict, {})),
        allocatable=_resources(
            reader, "status.allocatable", reader.get("status.allocatable", dict, {})
        ),
        taints=taints,
        unschedulable=bool(reader.get("spec.unschedulable", bool, False)),
        ready=_condition_true(reader.get("status.conditions", list, []), "Ready"),
    )


def _parse_pod(reader: _Field, owners: Mapping[tuple[str, str], tuple[str, str] | None]) -> Pod:
    namespace = reader.get("metadata.namespace", str, "default")
    metadata = reader.get("metadata", dict, {})
    spec = reader.get("spec", dict, {})
    controller = _controller_of(metadata)
    workload = None
    if controller is not None:
        kind, name = controller
        if kind == "ReplicaSet":
            # A ReplicaSet owned by a Deployment is an implementation detail of that Deployment.
            parent = owners.get((namespace, name))
            if parent is not None:
                kind, name = parent
        workload = WorkloadRef(kind, namespace, name)
    affinity = spec.get("affinity") or {}
    node_affinity = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    volumes = spec.get("volumes") or ()
    return Pod(
        namespace=namespace,
        name=reader.get("metadata.name", str, ""),
        node_name=reader.get("spec.nodeName", str),
        phase=reader.get("status.phase", str, "Unknown"),
        ready=_condition_true(reader.get("status.conditions", list, []), "Ready"),
        labels=dict(reader.get("metadata.labels", dict, {})),
        annotations=dict(reader.get("metadata.annotations", dict, {})),
        workload=workload,
        controller_kind=controller[0] if controller else None,
        controller_name=controller[1] if controller else None,
        requests=_pod_requests(reader, spec),
        node_selector=dict(reader.get("spec.nodeSelector", dict, {})),
        required_node_terms=tuple(node_affinity.get("nodeSelectorTerms") or ()),
        tolerations=tuple(reader.get("spec.tolerations", list, [])),
        spread_constraints=tuple(
            SpreadConstraint(
                max_skew=int(c.get("maxSkew", 1)),
                topology_key=str(c.get("topologyKey", "")),
                hard=c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule",
                label_selector=c.get("labelSelector"),
            )
            for c in reader.get("spec.topologySpreadConstraints", list, [])
        ),
        required_affinity=_affinity_terms(
            (affinity.get("podAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            ),
            namespace,
        ),
        required_anti_affinity=_affinity_terms(
            (affinity.get("podAntiAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            ),
            namespace,
        ),
        priority=int(reader.get("spec.priority", int, 0)),
        priority_class_name=reader.get("spec.priorityClassName", str, ""),
        has_local_storage=any("emptyDir" in v or "hostPath" in v for v in volumes),
        has_pvc=any("persistentVolumeClaim" in v or "ephemeral" in v for v in volumes),
        created=reader.get("metadata.creationTimestamp", str, ""),
        uid=reader.get("metadata.uid", str, ""),
    )


def _parse_pdb(reader: _Field) -> Pdb:
    generation = reader.get("metadata.generation", int, 0)
    observed = reader.get("status.observedGeneration", int)
    return Pdb(
        namespace=reader.get("metadata.namespace", str, "default"),
        name=reader.get("metadata.name", str, ""),
        selector=reader.get("spec.selector", dict),
        disruptions_allowed=int(reader.get("status.disruptionsAllowed", int, 0)),
        status_observed=observed is not None and observed >= generation,
    )


def _item_kind(item: Any, list_kind: Any) -> str:
    kind = item.get("kind") if isinstance(item, Mapping) else None
    if isinstance(kind, str):
        return kind
    # The API omits `kind` on the items of a typed list such as PodList.
    return list_kind.removesuffix("List") if isinstance(list_kind, str) else ""


def parse_snapshot(document: Any, origin: str) -> Snapshot:
    """Build a Snapshot from a Kubernetes List, already decoded from JSON."""
    if not isinstance(document, Mapping) or not isinstance(document.get("items"), list):
        raise InputError(f"{origin}: not a Kubernetes List (expected an object with 'items')")
    return parse_items(
        [(item, _item_kind(item, document.get("kind"))) for item in document["items"]], origin
    )


_MALFORMED = (AttributeError, TypeError, ValueError, KeyError)
"""What reading an object of the wrong shape raises, deep inside fields that the API server always
sends well-formed but a hand-edited file may not."""


def _malformed(where: str, error: Exception) -> InputError:
    detail = one_line(error, limit=200)
    return InputError(f"{where}: malformed object ({type(error).__name__}: {detail})")


def parse_items(items: list[tuple[Any, str]], origin: str) -> Snapshot:
    """Items with their kinds, in any order: owners are resolved after everything is read."""
    snapshot = Snapshot()
    replicaset_owners: dict[tuple[str, str], tuple[str, str] | None] = {}
    pod_readers: list[_Field] = []
    for index, (item, kind) in enumerate(items):
        if not isinstance(item, Mapping):
            raise InputError(f"{origin}: items[{index}]: expected an object")
        try:
            name = (item.get("metadata") or {}).get("name", "?")
            reader = _Field(f"{origin}: items[{index}] ({kind} {name})", item)
            if kind == "Node":
                node = _parse_node(reader)
                snapshot.nodes[node.name] = node
            elif kind == "Pod":
                pod_readers.append(reader)
            elif kind == "PodDisruptionBudget":
                snapshot.pdbs.append(_parse_pdb(reader))
            elif kind == "ReplicaSet":
                namespace = reader.get("metadata.namespace", str, "default")
                replicaset_owners[(namespace, name)] = _controller_of(item.get("metadata") or {})
            elif kind in {"Deployment", "StatefulSet"}:
                ref = WorkloadRef(kind, reader.get("metadata.namespace", str, "default"), name)
                snapshot.workloads[ref] = Workload(
                    ref,
                    reader.get("spec.replicas", int, 1),
                    dict(reader.get("metadata.annotations", dict, {})),
                )
        except _MALFORMED as error:
            raise _malformed(f"{origin}: items[{index}] ({kind})", error) from None
    for reader in pod_readers:
        try:
            pod = _parse_pod(reader, replicaset_owners)
        except _MALFORMED as error:
            raise _malformed(reader.origin, error) from None
        snapshot.pods[pod.key] = pod
        if pod.workload is not None and pod.workload not in snapshot.workloads:
            snapshot.workloads[pod.workload] = Workload(pod.workload, None, {})
    return snapshot


def load_snapshot(path: Path) -> Snapshot:
    return parse_snapshot(read_json(path, "snapshot"), str(path))
