"""Which gang scheduler, if any, owns a pod's placement, from the keys those projects write.

A member of a gang placed by Kueue, Volcano, KAI-Scheduler, the upstream PodGroup API, a JobSet,
a LeaderWorkerSet, Koordinator or the scheduler-plugins Coscheduling plugin is never evicted on
its own: its replacement is held to the gang's domain or re-admitted by that scheduler, so a steered
replacement stays Pending or fights it, and for most of them losing one member restarts the whole
job. The keys are the projects' own (Kueue v0.17, Volcano v1.15, KAI-Scheduler v0.12, JobSet
v0.12, LeaderWorkerSet v0.7, Koordinator v1.8, scheduler-plugins v0.34, Kubernetes 1.35-1.36).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rebalancer.cluster.model import Pod

KUEUE, VOLCANO, KAI, POD_GROUP_API = "Kueue", "Volcano", "KAI-Scheduler", "PodGroup API"
JOBSET, LWS, KOORDINATOR, COSCHEDULING = "JobSet", "LeaderWorkerSet", "Koordinator", "Coscheduling"
OWNERS = (POD_GROUP_API, KUEUE, VOLCANO, KAI, KOORDINATOR, COSCHEDULING, JOBSET, LWS)
"""Every owner name: a bounded set, for metric labels."""

_FIXES = {
    POD_GROUP_API: "give the Workload's podGroupTemplate schedulingConstraints.topology "
    "[{{key: {label}}}] (TopologyAwareWorkloadScheduling)",
    KUEUE: "annotate the job's pod template kueue.x-k8s.io/podset-required-topology: {label} "
    "(with a Kueue Topology that has that level)",
    VOLCANO: "set networkTopology {{mode: hard, highestTierAllowed: <the tier of the "
    "HyperNodes grouping by {label}>}} on the Volcano Job or PodGroup",
    KAI: "annotate the top owner kai.scheduler/topology: <Topology name> and "
    "kai.scheduler/topology-required-placement: {label}",
    KOORDINATOR: "annotate the members gang.scheduling.koordinator.sh/network-topology-spec "
    '{{"gatherStrategy":[{{"layer":"<layer of {label}>","strategy":"MustGather"}}]}}',
    COSCHEDULING: "add a required podAffinity on {label} among the group's pods to its template; "
    "Coscheduling has no topology setting of its own",
    JOBSET: "annotate the JobSet alpha.jobset.sigs.k8s.io/exclusive-topology: {label}",
    LWS: "annotate the LeaderWorkerSet leaderworkerset.sigs.k8s.io/exclusive-topology: {label}",
}


@dataclass(frozen=True)
class GangMembership:
    owner: str
    """One of OWNERS."""
    gang: str
    """namespace/name of the group the owner places together."""
    evidence: str
    """The key (or field) that says so."""

    def fix(self, label: str) -> str:
        """How to keep the gang within one domain of the node label, with the owner's own
        mechanism: the rebalancer only reports it."""
        return _FIXES[self.owner].format(label=label)


def gang_membership(pod: Pod) -> GangMembership | None:
    """The gang scheduler that owns the pod's placement, or None: the first rule that matches,
    skipping, on a service's pods, a match by a key that names no gang."""
    if (
        not pod.pod_group
        and pod.scheduler_name not in _SCHEDULERS
        and _LABELS.isdisjoint(pod.labels)
        and _ANNOTATIONS.isdisjoint(pod.annotations)
    ):
        return None  # most pods: one look instead of every rule's
    for rule in _RULES:
        found = rule(pod)
        if found is not None:
            owner, name, evidence, named = found
            serving = pod.workload is not None and pod.workload.kind in _SERVING
            if serving and not named:
                # A service that scheduler places pod by pod (its own group of one, made for
                # any owner) is no gang by that key; a later rule may still name one (a
                # LeaderWorkerSet group placed by Volcano or KAI).
                continue
            return GangMembership(owner, f"{pod.namespace}/{name}", evidence)
    return None


_Found = tuple[str, str, str, bool] | None
"""Owner, group name, the key that said so, and whether that key names a gang (a group made on
purpose) rather than only the scheduler or queue, which also place plain services."""
_SERVING = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"})


def _pod_group_api(pod: Pod) -> _Found:
    if pod.pod_group:
        return POD_GROUP_API, pod.pod_group, "spec.schedulingGroup or spec.workloadRef", True
    return None


def _kueue(pod: Pod) -> _Found:
    """Kueue admits a whole job at once and re-admits a replacement, pinned by the node
    selector it injects; a plain pod group is named by a label, a job by its Workload."""
    labels, annotations = pod.labels, pod.annotations
    group = labels.get("kueue.x-k8s.io/pod-group-name")
    if group:
        return KUEUE, group, "label kueue.x-k8s.io/pod-group-name", True
    for key, source in (
        ("kueue.x-k8s.io/workload", annotations),
        ("kueue.x-k8s.io/podset", labels),
        ("kueue.x-k8s.io/queue-name", labels),
        ("kueue.x-k8s.io/managed", labels),
    ):
        if source.get(key):
            name = annotations.get("kueue.x-k8s.io/workload") or _owner_name(pod)
            kind = "annotation" if source is annotations else "label"
            return KUEUE, name, f"{kind} {key}", False
    return None


def _volcano(pod: Pod) -> _Found:
    """Volcano makes a PodGroup `podgroup-<owner UID>` for any other workload it schedules; a
    Volcano Job's, or one made on purpose (LeaderWorkerSet's), is named otherwise."""
    group = pod.annotations.get("scheduling.k8s.io/group-name")
    if group:
        named = not group.startswith("podgroup-")
        return VOLCANO, group, "annotation scheduling.k8s.io/group-name", named
    job = pod.labels.get("volcano.sh/job-name")
    if job:
        return VOLCANO, job, "label volcano.sh/job-name", True
    if pod.scheduler_name == "volcano":
        return VOLCANO, _owner_name(pod), "schedulerName volcano", False
    return None


def _kai(pod: Pod) -> _Found:
    """`pod-group-name` has no prefix, so it counts only with KAI's scheduler or queue label;
    KAI's pod grouper makes a group for every top owner, so none of it names a gang."""
    if pod.scheduler_name != "kai-scheduler" and "kai.scheduler/queue" not in pod.labels:
        return None
    evidence = (
        "schedulerName kai-scheduler"
        if pod.scheduler_name == "kai-scheduler"
        else "label kai.scheduler/queue"
    )
    group = pod.annotations.get("pod-group-name")
    if group:
        return KAI, group, "annotation pod-group-name", False
    return KAI, _owner_name(pod), evidence, False


def _koordinator(pod: Pod) -> _Found:
    group = pod.annotations.get("gang.scheduling.koordinator.sh/name")
    if group:
        return KOORDINATOR, group, "annotation gang.scheduling.koordinator.sh/name", True
    return None


def _coscheduling(pod: Pod) -> _Found:
    """The label of scheduler-plugins since v0.25, and the one before it with its older form,
    which Koordinator's scheduler still reads."""
    group = pod.labels.get("scheduling.x-k8s.io/pod-group")
    if group:
        return COSCHEDULING, group, "label scheduling.x-k8s.io/pod-group", True
    for key in ("pod-group.scheduling.sigs.k8s.io", "pod-group.scheduling.sigs.k8s.io/name"):
        group = pod.labels.get(key)
        if group:
            owner = KOORDINATOR if pod.scheduler_name == "koord-scheduler" else COSCHEDULING
            return owner, group, f"label {key}", True
    return None


def _jobset(pod: Pod) -> _Found:
    """One evicted pod can fail its child Job, and with it the whole JobSet; followers under
    exclusive placement are pinned to their leader's domain."""
    for source, kind in ((pod.annotations, "annotation"), (pod.labels, "label")):
        name = source.get("jobset.sigs.k8s.io/jobset-name")
        if name:
            return JOBSET, name, f"{kind} jobset.sigs.k8s.io/jobset-name", True
    return None


def _lws(pod: Pod) -> _Found:
    """A LeaderWorkerSet recreates a whole group when one of its pods goes (its default
    restart policy), so a group is the gang."""
    name = pod.labels.get("leaderworkerset.sigs.k8s.io/name")
    if not name:
        return None
    index = pod.labels.get("leaderworkerset.sigs.k8s.io/group-index")
    group = f"{name}-{index}" if index else name
    return LWS, group, "label leaderworkerset.sigs.k8s.io/name", True


def _owner_name(pod: Pod) -> str:
    """The job (or other workload) the pod belongs to, when the owner's group is not named on
    the pod: its members are the workload's pods."""
    if pod.workload is not None:
        return pod.workload.name
    return pod.name


_RULES: tuple[Callable[[Pod], _Found], ...] = (
    _pod_group_api,
    _kueue,
    _volcano,
    _kai,
    _koordinator,
    _coscheduling,
    _jobset,
    _lws,
)
_SCHEDULERS = frozenset({"volcano", "kai-scheduler"})
_LABELS = frozenset(
    {
        "kueue.x-k8s.io/pod-group-name",
        "kueue.x-k8s.io/podset",
        "kueue.x-k8s.io/queue-name",
        "kueue.x-k8s.io/managed",
        "volcano.sh/job-name",
        "kai.scheduler/queue",
        "scheduling.x-k8s.io/pod-group",
        "pod-group.scheduling.sigs.k8s.io",
        "pod-group.scheduling.sigs.k8s.io/name",
        "jobset.sigs.k8s.io/jobset-name",
        "leaderworkerset.sigs.k8s.io/name",
    }
)
"""Every label a rule reads, and below every annotation: a pod with none of them has no owner."""
_ANNOTATIONS = frozenset(
    {
        "kueue.x-k8s.io/workload",
        "scheduling.k8s.io/group-name",
        "gang.scheduling.koordinator.sh/name",
        "jobset.sigs.k8s.io/jobset-name",
    }
)
