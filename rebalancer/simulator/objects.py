"""A scenario's Kubernetes objects, as the API server takes them: nodes, workloads with their pod
templates and PDBs, and the Services in front of called workloads.

The local control plane (harness/) creates them and the simulated cluster builds its nodes and
pods from them, so both run the same objects; the format they are made from is scenario.py's.
"""

from __future__ import annotations

from typing import Any

from rebalancer.simulator.scenario import (
    LEVEL_LABELS,
    NodeSpec,
    Scenario,
    VolumeKind,
    WorkloadSpec,
)


def node_object(spec: NodeSpec) -> dict[str, Any]:
    allocatable = {"cpu": spec.cpu, "memory": spec.memory, "pods": str(spec.pods), **spec.extended}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec.name, "labels": spec.node_labels},
        "status": {"allocatable": allocatable},
    }


def pod_template(workload: WorkloadSpec) -> dict[str, Any]:
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
    """The workload and its PDB, as the API server takes them; pods of kind Pod are made as
    they are, with no controller (owned ones are made by their owner's pod: the simulator's
    cluster makes them)."""
    made = [controller] if (controller := controller_object(workload)) is not None else []
    if workload.kind == "Pod" and workload.owner is None:
        made = [bare_pod(workload, ordinal) for ordinal in range(workload.replicas)]
    budget = pdb_object(workload)
    return made if budget is None else [*made, budget]


def bare_pod_name(workload: WorkloadSpec, ordinal: int) -> str:
    """A pod of kind Pod made by hand: the workload's name, numbered when there are several."""
    return workload.name if workload.replicas == 1 else f"{workload.name}-{ordinal}"


def bare_pod(workload: WorkloadSpec, ordinal: int) -> dict[str, Any]:
    template = pod_template(workload)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": bare_pod_name(workload, ordinal),
            "namespace": workload.namespace,
            **template["metadata"],
        },
        "spec": template["spec"],
    }


def controller_object(workload: WorkloadSpec) -> dict[str, Any] | None:
    """The object that makes the workload's pods; None for pods of kind Pod."""
    if workload.kind == "Pod":
        return None
    metadata = {"name": workload.name, "namespace": workload.namespace}
    selector = {"matchLabels": {"app": workload.name}}
    template = pod_template(workload)
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
    return body


def pdb_object(workload: WorkloadSpec) -> dict[str, Any] | None:
    if workload.pdb is None:
        return None
    budget: dict[str, Any] = {"selector": {"matchLabels": {"app": workload.name}}}
    if workload.pdb.min_available is not None:
        budget["minAvailable"] = workload.pdb.min_available
    else:
        budget["maxUnavailable"] = workload.pdb.max_unavailable
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": workload.name, "namespace": workload.namespace},
        "spec": budget,
    }


def service_objects(scenario: Scenario) -> list[dict[str, Any]]:
    """The Service in front of each workload called through one, as the API server takes it."""
    served = scenario.served()
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
