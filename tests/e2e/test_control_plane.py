"""The real Kubernetes semantics the rebalancer relies on, proven on the local control plane."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from harness.cluster import LocalCluster
from harness.process import wait_until
from rebalancer.clients.kube_api import list_raw, read_snapshot
from rebalancer.cluster.fit import Occupancy, rejection
from rebalancer.cluster.model import Resources
from rebalancer.simulator.objects import workload_objects
from rebalancer.simulator.scenario import PdbSpec, WorkloadSpec

pytestmark = pytest.mark.e2e


def evict(cluster: LocalCluster, pod: dict[str, Any], dry_run: bool = False) -> int:
    """Send a policy/v1 Eviction; returns the HTTP status (201 evicted, 429 refused by PDB)."""
    core = client.CoreV1Api(cluster.api_client())
    name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    body = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace),
        delete_options=client.V1DeleteOptions(dry_run=["All"] if dry_run else None),
    )
    try:
        core.create_namespaced_pod_eviction(name, namespace, body)
    except client.ApiException as error:
        return int(error.status)
    return 201


def _deploy(
    cluster: LocalCluster, namespace: str, replicas: int = 3, min_available: int = 2
) -> WorkloadSpec:
    cluster.ensure_namespace(namespace)
    workload = WorkloadSpec(
        name="web", namespace=namespace, replicas=replicas, pdb=PdbSpec(min_available=min_available)
    )
    cluster.apply(workload_objects(workload))
    cluster.wait_ready(namespace, "web", replicas)
    cluster.wait_pdb(namespace, "web", allowed=replicas - min_available)
    return workload


def test_pods_are_scheduled_onto_kwok_nodes_and_become_ready(cluster: LocalCluster) -> None:
    _deploy(cluster, "semantics-ready")
    pods = cluster.ready_pods("semantics-ready", "web")
    assert len(pods) == 3
    assert all(pod["spec"]["nodeName"].startswith("node-") for pod in pods)


def _cordon_all(cluster: LocalCluster, unschedulable: bool) -> None:
    core = client.CoreV1Api(cluster.api_client())
    for node in list_raw("Node", core.list_node):
        core.patch_node(node["metadata"]["name"], {"spec": {"unschedulable": unschedulable}})


def test_eviction_is_judged_against_the_pdb(cluster: LocalCluster) -> None:
    namespace = "semantics-evict"
    _deploy(cluster, namespace)
    first, second, third = cluster.ready_pods(namespace, "web")
    originals = {pod["metadata"]["name"] for pod in (first, second, third)}
    # kwok replaces pods in milliseconds; with every node cordoned the replacement stays
    # Pending, so the budget stays spent for as long as the test needs
    _cordon_all(cluster, True)
    try:
        assert evict(cluster, first) == 201
        assert evict(cluster, second) == 429
    finally:
        _cordon_all(cluster, False)

    def replacements() -> list[dict[str, Any]]:
        return [
            p
            for p in cluster.ready_pods(namespace, "web")
            if p["metadata"]["name"] not in originals
        ]

    wait_until(lambda: len(replacements()) == 1, 60, "the ReplicaSet's replacement")
    names = {p["metadata"]["name"] for p in cluster.ready_pods(namespace, "web")}
    assert first["metadata"]["name"] not in names and second["metadata"]["name"] in names


def test_dry_run_eviction_is_judged_but_evicts_nothing(cluster: LocalCluster) -> None:
    namespace = "semantics-dry-run"
    _deploy(cluster, namespace, replicas=2, min_available=2)  # budget allows nothing
    pod = cluster.ready_pods(namespace, "web")[0]
    assert evict(cluster, pod, dry_run=True) == 429
    policy = client.PolicyV1Api(cluster.api_client())
    policy.patch_namespaced_pod_disruption_budget("web", namespace, {"spec": {"minAvailable": 1}})
    cluster.wait_pdb(namespace, "web", allowed=1)
    assert evict(cluster, pod, dry_run=True) == 201
    still_there = {p["metadata"]["name"] for p in cluster.ready_pods(namespace, "web")}
    assert pod["metadata"]["name"] in still_there and len(still_there) == 2
    cluster.wait_pdb(namespace, "web", allowed=1)  # a dry run spends no budget


def test_a_pod_evicted_from_a_cordoned_node_lands_elsewhere(cluster: LocalCluster) -> None:
    namespace = "semantics-cordon"
    _deploy(cluster, namespace, replicas=2, min_available=1)
    evicted, other = cluster.ready_pods(namespace, "web")
    node = evicted["spec"]["nodeName"]
    originals = {evicted["metadata"]["name"], other["metadata"]["name"]}
    core = client.CoreV1Api(cluster.api_client())
    core.patch_node(node, {"spec": {"unschedulable": True}})
    try:
        assert evict(cluster, evicted) == 201

        def replacements() -> list[dict[str, Any]]:
            return [
                p
                for p in cluster.ready_pods(namespace, "web")
                if p["metadata"]["name"] not in originals
            ]

        wait_until(lambda: len(replacements()) == 1, 60, "replacement")
        assert replacements()[0]["spec"]["nodeName"] != node
    finally:
        core.patch_node(node, {"spec": {"unschedulable": False}})


def test_the_scheduler_rounds_a_fractional_request_up_as_the_snapshot_does(
    cluster: LocalCluster,
) -> None:
    """The API server keeps a memory request of 1.5 bytes as "1500m" (CPU it rounds to whole
    millicores itself). Two such pods on a node with 3 bytes: the scheduler counts each as 2
    and binds one. The snapshot must round alike, so its fit check refuses the other as the
    scheduler did; truncated to 1 byte each, both would have looked like they fit."""
    namespace, node_name, taint = "semantics-round-up", "tiny-node", "rebalancer.test/tiny"
    core = client.CoreV1Api(cluster.api_client())
    tiny = {
        "metadata": {"name": node_name, "labels": {"tiny": "true"}},
        "spec": {"taints": [{"key": taint, "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "1", "memory": "3", "pods": "10"}},
    }
    cluster.add_nodes([tiny])
    cluster.ensure_namespace(namespace)
    try:
        cluster.apply(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"small-{index}", "namespace": namespace},
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "registry.invalid/fake:1",
                                "resources": {"requests": {"cpu": "1m", "memory": "1.5"}},
                            }
                        ],
                        "nodeSelector": {"tiny": "true"},
                        "tolerations": [{"key": taint, "operator": "Exists"}],
                        "terminationGracePeriodSeconds": 0,
                    },
                }
                for index in range(2)
            ]
        )

        def unschedulable(pod: dict[str, Any]) -> bool:
            return any(
                c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in pod.get("status", {}).get("conditions") or ()
            )

        def one_bound_one_refused() -> bool:
            pods = list_raw("Pod", lambda **kw: core.list_namespaced_pod(namespace, **kw))
            bound = [p for p in pods if p["spec"].get("nodeName") == node_name]
            return len(bound) == 1 and sum(map(unschedulable, pods)) == 1

        wait_until(one_bound_one_refused, 60, "one small pod bound and one refused")
        snapshot = read_snapshot(cluster.api_client())
        small = [pod for pod in snapshot.pods.values() if pod.namespace == namespace]
        assert {pod.requests for pod in small} == {Resources(1, 2, 1)}
        (pending,) = [pod for pod in small if pod.node_name is None]
        node = snapshot.nodes[node_name]
        occupancy = Occupancy.from_snapshot(snapshot)
        assert rejection(pending, node, occupancy, False) == "insufficient resources"
    finally:
        core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        wait_until(lambda: not core.list_namespaced_pod(namespace).items, 60, "the small pods gone")
        core.delete_node(node_name)
