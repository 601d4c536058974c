"""Scenarios: a cluster, its workloads and who talks to whom, as one validated YAML document.

The same file drives the local control plane (the harness turns it into real API objects and its
exporter into traffic) and the simulator, so a scenario tested on one is the scenario measured on
the other. This is the format alone: a scenario's API objects are made in objects.py, and its
traffic, given where pods run, in traffic_model.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.files import parse_yaml_model, read_text

RACK_LABEL = "topology.kubernetes.io/rack"
HOST_LABEL = "kubernetes.io/hostname"
LevelName = Literal["zone", "rack", "host"]
LEVEL_LABELS: dict[LevelName, str] = {"zone": ZONE_LABEL, "rack": RACK_LABEL, "host": HOST_LABEL}
_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

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

    @property
    def node_labels(self) -> dict[str, str]:
        """The node's labels: its hostname, the spec's own, then its zone and rack."""
        labels = {HOST_LABEL: self.name, **self.labels}
        if self.zone is not None:
            labels[ZONE_LABEL] = self.zone
        if self.rack is not None:
            labels[RACK_LABEL] = self.rack
        return labels


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
    kind: Literal["Deployment", "StatefulSet", "Job", "DaemonSet", "Pod"] = "Deployment"
    """A DaemonSet runs one pod on each node its node_selector allows (give no replicas). Pod:
    pods made without a controller, which nothing recreates, unless `owner` names the pod that
    owns them."""
    owner: Name | None = None
    """With kind Pod: the workload (kind Pod, one replica, in this namespace) whose pod owns
    these pods and makes a new one for each that goes, as a Spark driver owns and recreates its
    executors; a lost one's work is redone, so they are elastic, not a gang."""
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

    @field_validator("owner")
    @classmethod
    def _owned_pods_are_pods(cls, owner: str | None, info: ValidationInfo) -> str | None:
        if owner is not None and info.data.get("kind") != "Pod":
            raise ValueError("only pods of kind Pod are owned by another pod")
        return owner

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
    def recreated(self) -> bool:
        """Whether a pod of it that goes is made again: by its controller, or its owner pod."""
        return self.kind != "Pod" or self.owner is not None

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
        return self.routing == "even" and qualified(self.source) != qualified(self.destination)

    @model_validator(mode="after")
    def _pairs_differ(self) -> TrafficSpec:
        same = qualified(self.source) == qualified(self.destination)
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
                if qualified(getattr(flow, end)) not in keys:
                    raise ValueError(f"{where}.{end}: no workload {getattr(flow, end)!r}")
        by_key = dict(zip(keys, self.workloads, strict=True))
        for index, workload in enumerate(self.workloads):
            if workload.owner is None:
                continue
            owner = by_key.get(f"{workload.namespace}/{workload.owner}")
            if owner is None or owner.kind != "Pod" or owner.replicas != 1 or owner.owner:
                raise ValueError(
                    f"workloads.{index}.owner: {workload.owner!r} must be a workload of kind Pod "
                    f"with one replica, owned by none, in namespace {workload.namespace}"
                )
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
        return [spec.name for spec in self.node_specs() if selector <= spec.node_labels.items()]

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
        key = qualified(reference)
        return next(w for w in self.workloads if w.key == key)

    def served(self) -> set[str]:
        """The workloads called through a Service."""
        return {qualified(flow.destination) for flow in self.traffic if flow.through_service}


def qualified(reference: str) -> str:
    """namespace/name of a workload reference: its namespace is default unless given."""
    return reference if "/" in reference else f"default/{reference}"


def parse_scenario(text: str, origin: str) -> Scenario:
    return parse_yaml_model(Scenario, text, origin, "scenario")


SCENARIO_LIMIT_BYTES = 16 * 1024 * 1024
"""A scenario describes a cluster in a few lines a workload: the 2,000-pod suite's is 40 KiB."""


def load_scenario(path: Path) -> Scenario:
    return parse_scenario(read_text(path, "scenario", SCENARIO_LIMIT_BYTES), str(path))


def in_domain(labels: Mapping[str, str], domain: Mapping[LevelName, str]) -> bool:
    """Whether a node with these labels lies in a {level: value} domain such as start_in."""
    return all(labels.get(LEVEL_LABELS[level]) == value for level, value in domain.items())
