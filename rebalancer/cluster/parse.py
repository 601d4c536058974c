"""A Kubernetes `List` (bytes or decoded items) to a Snapshot, purely.

The input is exactly what `kubectl get nodes,pods,poddisruptionbudgets,replicasets,deployments,
statefulsets,jobs,horizontalpodautoscalers,services,endpointslices -A -o json` prints, and also
what the API client returns, so a user's saved cluster state and the live controller go through
the same parser. Every bad value
is an InputError that names the item and the field.

Each kind is read in a module of its own (parse_nodes, parse_pods, parse_workloads, ...); here
the List is decoded, and owners are resolved once everything is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from rebalancer.cluster.doubts import item_error, misread, refuse_duplicates
from rebalancer.cluster.model import Pod, Snapshot, Workload, WorkloadRef
from rebalancer.cluster.parse_nodes import parse_node
from rebalancer.cluster.parse_objects import controller_of
from rebalancer.cluster.parse_pdbs import parse_pdb
from rebalancer.cluster.parse_pods import parse_pod
from rebalancer.cluster.parse_quantities import Reader
from rebalancer.cluster.parse_services import SERVICE_NAME_LABEL, parse_service
from rebalancer.cluster.parse_workloads import DEFAULT_BACKOFF_LIMIT, parse_workload
from rebalancer.cluster.wire import (
    LIST_DECODER,
    NO_METADATA,
    NO_SPEC,
    WireList,
    WireMetadata,
    WireObject,
)
from rebalancer.errors import InputError, one_line, where_and_what


def parse_snapshot(document: Any, origin: str) -> Snapshot:
    """Build a Snapshot from a Kubernetes List, already decoded from JSON."""
    if not isinstance(document, Mapping) or not isinstance(document.get("items"), list):
        raise InputError(f"{origin}: not a Kubernetes List (expected an object with 'items')")
    try:
        listed = msgspec.convert(document, WireList)
    except msgspec.ValidationError as error:
        raise misread(error, origin, document["items"]) from None
    return _snapshot_of(listed, origin)


def decode_snapshot(body: bytes, origin: str) -> Snapshot:
    """Build a Snapshot from a Kubernetes List as JSON bytes, as a file or the API holds it."""
    try:
        listed = LIST_DECODER.decode(body)
    except msgspec.ValidationError:  # a DecodeError too, so it must come first
        # Read again untyped, which names the object at fault, or finds the JSON itself broken
        # further on than the first field of the wrong type.
        return parse_snapshot(_decoded(body, origin), origin)
    except msgspec.DecodeError as error:
        raise _not_json(error, origin) from None
    except RecursionError:
        raise InputError(f"{origin}: not valid JSON (nested too deeply)") from None
    return _snapshot_of(listed, origin)


def _decoded(body: bytes, origin: str) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError as error:
        raise _not_json(error, origin) from None
    except RecursionError:
        raise InputError(f"{origin}: not valid JSON (nested too deeply)") from None


def _not_json(error: msgspec.DecodeError, origin: str) -> InputError:
    return InputError(f"{origin}: not valid JSON ({one_line(error, 200)})")


def _snapshot_of(listed: WireList, origin: str) -> Snapshot:
    list_kind = listed.kind.removesuffix("List") if listed.kind else ""
    return parse_items([(item, item.kind or list_kind) for item in listed.items], origin)


_ReadPod = tuple[WireObject, tuple[str, str] | None, Pod]
"""An object, the owner of its ReplicaSet then, and the pod read from them."""


@dataclass
class PodsRead:
    """Pods as an earlier snapshot read them, by the object each was read from, for a source
    that hands over the same objects cycle after cycle: the watch cache, where a watch event
    replaces an object rather than changing it. Only new and replaced objects, and pods whose
    ReplicaSet changed owner, are read again: between two cycles few pods change."""

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
    pods: list[tuple[int, WireObject]] = []
    slices: dict[str, list[WireObject]] = {}
    services: list[tuple[Reader, WireObject]] = []
    node_names: list[str] = []
    for index, (raw, kind) in enumerate(items):
        item = raw if type(raw) is WireObject else _converted(raw, f"{origin}: items[{index}]")
        metadata = item.metadata or NO_METADATA
        if not metadata.name:  # every object the API server hands over has one
            raise InputError(f"{origin}: items[{index}] ({kind}): metadata.name: missing")
        if kind == "Pod":
            pods.append((index, item))
            continue
        reader = Reader(f"{origin}: items[{index}] ({kind} {metadata.name or '?'})")
        if kind == "Node":
            node = parse_node(reader, item)
            snapshot.nodes[node.name] = node
            node_names.append(node.name)
        elif kind == "PodDisruptionBudget":
            snapshot.pdbs.append(parse_pdb(item))
        elif kind == "ReplicaSet":
            key = (metadata.namespace or "default", metadata.name)
            replicaset_owners[key] = controller_of(metadata)
        elif kind in {"Deployment", "StatefulSet", "Job"}:
            workload = parse_workload(kind, item)
            snapshot.workloads[workload.ref] = workload
        elif kind == "HorizontalPodAutoscaler":
            target = (item.spec or NO_SPEC).scaleTargetRef
            if target is not None and target.kind and target.name:
                ref = WorkloadRef(target.kind, metadata.namespace or "default", target.name)
                snapshot.autoscaled[ref] = metadata.name
        elif kind == "Service":
            services.append((reader, item))
        elif kind == "EndpointSlice":
            owner = (metadata.labels or {}).get(SERVICE_NAME_LABEL)
            if owner:
                slices.setdefault(f"{metadata.namespace or 'default'}/{owner}", []).append(item)
    # Slices of a Service not listed are left out: kube-proxy has nothing to route them for.
    for reader, item in services:
        service = parse_service(reader, item, slices)
        snapshot.services[service.key] = service
    earlier = pods_read.by_object if pods_read is not None else {}
    read_now = _read_pods(pods, replicaset_owners, origin, earlier)
    for _item, _owner, pod in read_now.values():
        snapshot.pods[pod.key] = pod
        if pod.workload is not None and pod.workload not in snapshot.workloads:
            # A Job not listed (a snapshot file without Jobs) allows the API's default failures.
            left = DEFAULT_BACKOFF_LIMIT if pod.workload.kind == "Job" else None
            snapshot.workloads[pod.workload] = Workload(
                pod.workload, None, {}, failures_left=left, backoff_limit=left
            )
    refuse_duplicates(origin, snapshot, node_names, [pod for _i, _o, pod in read_now.values()])
    if pods_read is not None:
        pods_read.by_object = read_now
    return snapshot


def _replicaset_owner(
    metadata: WireMetadata,
    controller: tuple[str, str] | None,
    owners: Mapping[tuple[str, str], tuple[str, str] | None],
) -> tuple[str, str] | None:
    """The controller of the pod's ReplicaSet, if the pod has one and it has one."""
    if controller is None or controller[0] != "ReplicaSet":
        return None
    return owners.get((metadata.namespace or "default", controller[1]))


def _read_pods(
    pods: list[tuple[int, WireObject]],
    replicaset_owners: Mapping[tuple[str, str], tuple[str, str] | None],
    origin: str,
    earlier: Mapping[int, _ReadPod],
) -> dict[int, _ReadPod]:
    read: dict[int, _ReadPod] = {}
    for index, item in pods:
        metadata = item.metadata or NO_METADATA
        controller = controller_of(metadata)
        owner = _replicaset_owner(metadata, controller, replicaset_owners)
        known = earlier.get(id(item))
        if known is not None and known[1] == owner:  # the same object: see PodsRead
            read[id(item)] = known
            continue
        reader = Reader(f"{origin}: items[{index}] (Pod {metadata.name or '?'})")
        pod = parse_pod(reader, item, controller, owner)
        read[id(item)] = (item, owner, pod)
    return read


def prepared(item: Any) -> Any:
    """The object as `parse_items` reads it fastest, for a cache that holds objects between
    snapshots: converted once, when it arrives, to only the fields the rebalancer reads. One that
    does not convert is kept as given, so building a snapshot raises its error, naming it, as
    it would have."""
    try:
        return msgspec.convert(item, WireObject)
    except msgspec.ValidationError:
        return item


def _converted(raw: Any, where: str) -> WireObject:
    try:
        return msgspec.convert(raw, WireObject)
    except msgspec.ValidationError as error:
        path, problem = where_and_what(error)
        raise item_error(where, raw, path.lstrip("."), problem) from None
