"""A Pod object to a Pod: its workload, requests, scheduling rules, volumes and pod group, and
the cluster autoscaler's annotations on what its local volumes hold."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import chain
from typing import Any

from rebalancer.cluster.model import Pod, PodAffinityTerm, SpreadConstraint, WorkloadRef
from rebalancer.cluster.parse_objects import condition_true, parts
from rebalancer.cluster.parse_quantities import Reader, pod_requests
from rebalancer.cluster.wire import WireObject, WirePodAffinity, WireSpec


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


def parse_pod(
    reader: Reader,
    item: WireObject,
    controller: tuple[str, str] | None,
    replicaset_owner: tuple[str, str] | None,
) -> Pod:
    metadata, spec, status = parts(item)
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
        ready=condition_true(status, "Ready"),
        labels=metadata.labels or {},
        annotations=metadata.annotations or {},
        workload=workload,
        controller_kind=controller[0] if controller else None,
        controller_name=controller[1] if controller else None,
        requests=pod_requests(reader, spec),
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


def _pod_group(spec: WireSpec) -> str:
    """The upstream PodGroup API's group of the pod: spec.schedulingGroup (1.36 on), or the
    Workload's pod group (and replica) named by spec.workloadRef (1.35)."""
    if spec.schedulingGroup is not None and spec.schedulingGroup.podGroupName:
        return spec.schedulingGroup.podGroupName
    ref = spec.workloadRef
    if ref is None or not ref.name:
        return ""
    return "/".join(part for part in (ref.name, ref.podGroup, ref.podGroupReplicaKey) if part)


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
