"""The watch cache follows the real API server: new pods appear, deleted ones go, without a LIST."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from harness.cluster import LocalCluster
from harness.process import wait_until
from rebalancer.clients.watch_cache import WatchCache
from rebalancer.simulator.scenario import WorkloadSpec, workload_objects

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
