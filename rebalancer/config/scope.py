"""The sections on which pods may be moved at all: the namespaces and pods in scope, the pods
protected, and the spread floor every workload keeps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field

from rebalancer.strict import Strict


class LabelSelectorRequirement(Strict):
    key: str
    """The pod label."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the label's value is matched against `values`."""
    values: tuple[str, ...] = ()
    """For In and NotIn; empty for Exists and DoesNotExist."""


class LabelSelector(Strict):
    """A Kubernetes label selector, in the API's own camelCase."""

    matchLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815 - Kubernetes spelling
    """Labels a pod must carry, each with this value."""
    matchExpressions: tuple[LabelSelectorRequirement, ...] = ()  # noqa: N815
    """Further requirements, all of which must hold."""


class NamespaceScope(Strict):
    include: tuple[str, ...] = ()
    """Empty means every namespace not excluded."""
    exclude: tuple[str, ...] = ("kube-system",)
    """Never touched, even when included."""

    def refusal(self, namespace: str) -> str | None:
        """Why nothing in this namespace may be touched; None when it may."""
        if self.include and namespace not in self.include:
            return "namespace not included"
        return "namespace excluded" if namespace in self.exclude else None


class Scope(Strict):
    namespaces: NamespaceScope = NamespaceScope()
    """Which namespaces the rebalancer may move pods in."""
    pod_selector: LabelSelector | None = None
    """When set, only pods matching it may be moved; traffic to other pods still counts."""
    opt_out_annotation: str = "topology-rebalancer.io/exclude"
    """Set to "true" on a pod or its workload (or a Service) to keep the rebalancer away."""

    def opted_out(self, *annotations: Mapping[str, str]) -> bool:
        """Whether any of these objects' annotations asks the rebalancer to stay away."""
        return any(a.get(self.opt_out_annotation, "").lower() == "true" for a in annotations)


class SpreadFloor(Strict):
    """A workload keeps at least `domains` domains at `level` (or all it has, if fewer)."""

    level: str = "zone"
    """The level, by name."""
    domains: Annotated[int, Field(ge=1)] = 2
    """Least number of domains a workload keeps at `level`. Two by default: a Deployment with
    replicas in two zones keeps two zones though no spread constraint asks for it, since its
    owners rarely write one and a zone outage would take it down whole. 1 lets locality win."""
    kinds: tuple[str, ...] = ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController")
    """The workload kinds the floor holds for: services, which a zone outage takes down. Jobs
    and training gangs are left out, as packing them is the point."""


class Protections(Strict):
    """Pods that are never moved unless the policy says so; HA beats locality."""

    priority_threshold: int | None = None
    """Pods with this priority or higher are protected."""
    evict_system_critical: bool = False
    """Move pods of priority class system-cluster-critical or system-node-critical."""
    evict_bare_pods: bool = False
    """Move pods with no controller, which would not come back."""
    evict_local_storage: bool = False
    """Move pods with local volumes (hostPath, or emptyDir not backed by memory), whose data is
    lost on eviction. Counted as the cluster autoscaler counts them: volumes a pod's
    `cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes` annotation names, or any of
    a pod annotated `cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`, do not count,
    and a pod annotated `"false"` is never moved."""
    disposable_volumes: tuple[str, ...] = (
        "istio-data",
        "workload-socket",
        "credential-socket",
        "workload-certs",
        "linkerd-proxy-init-xtables-lock",
    )
    """emptyDir volumes that hold only what a sidecar rebuilds when it starts, which do not make
    a pod's storage local: those Istio's and Linkerd's injectors add. Counted, they would
    protect every pod of a service mesh."""
    evict_pvc: bool = False
    """Move pods with PersistentVolumeClaims (or generic ephemeral volumes). A pod's claims hold
    it in the zone it runs in, where a zonal volume is bound: it moves between racks and hosts
    there, never to another zone."""
    evict_single_replica: bool = False
    """Move workloads of one replica, which are down while the replacement starts."""
    honor_soft_spread: bool = True
    """Treat ScheduleAnyway topology spread constraints as hard when judging a move."""
    min_spread: SpreadFloor = SpreadFloor()
    """No move may leave a workload in fewer domains than this."""
