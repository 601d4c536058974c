"""Which pods may move at all, whatever the gain: the policy's protections and a workload's
strength.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from rebalancer.cluster.gang_owners import gang_membership
from rebalancer.cluster.model import (
    SYSTEM_CRITICAL_CLASSES,
    Pod,
    Snapshot,
    SnapshotIndexes,
    Workload,
    WorkloadRef,
)
from rebalancer.cluster.parse_pods import SAFE_TO_EVICT
from rebalancer.cluster.selectors import matches_label_selector
from rebalancer.config.resolved import PlanningRules

_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


def protection_reason(
    pod: Pod, snapshot: Snapshot, indexes: SnapshotIndexes, rules: PlanningRules
) -> str | None:
    """Why this pod may never be moved under the policy, whatever the gain."""
    scope, protections = rules.scope, rules.protections
    if not pod.node_name or pod.phase != "Running" or not pod.ready:
        return "not running and ready"
    if pod.node_name not in snapshot.nodes:
        return f"on node {pod.node_name}, which the snapshot lacks"
    refused = scope.namespaces.refusal(pod.namespace)
    if refused is not None:
        return refused
    if scope.pod_selector is not None and not matches_label_selector(
        scope.pod_selector.model_dump(), pod.labels
    ):
        return "outside the pod selector"
    workload = snapshot.workloads.get(pod.workload) if pod.workload else None
    annotations = [pod.annotations, workload.annotations if workload else {}]
    if scope.opted_out(*annotations):
        return f"opted out ({scope.opt_out_annotation})"
    if pod.controller_kind == "DaemonSet":
        return "daemonset pod"
    if pod.controller_kind == "Node":
        return "static pod"
    owned = len(indexes.pods_of(WorkloadRef("Pod", pod.namespace, pod.name)))
    if owned:
        # A Spark driver, say: the garbage collector deletes a pod's dependents with it.
        return f"owns {owned} pod(s), which would be deleted with it"
    gang = gang_membership(pod)
    if gang is not None:
        return f"member of {gang.owner} gang {gang.gang} ({gang.evidence}): its owner places it"
    if pod.workload is None and not protections.evict_bare_pods:
        return "bare pod (no controller recreates it)"
    if pod.priority_class_name in SYSTEM_CRITICAL_CLASSES and not protections.evict_system_critical:
        return "system-critical pod"
    if (
        protections.priority_threshold is not None
        and pod.priority >= protections.priority_threshold
    ):
        return f"priority {pod.priority} at or above {protections.priority_threshold}"
    safe_to_evict = pod.annotations.get(SAFE_TO_EVICT)
    if safe_to_evict == "false":
        return f'annotated {SAFE_TO_EVICT}: "false"'
    if not protections.evict_local_storage and safe_to_evict != "true":
        disposable = protections.disposable_volumes
        kept = next((v for v in pod.local_volumes if v not in disposable), None)
        if kept is not None:
            return f"local storage (volume {kept})"
    if pod.has_pvc and not protections.evict_pvc:
        return "uses a persistent volume claim"
    single_replica_ok = protections.evict_single_replica or (
        rules.surge is not None and rules.surge.single_replica and surged(pod, rules)
    )
    if pod.workload is not None and not single_replica_ok:
        replicas = workload.replicas if workload and workload.replicas is not None else None
        if replicas is None:
            replicas = len(indexes.pods_of(pod.workload))
        if replicas <= 1:
            return "single-replica workload"
    return None


def surged(pod: Pod, rules: PlanningRules) -> bool:
    """Whether the pod would be moved make-before-break: a Deployment's, under surge."""
    return (
        rules.surge is not None
        and pod.workload is not None
        and pod.workload.kind == "Deployment"
        and pod.controller_kind == "ReplicaSet"
    )


def surge_refusal(pod: Pod, snapshot: Snapshot, rules: PlanningRules) -> str | None:
    """Why a Deployment's pod cannot be surged now."""
    assert pod.workload is not None and rules.surge is not None
    workload = snapshot.workloads.get(pod.workload)
    if workload is None:
        return "its Deployment is not in the snapshot"
    if workload.paused:
        return "its Deployment is paused"
    if workload.rollout is not None:
        return f"its Deployment is rolling out: {workload.rollout}"
    if workload.one_at_a_time is not None:
        return f"its Deployment runs one pod at a time ({workload.one_at_a_time})"
    autoscaler = snapshot.autoscaled.get(pod.workload)
    if autoscaler is not None and not rules.surge.autoscaled:
        return f"HorizontalPodAutoscaler {autoscaler} scales its Deployment (surge.autoscaled)"
    return None


def unsettled_reason(pods: Iterable[Pod], workload: Workload | None) -> str | None:
    """Why a workload, of these pods, is not at full strength: a pod not yet Running and Ready (a
    replacement the scheduler has not placed, say), or fewer Ready pods than desired. Evicting
    more of such a workload would take away capacity that has not come back, whatever its PDB
    allows (a PDB may be missing, or lag), so it waits until it has settled."""
    ready = waiting = 0
    for pod in pods:
        # A Job's Succeeded or Failed pods are done, not capacity on its way back.
        if pod.phase not in _FINISHED_PHASES:
            if pod.node_name and pod.phase == "Running" and pod.ready:
                ready += 1
            else:
                waiting += 1
    if waiting:
        return f"{waiting} of its pods not yet Running and Ready"
    desired = workload.replicas if workload is not None else None
    if desired is not None and ready < desired:
        return f"{ready} of {desired} desired replicas Ready"
    return None


@dataclass
class WorkloadSettling:
    """Each workload's `unsettled_reason`, worked out when a pod of it is first judged: with the
    default limits a cycle judges a few dozen candidates, and at 100,000 pods a search reaches
    only part of the cluster, so judging every workload up front would be mostly wasted."""

    snapshot: Snapshot
    indexes: SnapshotIndexes
    reasons: dict[WorkloadRef, str | None] = field(default_factory=dict)

    def reason(self, workload: WorkloadRef) -> str | None:
        if workload not in self.reasons:
            self.reasons[workload] = unsettled_reason(
                self.indexes.pods_of(workload), self.snapshot.workloads.get(workload)
            )
        return self.reasons[workload]
