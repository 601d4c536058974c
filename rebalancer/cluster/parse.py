"""A Kubernetes `List` (bytes or decoded items) to a Snapshot, purely.

The input is exactly what `kubectl get nodes,pods,poddisruptionbudgets,replicasets,deployments,
statefulsets,jobs,horizontalpodautoscalers,services,endpointslices -A -o json` prints, and also
what the API client returns, so a user's saved cluster state and the live controller go through
the same parser. Every bad value
is an InputError that names the item and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import msgspec

from rebalancer.cluster.doubts import item_error, misread, refuse_duplicates
from rebalancer.cluster.model import (
    Endpoint,
    Node,
    Pdb,
    Pod,
    PodAffinityTerm,
    Resources,
    Service,
    Snapshot,
    SpreadConstraint,
    Taint,
    Workload,
    WorkloadRef,
)
from rebalancer.cluster.quantity import REFUSED, whole_units
from rebalancer.cluster.wire import (
    LIST_DECODER,
    NO_METADATA,
    NO_SPEC,
    NO_STATUS,
    WireContainer,
    WireEndpoint,
    WireEndpointConditions,
    WireList,
    WireMetadata,
    WireObject,
    WirePodAffinity,
    WirePodFailurePolicy,
    WireQuantities,
    WireSpec,
    WireStatus,
)
from rebalancer.errors import InputError, one_line, where_and_what


class _Reader:
    """Names where in the input a value came from, for the one-line error when it is bad."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def whole(self, path: str, raw: str | int | float, scale: int) -> int:
        try:
            return whole_units(raw, scale)
        except REFUSED:
            raise self._refused(path, raw) from None

    def request(
        self, field: str, index: int, resource: str, raw: str | int | float, scale: int
    ) -> int:
        """`whole`, for a container's request, its path put together only for an error."""
        try:
            return whole_units(raw, scale)
        except REFUSED:
            path = f"spec.{field}[{index}].resources.requests.{resource}"
            raise self._refused(path, raw) from None

    def _refused(self, path: str, raw: object) -> InputError:
        return InputError(f"{self.origin}: {path}: invalid quantity {raw!r}")


_NAMED = frozenset({"cpu", "memory", "pods"})
"""The resources Resources has a field for; every other one is a scalar."""


def _resources(reader: _Reader, path: str, values: WireQuantities) -> Resources:
    def whole(resource: str, scale: int) -> int:
        raw = values.get(resource)
        return 0 if raw is None else reader.whole(f"{path}.{resource}", raw, scale)

    scalars = tuple(
        sorted(
            (name, reader.whole(f"{path}.{name}", raw, 1))
            for name, raw in values.items()
            if name not in _NAMED
        )
    )
    return Resources(
        whole("cpu", 1000),
        whole("memory", 1),
        whole("pods", 1),
        tuple((name, amount) for name, amount in scalars if amount),
    )


def _pod_requests(reader: _Reader, spec: WireSpec) -> Resources:
    """Effective requests, as the scheduler counts them: containers summed, init containers max,
    for every resource. Counted in plain integers, one Resources at the end: a Resources per
    container and per sum took a third of the time to read a pod."""
    cpu = memory = 0
    scalars: dict[str, int] = {}
    for index, container in enumerate(spec.containers or ()):
        container_cpu, container_memory = _cpu_and_memory(reader, "containers", index, container)
        cpu, memory = cpu + container_cpu, memory + container_memory
        for name, amount in _scalar_requests(reader, "containers", index, container):
            scalars[name] = scalars.get(name, 0) + amount
    for index, container in enumerate(spec.initContainers or ()):
        init_cpu, init_memory = _cpu_and_memory(reader, "initContainers", index, container)
        cpu, memory = max(cpu, init_cpu), max(memory, init_memory)
        for name, amount in _scalar_requests(reader, "initContainers", index, container):
            scalars[name] = max(scalars.get(name, 0), amount)
    if not scalars:
        return Resources(cpu, memory, 1)
    return Resources(cpu, memory, 1, tuple(sorted((n, a) for n, a in scalars.items() if a)))


def _cpu_and_memory(
    reader: _Reader, field: str, index: int, container: WireContainer
) -> tuple[int, int]:
    requests = container.resources.requests if container.resources else None
    if not requests:
        return 0, 0
    cpu, memory = requests.get("cpu"), requests.get("memory")
    return (
        reader.request(field, index, "cpu", cpu, 1000) if cpu is not None else 0,
        reader.request(field, index, "memory", memory, 1) if memory is not None else 0,
    )


def _scalar_requests(
    reader: _Reader, field: str, index: int, container: WireContainer
) -> list[tuple[str, int]]:
    """A container's requests of resources other than CPU and memory, such as GPUs."""
    requests = container.resources.requests if container.resources else None
    if not requests or all(name in _NAMED for name in requests):
        return []
    return [
        (name, reader.request(field, index, name, raw, 1))
        for name, raw in requests.items()
        if name not in _NAMED
    ]


def _controller_of(metadata: WireMetadata) -> tuple[str, str] | None:
    for owner in metadata.ownerReferences or ():
        if owner.controller:
            return owner.kind, owner.name
    return None


def _affinity_terms(
    affinity: WirePodAffinity | None, namespace: str
) -> tuple[PodAffinityTerm, ...]:
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


def _condition_true(status: WireStatus, kind: str) -> bool:
    for condition in status.conditions or ():
        if condition.type == kind and condition.status == "True":
            return True
    return False


def _parse_node(reader: _Reader, item: WireObject) -> Node:
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
    metadata: WireMetadata,
    controller: tuple[str, str] | None,
    owners: Mapping[tuple[str, str], tuple[str, str] | None],
) -> tuple[str, str] | None:
    """The controller of the pod's ReplicaSet, if the pod has one and it has one."""
    if controller is None or controller[0] != "ReplicaSet":
        return None
    return owners.get((metadata.namespace or "default", controller[1]))


def _parse_pod(
    reader: _Reader,
    item: WireObject,
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
        local_volumes=local_volumes(volumes, metadata.annotations or {}),
        has_pvc=any("persistentVolumeClaim" in v or "ephemeral" in v for v in volumes),
        claims=tuple(
            str(claim.get("claimName", ""))
            for v in volumes
            if isinstance(claim := v.get("persistentVolumeClaim"), Mapping)
        ),
        created=metadata.creationTimestamp or "",
        uid=metadata.uid or "",
        scheduler_name=spec.schedulerName or "",
        pod_group=_pod_group(spec),
        restart_policy=spec.restartPolicy or "",
        restarts=sum(
            container.restartCount
            for container in chain(
                status.containerStatuses or (), status.initContainerStatuses or ()
            )
        ),
    )


def _parse_workload(kind: str, item: WireObject) -> Workload:
    metadata, spec, status = _parts(item)
    if kind == "Job":
        return _parse_job(item)
    replicas = 1 if spec.replicas is None else spec.replicas
    return Workload(
        WorkloadRef(kind, metadata.namespace or "default", metadata.name),
        replicas,
        metadata.annotations or {},
        paused=bool(spec.paused),
        rollout=_rollout(metadata.generation, status, replicas) if kind == "Deployment" else None,
        one_at_a_time=_one_at_a_time(spec.strategy) if kind == "Deployment" else None,
    )


DEFAULT_BACKOFF_LIMIT = 6
"""A Job's spec.backoffLimit when it sets none."""


def _parse_job(item: WireObject) -> Workload:
    """A Job's failure budget: an evicted pod fails, and counts against backoffLimit (default
    6), unless the first rule of its pod failure policy that an evicted pod matches says
    otherwise. Pods terminating and failures not yet counted are taken as failed already. How
    many pods it runs is left unknown (None), as before."""
    metadata, spec, status = _parts(item)
    action = _eviction_action(spec.podFailurePolicy)
    ref = WorkloadRef("Job", metadata.namespace or "default", metadata.name)
    uncounted = status.uncountedTerminatedPods
    failed = (
        (status.failed or 0)
        + (status.terminating or 0)
        + len((uncounted.failed or []) if uncounted is not None else [])
    )
    left = limit = None
    if spec.backoffLimit is not None or spec.backoffLimitPerIndex is None:
        limit = DEFAULT_BACKOFF_LIMIT if spec.backoffLimit is None else spec.backoffLimit
        left = max(limit - failed, 0)
    per_index = spec.backoffLimitPerIndex
    if action in ("FailJob", "FailIndex"):
        left, per_index = (0, per_index) if action == "FailJob" else (left, 0)
    return Workload(
        ref,
        None,
        metadata.annotations or {},
        failures_left=left,
        failures_per_index=per_index,
        evictions_fail=action != "Ignore",
        backoff_limit=limit,
    )


_EVICTED_EXIT_CODES = frozenset({137, 143})
"""What an evicted container exits with: SIGKILL after the grace period, or SIGTERM."""


_SEVERITY = ("Ignore", "Count", "FailIndex", "FailJob")


def _eviction_action(policy: WirePodFailurePolicy | None) -> str:
    """What the Job controller does with an evicted pod under its pod failure policy: it takes
    the first rule that matches, `Count` when none does. An evicted pod surely carries the
    DisruptionTarget condition; its containers may exit with 137 or 143, so a rule on those
    codes may match first: the worst action that may apply is taken."""
    worst = "Ignore"
    for rule in (policy.rules or []) if policy is not None else []:
        surely = any(
            c.type == "DisruptionTarget" and c.status in ("", "True")
            for c in rule.onPodConditions or ()
        )
        codes = rule.onExitCodes
        maybe = codes is not None and (
            bool(_EVICTED_EXIT_CODES & set(codes.values or ()))
            if codes.operator == "In"
            else not set(codes.values or ()) >= _EVICTED_EXIT_CODES
        )
        action = rule.action if rule.action in _SEVERITY else "FailJob"  # unknown: the worst
        if surely or maybe:
            worst = max(worst, action, key=_SEVERITY.index)
        if surely:
            return worst
    return max(worst, "Count", key=_SEVERITY.index)


def _one_at_a_time(strategy: dict[str, Any] | None) -> str | None:
    """Why a Deployment's strategy says never to run an extra pod, or None."""
    strategy = strategy or {}
    if strategy.get("type") == "Recreate":
        return "strategy Recreate"
    rolling = strategy.get("rollingUpdate") or {}
    if str(rolling.get("maxSurge", "25%")).strip() in {"0", "0%"}:
        return "maxSurge 0"
    return None


def _rollout(generation: int | None, status: WireStatus, replicas: int) -> str | None:
    """Why a Deployment's rollout is under way, from its status; None when it is done (or its
    status says nothing, as in a snapshot file written by hand)."""
    observed = status.observedGeneration
    if generation is not None and observed is not None and observed < generation:
        return "its controller has not yet seen its latest spec"
    if status.updatedReplicas is not None and status.updatedReplicas < replicas:
        return f"{status.updatedReplicas} of {replicas} pods on the latest template"
    if status.replicas is not None and status.replicas > replicas:
        return f"{status.replicas} pods for {replicas} replicas"
    return None


def _pod_group(spec: WireSpec) -> str:
    """The upstream PodGroup API's group of the pod: spec.schedulingGroup (1.36 on), or the
    Workload's pod group (and replica) named by spec.workloadRef (1.35)."""
    if spec.schedulingGroup is not None and spec.schedulingGroup.podGroupName:
        return spec.schedulingGroup.podGroupName
    ref = spec.workloadRef
    if ref is None or not ref.name:
        return ""
    return "/".join(part for part in (ref.name, ref.podGroup, ref.podGroupReplicaKey) if part)


def _parse_pdb(item: WireObject) -> Pdb:
    metadata, spec, status = _parts(item)
    observed = status.observedGeneration
    return Pdb(
        namespace=metadata.namespace or "default",
        name=metadata.name,
        selector=spec.selector,
        disruptions_allowed=status.disruptionsAllowed or 0,
        status_observed=observed is not None and observed >= (metadata.generation or 0),
    )


SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
""""true": the pod's local volumes hold nothing worth keeping; "false": never evict it. The
cluster autoscaler's annotation, honoured so a pod its owners marked is treated alike."""
SAFE_TO_EVICT_LOCAL_VOLUMES = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
"""Names the pod's local volumes that hold nothing worth keeping (comma-separated): the cluster
autoscaler's annotation, which charts and platform teams already set for it."""


def local_volumes(
    volumes: Iterable[Mapping[str, Any]], annotations: Mapping[str, str]
) -> tuple[str, ...]:
    """The names of the volumes whose data lives on the node, as the cluster autoscaler counts
    them (utils/drain): hostPath, and emptyDir unless memory-backed (a tmpfs scratch area is
    not kept across a restart anyway); those the pod's safe-to-evict-local-volumes annotation
    names are left out."""
    disposable = {
        name.strip() for name in annotations.get(SAFE_TO_EVICT_LOCAL_VOLUMES, "").split(",")
    }
    found = []
    for volume in volumes:
        empty_dir = volume.get("emptyDir")
        memory = isinstance(empty_dir, Mapping) and empty_dir.get("medium") == "Memory"
        local = "hostPath" in volume or ("emptyDir" in volume and not memory)
        name = str(volume.get("name", ""))
        if local and name not in disposable:
            found.append(name)
    return tuple(found)


SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""On an EndpointSlice: the Service it lists endpoints for."""
_NO_CONDITIONS = WireEndpointConditions()


def _parse_service(
    reader: _Reader, item: WireObject, slices: Mapping[str, list[WireObject]]
) -> Service:
    metadata, spec, _status = _parts(item)
    selector = spec.selector
    if selector is not None and not all(isinstance(v, str) for v in selector.values()):
        raise InputError(f"{reader.origin}: spec.selector: expected a map of label values")
    namespace = metadata.namespace or "default"
    return Service(
        namespace=namespace,
        name=metadata.name,
        selector=selector or None,
        traffic_distribution=spec.trafficDistribution,
        internal_traffic_policy=spec.internalTrafficPolicy or "Cluster",
        annotations=metadata.annotations or {},
        headless=spec.clusterIP == "None",
        endpoints=_endpoints(namespace, slices.get(f"{namespace}/{metadata.name}", ())),
        resource_version=metadata.resourceVersion or "",
    )


def _endpoint(namespace: str, wire: WireEndpoint) -> Endpoint:
    """Unset conditions read as the API documents them: ready true, serving as ready,
    terminating false."""
    conditions = wire.conditions or _NO_CONDITIONS
    ready = conditions.ready is not False
    ref, hints = wire.targetRef, wire.hints
    return Endpoint(
        pod=f"{ref.namespace or namespace}/{ref.name}"
        if ref is not None and ref.kind == "Pod" and ref.name
        else None,
        node=wire.nodeName,
        zone=wire.zone,
        ready=ready,
        serving=ready if conditions.serving is None else conditions.serving,
        terminating=bool(conditions.terminating),
        zone_hints=tuple(hint.name for hint in hints.forZones or ()) if hints else (),
        node_hints=tuple(hint.name for hint in hints.forNodes or ()) if hints else (),
    )


def _endpoints(namespace: str, slices: Sequence[WireObject]) -> tuple[Endpoint, ...]:
    """A Service's endpoints from all its slices, each pod once: a dual-stack Service lists
    it in a slice per address family."""
    endpoints = [_endpoint(namespace, wire) for item in slices for wire in item.endpoints or ()]
    if len(slices) < 2:
        return tuple(endpoints)
    seen: set[str] = set()
    kept: list[Endpoint] = []
    for endpoint in endpoints:
        if endpoint.pod is not None:
            if endpoint.pod in seen:
                continue
            seen.add(endpoint.pod)
        kept.append(endpoint)
    return tuple(kept)


def _parts(item: WireObject) -> tuple[WireMetadata, WireSpec, WireStatus]:
    return item.metadata or NO_METADATA, item.spec or NO_SPEC, item.status or NO_STATUS


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
    services: list[tuple[_Reader, WireObject]] = []
    node_names: list[str] = []
    for index, (raw, kind) in enumerate(items):
        item = raw if type(raw) is WireObject else _converted(raw, f"{origin}: items[{index}]")
        metadata = item.metadata or NO_METADATA
        if kind == "Pod":
            pods.append((index, item))
            continue
        reader = _Reader(f"{origin}: items[{index}] ({kind} {metadata.name or '?'})")
        if kind == "Node":
            node = _parse_node(reader, item)
            snapshot.nodes[node.name] = node
            node_names.append(node.name)
        elif kind == "PodDisruptionBudget":
            snapshot.pdbs.append(_parse_pdb(item))
        elif kind == "ReplicaSet":
            key = (metadata.namespace or "default", metadata.name)
            replicaset_owners[key] = _controller_of(metadata)
        elif kind in {"Deployment", "StatefulSet", "Job"}:
            workload = _parse_workload(kind, item)
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
        service = _parse_service(reader, item, slices)
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


def _read_pods(
    pods: list[tuple[int, WireObject]],
    replicaset_owners: Mapping[tuple[str, str], tuple[str, str] | None],
    origin: str,
    earlier: Mapping[int, _ReadPod],
) -> dict[int, _ReadPod]:
    read: dict[int, _ReadPod] = {}
    for index, item in pods:
        metadata = item.metadata or NO_METADATA
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
        return msgspec.convert(item, WireObject)
    except msgspec.ValidationError:
        return item


def _converted(raw: Any, where: str) -> WireObject:
    try:
        return msgspec.convert(raw, WireObject)
    except msgspec.ValidationError as error:
        path, problem = where_and_what(error)
        raise item_error(where, raw, path.lstrip("."), problem) from None
