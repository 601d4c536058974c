"""A scenario's nodes, workloads and pods, changed only by evictions and replacements.

The snapshot the planner reads is parsed from Kubernetes-shaped objects by the real parser.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from rebalancer.cluster.fit import Occupancy, claimed_zone
from rebalancer.cluster.model import Pod, Snapshot
from rebalancer.cluster.parse import parse_items
from rebalancer.cluster.scoring import Steering
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.simulator.objects import (
    bare_pod_name,
    controller_object,
    node_object,
    pdb_object,
    pod_template,
)
from rebalancer.simulator.scenario import (
    HOST_LABEL,
    LEVEL_LABELS,
    LevelName,
    Scenario,
    WorkloadSpec,
)
from rebalancer.simulator.scheduler import Scheduler
from rebalancer.simulator.traffic_model import (
    COMPLETION_INDEX,
    PlacedPod,
    pair_rates,
    rank_of,
    services,
)
from rebalancer.traffic.model import PodTraffic


@dataclass
class SimulatedCluster:
    """Nodes, workloads and pods of a scenario, changed only by evictions and replacements."""

    scenario: Scenario
    scheduler: Scheduler
    snapshot: Snapshot = field(init=False)
    occupancy: Occupancy = field(init=False)
    _owners: dict[str, list[tuple[dict[str, Any], str]]] = field(init=False, default_factory=dict)
    clock: float = 0.0
    """Unix seconds: the simulated time, which new pods are stamped with, so a replacement is
    told from its workload's older pods as the controller tells it, by creationTimestamp."""
    _serial: Iterator[int] = field(init=False, default_factory=itertools.count)
    distributions: dict[str, str | None] = field(default_factory=dict)
    """A workload's Service's trafficDistribution, by workload key, where a routing change made
    during the run set it."""
    _by_workload: dict[str, dict[str, None]] = field(init=False, default_factory=dict)
    """Pod keys by workload key, in the order made: the measures count a workload's pods
    every cycle, and scanning every pod for each workload grew as pods times workloads."""

    def __post_init__(self) -> None:
        items: list[tuple[Any, str]] = [
            (_ready(node_object(spec)), "Node") for spec in self.scenario.node_specs()
        ]
        for workload in self.scenario.workloads:
            owners = _owner_objects(workload)
            self._owners[workload.key] = owners
            items += owners
            budget = pdb_object(workload)
            if budget is not None:
                items.append((budget, "PodDisruptionBudget"))
        self.snapshot = parse_items(items, f"scenario {self.scenario.name}")
        self.occupancy = Occupancy.from_snapshot(self.snapshot)
        for workload in self.scenario.workloads:
            if workload.kind == "DaemonSet":
                for ordinal, node in enumerate(self.scenario.daemon_nodes(workload)):
                    self.create(workload, ordinal, steering=None, within={HOST_LABEL: node})
                continue
            for ordinal in range(workload.replicas):
                self.create(workload, ordinal, steering=None, within=_labels(workload.start_in))

    def create(
        self,
        workload: WorkloadSpec,
        ordinal: int,
        *,
        steering: Steering | None,
        within: Mapping[str, str] | None = None,
    ) -> Pod:
        """A new pod of `workload`, placed by the scheduler, or Pending when nothing fits."""
        created = datetime.datetime.fromtimestamp(self.clock, datetime.UTC)
        raw = _pod_object(
            workload, ordinal, next(self._serial), created, (within or {}).get(HOST_LABEL)
        )
        parsed = parse_items([*self._owners[workload.key], (raw, "Pod")], "simulated pod")
        pod = parsed.pods[f"{workload.namespace}/{raw['metadata']['name']}"]
        node = self.scheduler.place(
            pod, self.snapshot, self.occupancy, within=within or {}, steering=steering
        )
        placed = msgspec.structs.replace(
            pod, node_name=node, phase="Running" if node else "Pending", ready=node is not None
        )
        self.snapshot.pods[placed.key] = placed
        self._by_workload.setdefault(workload_key(placed), {})[placed.key] = None
        if node is not None:
            self.occupancy.reserve(placed, node)
        return placed

    def replacement(self, workload: WorkloadSpec, old: Pod, *, steering: Steering | None) -> Pod:
        """A new pod in `old`'s place, with its ordinal; where `old` mounts claims, in the zone
        their volumes are bound to."""
        zone = claimed_zone(old, self.snapshot.nodes)
        within = {} if zone is None else {ZONE_LABEL: zone}
        return self.create(workload, _ordinal(old), steering=steering, within=within)

    def remove(self, pod_key: str) -> Pod:
        pod = self.snapshot.pods.pop(pod_key)
        self._by_workload.get(workload_key(pod), {}).pop(pod_key, None)
        self.occupancy.release(pod)
        return pod

    def placed(self) -> list[PlacedPod]:
        return [
            PlacedPod(
                pod.key,
                workload_key(pod),
                self.snapshot.nodes[pod.node_name].labels.get(ZONE_LABEL),
                rank_of(pod.annotations),
                pod.node_name,
            )
            for pod in self.snapshot.pods.values()
            if pod.node_name
        ]

    def ready_of(self, workload: WorkloadSpec) -> list[Pod]:
        pods = self.snapshot.pods
        return [pods[key] for key in self._by_workload.get(workload.key, ()) if pods[key].ready]

    def refresh_budgets(self) -> None:
        """PDB status as the disruption controller would write it: allowed = healthy - desired."""
        by_name = {(w.namespace, w.name): w for w in self.scenario.workloads}
        self.snapshot.pdbs = [
            dataclasses.replace(
                pdb,
                disruptions_allowed=max(
                    0, len(self.ready_of(by_name[key])) - by_name[key].promised_ready
                ),
                status_observed=True,
            )
            for pdb in self.snapshot.pdbs
            if (key := (pdb.namespace, pdb.name)) in by_name
        ]

    def refresh_services(self) -> None:
        """The Services and their endpoints as the EndpointSlice controller keeps them."""
        self.snapshot.services = services(self.scenario, self.placed(), self.distributions)

    def traffic(self, scenario: Scenario | None = None) -> PodTraffic:
        """The scenario's flows (or those of `scenario`, such as its phases averaged) for the
        pods running now, as Prometheus would give them: by pod pair, source to destination,
        routed through each Service as it is set now."""
        flows = scenario or self.scenario
        return PodTraffic.of(pair_rates(flows, self.placed(), self.distributions))


def _ready(node: dict[str, Any]) -> dict[str, Any]:
    """A node as its kubelet (kwok, on the real control plane) reports it: Ready."""
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    return node


def workload_key(pod: Pod) -> str:
    """The scenario workload a pod belongs to: its namespace and `app` label."""
    return f"{pod.namespace}/{pod.labels.get('app', '')}"


def _labels(domain: Mapping[LevelName, str]) -> dict[str, str]:
    return {LEVEL_LABELS[level]: value for level, value in domain.items()}


def _owner_objects(workload: WorkloadSpec) -> list[tuple[dict[str, Any], str]]:
    """The workload object, and for a Deployment the ReplicaSet its pods belong to; none for
    pods of kind Pod, whose owner, if any, is a pod itself."""
    body = controller_object(workload)
    if body is None:
        return []
    body = {**body, "metadata": {**body["metadata"], "uid": f"uid-{workload.key}"}}
    owners: list[tuple[dict[str, Any], str]] = [(body, workload.kind)]
    if workload.kind == "Deployment":
        replica_set = {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": f"{workload.name}-sim",
                "namespace": workload.namespace,
                "ownerReferences": [
                    {"kind": "Deployment", "name": workload.name, "controller": True}
                ],
            },
            "spec": {"replicas": workload.replicas},
        }
        owners.append((replica_set, "ReplicaSet"))
    return owners


def _ordinal(pod: Pod) -> int:
    return int(pod.annotations.get("topology-rebalancer.io/ordinal", "0"))


def _pod_object(
    workload: WorkloadSpec,
    ordinal: int,
    serial: int,
    created: datetime.datetime,
    host: str | None = None,
) -> dict[str, Any]:
    """As its controller makes it: a StatefulSet pod with its own claims, a DaemonSet pod tied
    to its node (`host`) by node affinity, a pod owned by a pod with a new name each time (as
    a Spark driver numbers its executors)."""
    template = pod_template(workload)
    spec = dict(template["spec"])
    owner: tuple[str, str] | None
    if workload.kind == "Pod":
        if workload.owner is None:
            name, owner = bare_pod_name(workload, ordinal), None
        else:
            name, owner = f"{workload.name}-{serial:05d}", ("Pod", workload.owner)
    elif workload.kind == "Deployment":
        name, owner = f"{workload.name}-sim-{serial:05d}", ("ReplicaSet", f"{workload.name}-sim")
    elif workload.kind == "StatefulSet":
        name, owner = f"{workload.name}-{ordinal}", ("StatefulSet", workload.name)
        claims = [
            {"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-{name}"}}
            for claim, kind in workload.volumes.items()
            if kind == "persistent"
        ]
        if claims:
            spec["volumes"] = [*spec.get("volumes", ()), *claims]
    elif workload.kind == "DaemonSet":
        name, owner = f"{workload.name}-{serial:05d}", ("DaemonSet", workload.name)
        field = {"key": "metadata.name", "operator": "In", "values": [host]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": [field]}]
                }
            }
        }
    else:
        name, owner = f"{workload.name}-{serial:05d}", ("Job", workload.name)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": workload.namespace,
            "labels": template["metadata"]["labels"],
            "ownerReferences": (
                [] if owner is None else [{"kind": owner[0], "name": owner[1], "controller": True}]
            ),
            "annotations": {
                **template["metadata"].get("annotations", {}),
                "topology-rebalancer.io/ordinal": str(ordinal),
                **({COMPLETION_INDEX: str(ordinal)} if workload.kind == "Job" else {}),
            },
            "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
