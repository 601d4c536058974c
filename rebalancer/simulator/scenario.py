"""Scenarios: a cluster, its workloads and who talks to whom, as one validated YAML document.

The same file drives the local control plane (the harness turns it into real API objects and its
exporter into traffic) and the simulator, so a scenario tested on one is the scenario measured on
the other. The traffic model is pure: given where pods run now, it says what flows between them,
following each pair's routing, which is what makes it ground truth when pods move.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from rebalancer.cluster.model import Endpoint, Service
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.cost.kube_proxy import Chooser, distribution_of, hinted
from rebalancer.files import parse_yaml_model, read_text

RACK_LABEL = "topology.kubernetes.io/rack"
HOST_LABEL = "kubernetes.io/hostname"
LevelName = Literal["zone", "rack", "host"]
LEVEL_LABELS: dict[LevelName, str] = {"zone": ZONE_LABEL, "rack": RACK_LABEL, "host": HOST_LABEL}
_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_ORDINAL = re.compile(r"-(\d+)$")

Name = Annotated[str, Field(pattern=_NAME, max_length=50)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class NodeGrid(_Strict):
    """zones x racks_per_zone x nodes_per_rack identical nodes, named node-<zone><rack><n>."""

    zones: Annotated[int, Field(ge=1, le=26)] = 3
    racks_per_zone: Annotated[int, Field(ge=1, le=99)] = 2
    nodes_per_rack: Annotated[int, Field(ge=1, le=999)] = 2
    cpu: str = "8"
    memory: str = "32Gi"
    pods: Annotated[int, Field(ge=1)] = 110
    extended: dict[str, str] = Field(default_factory=dict)
    """Further allocatable resources of every node, such as {nvidia.com/gpu: "8"}."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Further labels of every node, such as a GPU product or a node pool."""


class NodeSpec(_Strict):
    name: Name
    zone: str | None = None
    rack: str | None = None
    cpu: str = "8"
    memory: str = "32Gi"
    pods: Annotated[int, Field(ge=1)] = 110
    extended: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)


class PdbSpec(_Strict):
    min_available: Annotated[int | None, Field(ge=0)] = None
    max_unavailable: Annotated[int | None, Field(ge=0)] = None

    @model_validator(mode="after")
    def _exactly_one(self) -> PdbSpec:
        if (self.min_available is None) == (self.max_unavailable is None):
            raise ValueError("give exactly one of min_available and max_unavailable")
        return self


class SpreadSpec(_Strict):
    level: LevelName = "zone"
    max_skew: Annotated[int, Field(ge=1)] = 1
    hard: bool = True
    """DoNotSchedule when true, ScheduleAnyway otherwise."""


VolumeKind = Literal["emptyDir", "memory", "hostPath", "persistent"]
"""memory: an emptyDir backed by memory. persistent: a PersistentVolumeClaim, each StatefulSet
pod's own, else one shared by the workload's pods; its volume is bound to the zone the pod
first ran in, which a replacement cannot leave."""


class WorkloadSpec(_Strict):
    name: Name
    namespace: Name = "default"
    kind: Literal["Deployment", "StatefulSet", "Job", "DaemonSet"] = "Deployment"
    """A DaemonSet runs one pod on each node its node_selector allows (give no replicas)."""
    replicas: Annotated[int, Field(ge=1)] = 1
    cpu: str = "500m"
    memory: str = "512Mi"
    extended: dict[str, str] = Field(default_factory=dict)
    """Further requests of each pod, such as {nvidia.com/gpu: "1"}."""
    node_selector: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)
    """Further pod labels, such as the job name a gang is grouped by; `app` is the workload's."""
    annotations: dict[str, str] = Field(default_factory=dict)
    """Pod annotations, such as cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes."""
    volumes: dict[Name, VolumeKind] = Field(default_factory=dict)
    """Each pod's volumes by name, such as {istio-data: emptyDir, data: persistent}."""
    pdb: PdbSpec | None = None
    spread: tuple[SpreadSpec, ...] = ()
    priority_class: str | None = None
    start_in: dict[LevelName, str] = Field(default_factory=dict)
    """Where the pods start, for example {zone: zone-a}: a placement history the rebalancer should
    fix. Only the first placement is constrained; replacements may go anywhere."""
    traffic_distribution: Literal["PreferSameZone", "PreferClose", "PreferSameNode"] | None = None
    """spec.trafficDistribution of the Service in front of the workload: every workload that
    another one calls (`even` routing) is behind a Service of its name. None: cluster-wide."""

    @model_validator(mode="after")
    def _daemonset_has_no_count(self) -> WorkloadSpec:
        if self.kind != "DaemonSet":
            return self
        given = [f for f in ("replicas", "start_in", "pdb") if f in self.model_fields_set]
        if given:
            raise ValueError(
                f"{given[0]}: a DaemonSet runs one pod on each node its node_selector allows, "
                "and its pods never move"
            )
        return self

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def persistent(self) -> bool:
        """Whether its pods mount a claim, whose volume pins them to a zone."""
        return "persistent" in self.volumes.values()

    @property
    def promised_ready(self) -> int:
        """The Ready pods the workload's PDB promises; 0 without a PDB. A Job has no scale
        subresource, so the disruption controller cannot count the pods a maxUnavailable PDB
        expects and allows no disruption at all."""
        if self.pdb is None:
            return 0
        if self.pdb.min_available is not None:
            return self.pdb.min_available
        if self.kind == "Job":
            return self.replicas
        return self.replicas - (self.pdb.max_unavailable or 0)


class TrafficSpec(_Strict):
    """Traffic from one workload to another, `rate` per second in total over the pair."""

    source: str
    destination: str
    routing: Literal["pinned", "ring", "even"] = "even"
    """pinned: pod i talks to pod i of another workload (a sidecar-like partner by ordinal);
    ring: pod i talks to pod i+1 of the same workload, the last to the first (ring all-reduce,
    pipeline stages); even: through the destination's Service, which sends each client's calls
    where kube-proxy would under the Service's trafficDistribution (spread over every server pod
    when it has none), and within one workload every pod talks to every other (all-to-all)."""
    rate: Annotated[float, Field(gt=0)]

    @property
    def through_service(self) -> bool:
        """Calls from one workload to another through its Service (not peers within one)."""
        return self.routing == "even" and _qualified(self.source) != _qualified(self.destination)

    @model_validator(mode="after")
    def _pairs_differ(self) -> TrafficSpec:
        same = _qualified(self.source) == _qualified(self.destination)
        if self.routing == "pinned" and same:
            raise ValueError("routing pinned pairs each pod with itself: use ring or even")
        if self.routing == "ring" and not same:
            raise ValueError("routing ring is within one workload: source and destination differ")
        return self


class Scenario(_Strict):
    name: str
    description: str = ""
    nodes: NodeGrid | tuple[NodeSpec, ...] = NodeGrid()
    workloads: tuple[WorkloadSpec, ...]
    traffic: tuple[TrafficSpec, ...] = ()
    traffic_phases: tuple[tuple[TrafficSpec, ...], ...] = ()
    """Traffic that changes over time: phase k is in force in cycle (or time slot) n when
    n // phase_cycles mod the number of phases is k, in place of `traffic`. Two phases that
    pull the same workload opposite ways make a loop test."""
    phase_cycles: Annotated[int, Field(ge=1)] = 1
    """How many cycles (or time slots) each phase lasts: two phases of 4 alternate with a
    period of 8."""

    @model_validator(mode="after")
    def _references_resolve(self) -> Scenario:
        keys = [w.key for w in self.workloads]
        duplicated = sorted({k for k in keys if keys.count(k) > 1})
        if duplicated:
            raise ValueError(f"workloads: names must be unique, repeated: {duplicated}")
        flows = [(f"traffic.{index}", flow) for index, flow in enumerate(self.traffic)]
        for phase, phase_flows in enumerate(self.traffic_phases):
            flows += [(f"traffic_phases.{phase}.{i}", f) for i, f in enumerate(phase_flows)]
        for where, flow in flows:
            for end in ("source", "destination"):
                if _qualified(getattr(flow, end)) not in keys:
                    raise ValueError(f"{where}.{end}: no workload {getattr(flow, end)!r}")
        if isinstance(self.nodes, tuple):
            names = [n.name for n in self.nodes]
            if len(set(names)) != len(names):
                raise ValueError("nodes: names must be unique")
        return self

    def in_phase(self, number: int) -> Scenario:
        """The scenario with the traffic of slot `number` in force (itself without phases)."""
        if not self.traffic_phases:
            return self
        phase = self.traffic_phases[self.phase_of(number)]
        return self.model_copy(update={"traffic": phase})

    def pods_of(self, workload: WorkloadSpec) -> int:
        """How many pods the workload runs: its replicas, or a DaemonSet's one on each of its
        nodes."""
        if workload.kind != "DaemonSet":
            return workload.replicas
        return len(self.daemon_nodes(workload))

    def daemon_nodes(self, workload: WorkloadSpec) -> list[str]:
        """The nodes a DaemonSet runs a pod on: those its node_selector allows."""
        selector = workload.node_selector.items()
        nodes = (node_object(spec)["metadata"] for spec in self.node_specs())
        return [node["name"] for node in nodes if selector <= node["labels"].items()]

    def averaged(self) -> Scenario:
        """The scenario with its phases' traffic averaged over a period (itself without
        phases): what a placement costs over time, which moves made for one phase trade off."""
        if not self.traffic_phases:
            return self
        share = 1 / len(self.traffic_phases)
        flows = tuple(
            flow.model_copy(update={"rate": flow.rate * share})
            for phase in self.traffic_phases
            for flow in phase
        )
        return self.model_copy(update={"traffic": flows, "traffic_phases": ()})

    def phase_of(self, number: int) -> int:
        """The phase in force in cycle (or time slot) `number`; 0 without phases."""
        if not self.traffic_phases:
            return 0
        return (number // self.phase_cycles) % len(self.traffic_phases)

    def node_specs(self) -> list[NodeSpec]:
        if isinstance(self.nodes, tuple):
            return list(self.nodes)
        grid = self.nodes
        return [
            NodeSpec(
                name=f"node-{zone}{rack}{index}",
                zone=f"zone-{zone}",
                rack=f"rack-{rack}",
                cpu=grid.cpu,
                memory=grid.memory,
                pods=grid.pods,
                extended=grid.extended,
                labels=grid.labels,
            )
            for zone in "abcdefghijklmnopqrstuvwxyz"[: grid.zones]
            for rack in range(1, grid.racks_per_zone + 1)
            for index in range(1, grid.nodes_per_rack + 1)
        ]

    def workload(self, reference: str) -> WorkloadSpec:
        key = _qualified(reference)
        return next(w for w in self.workloads if w.key == key)


def _qualified(reference: str) -> str:
    return reference if "/" in reference else f"default/{reference}"


def parse_scenario(text: str, origin: str) -> Scenario:
    return parse_yaml_model(Scenario, text, origin, "scenario")


def load_scenario(path: Path) -> Scenario:
    return parse_scenario(read_text(path, "scenario"), str(path))


# --- Kubernetes objects ---------------------------------------------------------------------


def domain_counts(
    label: str, nodes: Iterable[Mapping[str, str]], placed: Iterable[Mapping[str, str]]
) -> dict[str, int]:
    """Pods per domain of `label`: every domain some node is in, 0 where no pod runs. `placed`
    holds the labels of each pod's node; a node without the label counts in no domain."""
    counts = {labels[label]: 0 for labels in nodes if label in labels}
    for labels in placed:
        if label in labels:
            counts[labels[label]] = counts.get(labels[label], 0) + 1
    return counts


def in_domain(labels: Mapping[str, str], domain: Mapping[LevelName, str]) -> bool:
    """Whether a node with these labels lies in a {level: value} domain such as start_in."""
    return all(labels.get(LEVEL_LABELS[level]) == value for level, value in domain.items())


def node_object(spec: NodeSpec) -> dict[str, Any]:
    labels = {HOST_LABEL: spec.name, **spec.labels}
    allocatable = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods), **spec.extended}
    if spec.zone is not None:
        labels[ZONE_LABEL] = spec.zone
    if spec.rack is not None:
        labels[RACK_LABEL] = spec.rack
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": labels},
        "status": {"allocatable": allocatable},
    }


def _pod_template(workload: WorkloadSpec) -> dict[str, Any]:
    labels = {**workload.labels, "app": workload.name}
    requests = {"cpu": workload.cpu, "memory": workload.memory, **workload.extended}
    resources: dict[str, Any] = {"requests": requests}
    if workload.extended:  # extended resources must be given as limits too, equal
        resources["limits"] = dict(workload.extended)
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.invalid/fake:1",  # kwok runs no containers; never pulled
                "resources": resources,
            }
        ],
        "terminationGracePeriodSeconds": 0,
    }
    if workload.node_selector:
        spec["nodeSelector"] = dict(workload.node_selector)
    if workload.spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": spread.max_skew,
                "topologyKey": LEVEL_LABELS[spread.level],
                "whenUnsatisfiable": "DoNotSchedule" if spread.hard else "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": workload.name}},
            }
            for spread in workload.spread
        ]
    if workload.kind == "Job":
        spec["restartPolicy"] = "Never"
    if workload.priority_class:
        spec["priorityClassName"] = workload.priority_class
    volumes = [
        _volume(workload, name, kind)
        for name, kind in workload.volumes.items()
        if not (kind == "persistent" and workload.kind == "StatefulSet")  # its claim templates
    ]
    if volumes:
        spec["volumes"] = volumes
    metadata: dict[str, Any] = {"labels": labels}
    if workload.annotations:
        metadata["annotations"] = dict(workload.annotations)
    return {"metadata": metadata, "spec": spec}


def _volume(workload: WorkloadSpec, name: str, kind: VolumeKind) -> dict[str, Any]:
    if kind == "emptyDir":
        return {"name": name, "emptyDir": {}}
    if kind == "memory":
        return {"name": name, "emptyDir": {"medium": "Memory"}}
    if kind == "hostPath":
        return {"name": name, "hostPath": {"path": f"/var/lib/{workload.name}/{name}"}}
    return {"name": name, "persistentVolumeClaim": {"claimName": f"{workload.name}-{name}"}}


def workload_objects(workload: WorkloadSpec) -> list[dict[str, Any]]:
    """The workload and its PDB, as the API server takes them."""
    metadata = {"name": workload.name, "namespace": workload.namespace}
    selector = {"matchLabels": {"app": workload.name}}
    template = _pod_template(workload)
    if workload.kind == "Job":
        body: dict[str, Any] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": metadata,
            "spec": {
                "parallelism": workload.replicas,
                "completions": workload.replicas,
                "completionMode": "Indexed",
                "backoffLimit": 1000,
                "template": template,
            },
        }
    elif workload.kind == "DaemonSet":
        body = {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": metadata,
            "spec": {"selector": selector, "template": template},
        }
    else:
        body = {
            "apiVersion": "apps/v1",
            "kind": workload.kind,
            "metadata": metadata,
            "spec": {"replicas": workload.replicas, "selector": selector, "template": template},
        }
        if workload.kind == "StatefulSet":
            body["spec"]["serviceName"] = workload.name
            body["spec"]["podManagementPolicy"] = "Parallel"
            claims = [name for name, kind in workload.volumes.items() if kind == "persistent"]
            if claims:
                body["spec"]["volumeClaimTemplates"] = [
                    {
                        "metadata": {"name": name},
                        "spec": {
                            "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}},
                        },
                    }
                    for name in claims
                ]
    objects = [body]
    if workload.pdb is not None:
        budget: dict[str, Any] = {"selector": selector}
        if workload.pdb.min_available is not None:
            budget["minAvailable"] = workload.pdb.min_available
        else:
            budget["maxUnavailable"] = workload.pdb.max_unavailable
        objects.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": metadata,
                "spec": budget,
            }
        )
    return objects


# --- The traffic model -------------------------------------------------------------------


@dataclass(frozen=True)
class PlacedPod:
    key: str
    """namespace/name"""
    workload: str
    """namespace/name of the scenario workload"""
    zone: str | None
    rank: int | None = None
    """The pod's fixed place in its workload, which a replacement inherits: an indexed Job's
    completion index (as a training job's ranks are). None: the name's ordinal, if any."""
    node: str | None = None


COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def rank_of(annotations: Mapping[str, str]) -> int | None:
    value = annotations.get(COMPLETION_INDEX, "")
    return int(value) if value.isdigit() else None


def _ordinal_order(pods: Iterable[PlacedPod]) -> list[PlacedPod]:
    """Ranks, else StatefulSet ordinals when the names carry them, else by name: stable across
    cycles, and a replacement takes the place of the pod it replaced, so a ring keeps its order."""

    def order(pod: PlacedPod) -> tuple[int, str]:
        if pod.rank is not None:
            return (pod.rank, pod.key)
        match = _ORDINAL.search(pod.key)
        return (int(match.group(1)) if match else 0, pod.key)

    return sorted(pods, key=order)


def service_endpoints(
    servers: Iterable[PlacedPod], distribution: str | None
) -> tuple[Endpoint, ...]:
    """The endpoints of the Service in front of these pods, each ready (a placed pod runs), with
    the hints the EndpointSlice controller writes for `distribution`."""
    endpoints = [Endpoint(pod.key, pod.node, pod.zone, True, True, False) for pod in servers]
    return hinted(endpoints, distribution_of(distribution))


def _by_workload(pods: Iterable[PlacedPod]) -> dict[str, list[PlacedPod]]:
    grouped: dict[str, list[PlacedPod]] = {}
    for pod in pods:
        grouped.setdefault(pod.workload, []).append(pod)
    return grouped


def _routing(
    scenario: Scenario, distributions: Mapping[str, str | None] | None
) -> dict[str, str | None]:
    """Each workload's Service's trafficDistribution: the scenario's, or a change made since."""
    routed: dict[str, str | None] = {w.key: w.traffic_distribution for w in scenario.workloads}
    routed.update(distributions or {})
    return routed


def services(
    scenario: Scenario,
    pods: Iterable[PlacedPod],
    distributions: Mapping[str, str | None] | None = None,
) -> dict[str, Service]:
    """The Service in front of each workload another one calls, by its key (the workload's),
    with its endpoints and their hints as the EndpointSlice controller keeps them."""
    served = _served(scenario)
    by_workload = _by_workload(pods)
    routed = _routing(scenario, distributions)
    found = {}
    for workload in scenario.workloads:
        if workload.key not in served:
            continue
        distribution = routed[workload.key]
        found[workload.key] = Service(
            namespace=workload.namespace,
            name=workload.name,
            selector={"app": workload.name},
            traffic_distribution=distribution,
            internal_traffic_policy="Cluster",
            annotations={},
            endpoints=service_endpoints(by_workload.get(workload.key, []), distribution),
        )
    return found


def _served(scenario: Scenario) -> set[str]:
    """The workloads called through a Service."""
    return {_qualified(flow.destination) for flow in scenario.traffic if flow.through_service}


def service_objects(scenario: Scenario) -> list[dict[str, Any]]:
    """The Service in front of each workload called through one, as the API server takes it."""
    served = _served(scenario)
    objects = []
    for workload in scenario.workloads:
        if workload.key not in served:
            continue
        spec: dict[str, Any] = {"selector": {"app": workload.name}, "ports": [{"port": 80}]}
        if workload.traffic_distribution is not None:
            spec["trafficDistribution"] = workload.traffic_distribution
        metadata = {"name": workload.name, "namespace": workload.namespace}
        objects.append({"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec})
    return objects


def pair_rates(
    scenario: Scenario,
    pods: Iterable[PlacedPod],
    distributions: Mapping[str, str | None] | None = None,
) -> dict[tuple[str, str], float]:
    """(source pod, destination pod) -> rate, for the pods running now. `distributions`: the
    trafficDistribution of a workload's Service where it differs from the scenario's (a routing
    change made during the run)."""
    by_workload = _by_workload(pods)
    rates: dict[tuple[str, str], float] = {}

    def add(source: PlacedPod, destination: PlacedPod, rate: float) -> None:
        if source.key != destination.key:
            pair = (source.key, destination.key)
            rates[pair] = rates.get(pair, 0.0) + rate

    routed = _routing(scenario, distributions)
    for flow in scenario.traffic:
        clients = _ordinal_order(by_workload.get(_qualified(flow.source), []))
        servers = _ordinal_order(by_workload.get(_qualified(flow.destination), []))
        if not clients or not servers:
            continue
        per_client = flow.rate / len(clients)
        destination = _qualified(flow.destination)
        through_service = flow.through_service
        if through_service:
            endpoints = service_endpoints(servers, routed.get(destination))
            pick = Chooser(endpoints, local_only=False)
            by_key = {pod.key: pod for pod in servers}
        for index, client_pod in enumerate(clients):
            if flow.routing == "pinned":
                add(client_pod, servers[index % len(servers)], per_client)
                continue
            if flow.routing == "ring":
                add(client_pod, servers[(index + 1) % len(servers)], per_client)
                continue
            targets = servers
            if through_service:
                near = pick(client_pod.node, client_pod.zone)
                targets = [by_key[endpoints[i].pod or ""] for i in near]
            for server in targets:
                add(client_pod, server, per_client / len(targets))
    return rates
