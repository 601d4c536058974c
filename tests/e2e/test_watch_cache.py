"""The watch cache follows the real API server: new pods appear, deleted ones go, without a LIST."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import pytest
from kubernetes import client

from harness.cluster import LocalCluster
from harness.process import wait_until
from rebalancer.clients.watch_cache import WatchCache
from rebalancer.cluster.model import Endpoint, Service
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.cost.kube_proxy import distribution_of, hinted
from rebalancer.simulator.objects import workload_objects
from rebalancer.simulator.scenario import WorkloadSpec

pytestmark = pytest.mark.e2e

NAMESPACE = "cache"


@pytest.fixture
def cache(cluster: LocalCluster) -> Iterator[WatchCache]:
    running = WatchCache(cluster.api_client()).start()
    try:
        assert running.wait_synced(timeout=30)
        yield running
    finally:
        running.stop()


def _pods(cache: WatchCache) -> set[str]:
    return {key for key in cache.snapshot().pods if key.startswith(f"{NAMESPACE}/")}


def test_the_cache_follows_pods_and_nodes(cluster: LocalCluster, cache: WatchCache) -> None:
    assert len(cache.snapshot().nodes) >= 12
    cluster.ensure_namespace(NAMESPACE)
    cluster.apply(workload_objects(WorkloadSpec(name="web", namespace=NAMESPACE, replicas=2)))
    cluster.wait_ready(NAMESPACE, "web", 2)
    wait_until(lambda: len(_pods(cache)) == 2, 10, "two pods in the cache")
    snapshot = cache.snapshot()
    pod = snapshot.pods[sorted(_pods(cache))[0]]
    assert pod.workload is not None and pod.workload.kind == "Deployment"  # RS and Deployment too
    # The snapshot keeps pods read before; the watch event's new object must be read again.
    core = client.CoreV1Api(cluster.api_client())
    core.patch_namespaced_pod(pod.name, NAMESPACE, {"metadata": {"labels": {"tier": "front"}}})
    wait_until(
        lambda: cache.snapshot().pods[pod.key].labels.get("tier") == "front",
        10,
        "the new label in the cache",
    )
    apps = client.AppsV1Api(cluster.api_client())
    apps.patch_namespaced_deployment("web", NAMESPACE, {"spec": {"replicas": 3}})
    wait_until(lambda: len(_pods(cache)) == 3, 20, "the third pod in the cache")
    apps.delete_namespaced_deployment("web", NAMESPACE)
    wait_until(lambda: not _pods(cache), 30, "no pods left in the cache")


def _service(cache: WatchCache, endpoints: int) -> Service | None:
    service = cache.snapshot().services.get(f"{NAMESPACE}/api")
    return service if service is not None and len(service.endpoints) == endpoints else None


def _listed(cache: WatchCache, expected: list[Endpoint]) -> bool:
    service = _service(cache, len(expected))
    return service is not None and sorted(service.endpoints, key=str) == expected


def test_the_cache_reads_services_and_the_hints_the_real_controller_writes(
    cluster: LocalCluster, cache: WatchCache
) -> None:
    """The real EndpointSlice controller's slices, read through the cache, and the hints it
    writes for each trafficDistribution: the ones the routing prediction assumes it writes."""
    cluster.ensure_namespace(NAMESPACE)
    cluster.apply(workload_objects(WorkloadSpec(name="api", namespace=NAMESPACE, replicas=3)))
    cluster.wait_ready(NAMESPACE, "api", 3)
    core = client.CoreV1Api(cluster.api_client())
    body = client.V1Service(
        metadata=client.V1ObjectMeta(name="api"),
        spec=client.V1ServiceSpec(selector={"app": "api"}, ports=[client.V1ServicePort(port=80)]),
    )
    core.create_namespaced_service(NAMESPACE, body)
    try:
        wait_until(lambda: _service(cache, 3) is not None, 30, "three endpoints in the cache")
        service = _service(cache, 3)
        assert service is not None and distribution_of(service.traffic_distribution) == "Cluster"
        snapshot = cache.snapshot()
        for endpoint in service.endpoints:
            assert endpoint.pod in snapshot.pods and endpoint.ready
            node = snapshot.nodes[snapshot.pods[endpoint.pod].node_name or ""]
            assert (endpoint.node, endpoint.zone) == (node.name, node.labels[ZONE_LABEL])
            assert (endpoint.zone_hints, endpoint.node_hints) == ((), ())
        for distribution in ("PreferSameZone", "PreferSameNode", "PreferClose"):
            core.patch_namespaced_service(
                "api", NAMESPACE, {"spec": {"trafficDistribution": distribution}}
            )
            expected = sorted(hinted(service.endpoints, distribution_of(distribution)), key=str)
            wait_until(partial(_listed, cache, expected), 30, f"the hints of {distribution}")
    finally:
        core.delete_namespaced_service("api", NAMESPACE)
        client.AppsV1Api(cluster.api_client()).delete_namespaced_deployment("api", NAMESPACE)
