"""Small builders of Kubernetes API objects as plain dicts, in descheduler's BuildTestNode style.

Each builder returns the object a real API server would, with only the fields the rebalancer reads,
and takes an optional mutator callback for the case at hand, so tests state only what matters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Obj = dict[str, Any]
Mutator = Callable[[Obj], None] | None

ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "topology.kubernetes.io/rack"
HOST_LABEL = "kubernetes.io/hostname"


def _apply(obj: Obj, mutate: Mutator) -> Obj:
    if mutate is not None:
        mutate(obj)
    return obj


def node(
    name: str,
    zone: str | None = None,
    rack: str | None = None,
    *,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: str = "110",
    mutate: Mutator = None,
) -> Obj:
    labels = {HOST_LABEL: name}
    if zone is not None:
        labels[ZONE_LABEL] = zone
    if rack is not None:
        labels[RACK_LABEL] = rack
    return _apply(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {},
            "status": {
                "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        mutate,
    )


def deployment(name: str, replicas: int, namespace: str = "default", mutate: Mutator = None) -> Obj:
    return _apply(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "annotations": {}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}},
        },
        mutate,
    )


def replicaset(name: str, deployment_name: str, namespace: str = "default") -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "Deployment",
                    "name": deployment_name,
                    "controller": True,
                }
            ],
        },
    }


def pod(
    name: str,
    node_name: str | None,
    owner: tuple[str, str] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    namespace: str = "default",
    cpu: str = "500m",
    memory: str = "512Mi",
    mutate: Mutator = None,
) -> Obj:
    """`owner` is (kind, name) of the controller, for example ("ReplicaSet", "web-7d9f")."""
    metadata: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner[0], "name": owner[1], "controller": True}
        ]
    spec: Obj = {
        "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    return _apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": spec,
            "status": {
                "phase": "Running" if node_name else "Pending",
                "conditions": [{"type": "Ready", "status": "True" if node_name else "False"}],
            },
        },
        mutate,
    )


def deployment_pods(
    name: str,
    nodes: Iterable[str | None],
    *,
    namespace: str = "default",
    cpu: str = "500m",
    memory: str = "512Mi",
    mutate_pod: Mutator = None,
) -> list[Obj]:
    """A Deployment, its ReplicaSet and one pod per given node, named as the controllers do."""
    placed = list(nodes)
    rs_name = f"{name}-5d8c7"
    objects = [deployment(name, len(placed), namespace), replicaset(rs_name, name, namespace)]
    for index, node_name in enumerate(placed):
        objects.append(
            pod(
                f"{rs_name}-{index:05d}",
                node_name,
                ("ReplicaSet", rs_name),
                labels={"app": name},
                namespace=namespace,
                cpu=cpu,
                memory=memory,
                mutate=mutate_pod,
            )
        )
    return objects


def pdb(
    name: str,
    match_labels: Mapping[str, str],
    disruptions_allowed: int,
    namespace: str = "default",
    observed: bool = True,
) -> Obj:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace, "generation": 1},
        "spec": {"selector": {"matchLabels": dict(match_labels)}},
        "status": {
            "disruptionsAllowed": disruptions_allowed,
            "observedGeneration": 1 if observed else 0,
        },
    }


def service(
    name: str,
    selector: Mapping[str, str],
    namespace: str = "default",
    traffic_distribution: str | None = None,
    mutate: Mutator = None,
) -> Obj:
    spec: Obj = {"selector": dict(selector), "internalTrafficPolicy": "Cluster"}
    if traffic_distribution is not None:
        spec["trafficDistribution"] = traffic_distribution
    return _apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        },
        mutate,
    )


def endpoint_slice(
    name: str,
    service_name: str,
    endpoints: Iterable[tuple[str, str, str | None]],
    namespace: str = "default",
    hinted: str | None = None,
) -> Obj:
    """Endpoints as (pod, node, zone), each ready, as the EndpointSlice controller writes them.
    `hinted` (PreferSameZone or PreferSameNode): the hints it writes for that distribution."""
    listed = []
    for pod_name, node_name, zone in endpoints:
        endpoint: Obj = {
            "addresses": ["10.0.0.1"],
            "conditions": {"ready": True, "serving": True, "terminating": False},
            "nodeName": node_name,
            "targetRef": {"kind": "Pod", "name": pod_name, "namespace": namespace},
        }
        if zone is not None:
            endpoint["zone"] = zone
            if hinted is not None:
                endpoint["hints"] = {"forZones": [{"name": zone}]}
        if hinted == "PreferSameNode":
            endpoint.setdefault("hints", {})["forNodes"] = [{"name": node_name}]
        listed.append(endpoint)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service_name},
        },
        "addressType": "IPv4",
        "endpoints": listed,
    }


def k8s_list(items: Iterable[Obj]) -> Obj:
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {}}


def hubble_vector(
    rates: Mapping[tuple[str, str], float], timestamp: float = 1_700_000_000.0
) -> Obj:
    """A `/api/v1/query` answer for the split-label Hubble query: ("ns/pod", "ns/pod") -> rate."""
    result = []
    for (source, destination), rate in rates.items():
        source_namespace, source_pod = source.split("/", 1)
        destination_namespace, destination_pod = destination.split("/", 1)
        result.append(
            {
                "metric": {
                    "source_namespace": source_namespace,
                    "source_pod": source_pod,
                    "destination_namespace": destination_namespace,
                    "destination_pod": destination_pod,
                },
                "value": [timestamp, repr(float(rate))],
            }
        )
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def admission_review(
    uid: str = "u1", owner: str = "web-1", *, pod_spec: Obj | None = None, **request: Any
) -> Obj:
    """An AdmissionReview of a pod CREATE in namespace shop, its ReplicaSet `owner` named."""
    pod: Obj = {
        "metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": owner, "controller": True}]}
    }
    if pod_spec is not None:
        pod["spec"] = pod_spec
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "namespace": "shop",
            "kind": {"kind": "Pod"},
            "object": pod,
            **request,
        },
    }
