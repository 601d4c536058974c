"""The API objects as the parser reads them: only the fields it uses, for every kind at once.

msgspec decodes JSON, or converts the API client's dicts, into these in C, skipping everything
else (managedFields, templates, most of status), and names the path of a field of the wrong type.
No field name means different things in two kinds, so one schema serves them all; an optional
field may be null.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

# The objects as the parser reads them: only the fields it uses, for every kind at once (no
# field name means different things in two kinds). msgspec decodes JSON, or converts the API
# client's dicts, into these in C, skipping everything else (managedFields, templates, most of
# status), and names the path of a field of the wrong type. An optional field may be null.
# A value the API server itself would refuse (negative replicas, a maxSkew of 0) is refused too.


class WireOwnerReference(msgspec.Struct):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class WireMetadata(msgspec.Struct):
    name: str = ""
    namespace: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[WireOwnerReference] | None = None  # noqa: N815 - the API's own names
    creationTimestamp: str | None = None  # noqa: N815
    uid: str | None = None
    generation: int | None = None
    resourceVersion: str | None = None  # noqa: N815


WireQuantities = dict[str, str | int | float]


class WireRequirements(msgspec.Struct):
    requests: WireQuantities | None = None


class WireContainer(msgspec.Struct):
    resources: WireRequirements | None = None


class WireAffinityTerm(msgspec.Struct):
    labelSelector: dict[str, Any] | None = None  # noqa: N815
    topologyKey: str = ""  # noqa: N815
    namespaces: list[str] | None = None


class WirePodAffinity(msgspec.Struct):
    requiredDuringSchedulingIgnoredDuringExecution: list[WireAffinityTerm] | None = None  # noqa: N815


class WireNodeSelector(msgspec.Struct):
    nodeSelectorTerms: list[dict[str, Any]] | None = None  # noqa: N815


class WireNodeAffinity(msgspec.Struct):
    requiredDuringSchedulingIgnoredDuringExecution: WireNodeSelector | None = None  # noqa: N815


class WireAffinity(msgspec.Struct):
    nodeAffinity: WireNodeAffinity | None = None  # noqa: N815
    podAffinity: WirePodAffinity | None = None  # noqa: N815
    podAntiAffinity: WirePodAffinity | None = None  # noqa: N815


class WireSpreadConstraint(msgspec.Struct):
    maxSkew: Annotated[int, msgspec.Meta(ge=1)] = 1  # noqa: N815
    topologyKey: str = ""  # noqa: N815
    whenUnsatisfiable: str = "DoNotSchedule"  # noqa: N815
    labelSelector: dict[str, Any] | None = None  # noqa: N815


class WireTaint(msgspec.Struct):
    key: str = ""
    value: str = ""
    effect: str = ""


class WireSchedulingGroup(msgspec.Struct):
    podGroupName: str | None = None  # noqa: N815


class WireWorkloadRef(msgspec.Struct):
    """Kubernetes 1.35's pod field, replaced by schedulingGroup in 1.36."""

    name: str = ""
    podGroup: str = ""  # noqa: N815
    podGroupReplicaKey: str = ""  # noqa: N815


class WireScaleTarget(msgspec.Struct):
    kind: str = ""
    name: str = ""


class WirePodFailureCondition(msgspec.Struct):
    type: str = ""
    status: str = ""


class WireExitCodes(msgspec.Struct):
    operator: str = ""
    values: list[int] | None = None


class WirePodFailureRule(msgspec.Struct):
    action: str = ""
    onPodConditions: list[WirePodFailureCondition] | None = None  # noqa: N815
    onExitCodes: WireExitCodes | None = None  # noqa: N815


class WirePodFailurePolicy(msgspec.Struct):
    rules: list[WirePodFailureRule] | None = None


class WireSpec(msgspec.Struct):
    # Pod
    nodeName: str | None = None  # noqa: N815
    schedulerName: str | None = None  # noqa: N815
    schedulingGroup: WireSchedulingGroup | None = None  # noqa: N815
    workloadRef: WireWorkloadRef | None = None  # noqa: N815
    containers: list[WireContainer] | None = None
    initContainers: list[WireContainer] | None = None  # noqa: N815
    affinity: WireAffinity | None = None
    volumes: list[dict[str, Any]] | None = None
    nodeSelector: dict[str, str] | None = None  # noqa: N815
    tolerations: list[dict[str, Any]] | None = None
    topologySpreadConstraints: list[WireSpreadConstraint] | None = None  # noqa: N815
    priority: Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)] | None = None  # int32
    priorityClassName: str | None = None  # noqa: N815
    restartPolicy: str | None = None  # noqa: N815
    # Node
    taints: list[WireTaint] | None = None
    unschedulable: bool | None = None
    # PodDisruptionBudget and the workloads (a label selector); Service (a plain label map)
    selector: dict[str, Any] | None = None
    replicas: Annotated[int, msgspec.Meta(ge=0)] | None = None
    paused: bool | None = None
    strategy: dict[str, Any] | None = None
    """A Deployment's (a StatefulSet's is updateStrategy)."""
    # HorizontalPodAutoscaler
    scaleTargetRef: WireScaleTarget | None = None  # noqa: N815
    # Service
    trafficDistribution: str | None = None  # noqa: N815
    # Job
    backoffLimit: Annotated[int, msgspec.Meta(ge=0)] | None = None  # noqa: N815
    backoffLimitPerIndex: Annotated[int, msgspec.Meta(ge=0)] | None = None  # noqa: N815
    podFailurePolicy: WirePodFailurePolicy | None = None  # noqa: N815
    clusterIP: str | None = None  # noqa: N815
    internalTrafficPolicy: str | None = None  # noqa: N815


class WireCondition(msgspec.Struct):
    type: str = ""
    status: str = ""


class WireUncounted(msgspec.Struct):
    failed: list[str] | None = None


class WireContainerStatus(msgspec.Struct):
    restartCount: Annotated[int, msgspec.Meta(ge=0)] = 0  # noqa: N815


class WireStatus(msgspec.Struct):
    phase: str | None = None
    containerStatuses: list[WireContainerStatus] | None = None  # noqa: N815
    initContainerStatuses: list[WireContainerStatus] | None = None  # noqa: N815
    conditions: list[WireCondition] | None = None
    allocatable: WireQuantities | None = None
    disruptionsAllowed: Annotated[int, msgspec.Meta(ge=0)] | None = None  # noqa: N815
    observedGeneration: int | None = None  # noqa: N815
    # Deployment
    replicas: int | None = None
    updatedReplicas: int | None = None  # noqa: N815
    failed: Annotated[int, msgspec.Meta(ge=0)] | None = None
    terminating: Annotated[int, msgspec.Meta(ge=0)] | None = None
    uncountedTerminatedPods: WireUncounted | None = None  # noqa: N815


class WireHint(msgspec.Struct):
    name: str = ""


class WireHints(msgspec.Struct):
    forZones: list[WireHint] | None = None  # noqa: N815
    forNodes: list[WireHint] | None = None  # noqa: N815


class WireEndpointConditions(msgspec.Struct):
    ready: bool | None = None
    serving: bool | None = None
    terminating: bool | None = None


class WireTargetRef(msgspec.Struct):
    kind: str = ""
    namespace: str | None = None
    name: str = ""


class WireEndpoint(msgspec.Struct):
    conditions: WireEndpointConditions | None = None
    nodeName: str | None = None  # noqa: N815
    zone: str | None = None
    targetRef: WireTargetRef | None = None  # noqa: N815
    hints: WireHints | None = None


class WireObject(msgspec.Struct):
    kind: str | None = None
    metadata: WireMetadata | None = None
    spec: WireSpec | None = None
    status: WireStatus | None = None
    endpoints: list[WireEndpoint] | None = None
    """An EndpointSlice's, at the top level of the object."""


class WireList(msgspec.Struct):
    items: list[WireObject]
    kind: str | None = None


NO_METADATA, NO_SPEC, NO_STATUS = WireMetadata(), WireSpec(), WireStatus()
LIST_DECODER = msgspec.json.Decoder(WireList)
