"""Evict mode asks where the scheduler would put a replacement before it evicts, and the real
kube-scheduler agrees. On six nodes of the test's own (tainted for its pods, which select
them): a client in zone x talks to a server in zone y, whose nodes the server fills; zone z is
empty. Evicted, a client's replacement goes to zone z under the default profile (least
allocated, spread away from its sibling), not to the server's zone: the controller evicts
nothing and says where it would have landed. The test then evicts that client itself, and the
real scheduler puts the replacement in the zone predicted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster
from harness.process import wait_until
from harness.prometheus import PrometheusServer
from rebalancer.simulator.objects import node_object, workload_objects
from rebalancer.simulator.scenario import NodeSpec, parse_scenario
from tests.e2e.setups import (
    Setup,
    landing_skips,
    namespace_pods,
    node_zone,
    served_on_own_nodes,
    tolerating,
)

pytestmark = pytest.mark.e2e

NAMESPACE = "landing"
TAINT = {"key": "topology-rebalancer.test/landing", "value": "x", "effect": "NoSchedule"}
POOL = {"pool": "landing"}
"""On the six nodes, and selected by the pods: the shared nodes are out of their way, and they
out of the shared nodes'."""
NODES = [
    NodeSpec(name=f"land-{zone}{n}", zone=f"zone-{zone}", rack=f"rack-{zone}{n}", labels=POOL)
    for zone in "xyz"
    for n in (1, 2)
]
SCENARIO = parse_scenario(
    f"""
name: landing
workloads:
  - {{name: client, namespace: {NAMESPACE}, replicas: 2, pdb: {{min_available: 1}},
     start_in: {{zone: zone-x}}, node_selector: {{pool: landing}}}}
  - {{name: server, namespace: {NAMESPACE}, replicas: 2, cpu: "6", start_in: {{zone: zone-y}},
     node_selector: {{pool: landing}}}}
traffic:
  - {{source: {NAMESPACE}/client, destination: {NAMESPACE}/server, rate: 60}}
""",
    "landing",
)


@pytest.fixture(scope="module")
def prometheus(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    cluster.add_nodes([{**node_object(n), "spec": {"taints": [TAINT]}} for n in NODES])
    cluster.ensure_namespace(NAMESPACE)
    for workload in SCENARIO.workloads:
        with cluster.only_schedulable(workload.start_in):
            cluster.apply(tolerating(workload_objects(workload), TAINT))
            cluster.wait_ready(NAMESPACE, workload.name, workload.replicas, 90)
    workdir = tmp_path_factory.mktemp("prometheus-landing")
    with served_on_own_nodes(cluster, SCENARIO, NODES, workdir) as server:
        yield server


def test_evict_mode_evicts_nothing_the_real_scheduler_would_land_elsewhere(
    cluster: LocalCluster, prometheus: PrometheusServer
) -> None:
    registry = CollectorRegistry()
    setup = Setup(cluster, prometheus, SCENARIO, NAMESPACE)
    controller = setup.controller(
        "evict",
        extra="cooldown: {per_workload_seconds: 0}\n",
        registry=registry,
        predict_landing=True,
    )
    policy, _reloaded = controller.policies.current()
    api = cluster.api_client()
    report = controller.run_cycle()
    assert report.result == "ok", report.detail
    assert report.outcomes == ()
    skipped_landing = {"category": "landing"}
    assert registry.get_sample_value(
        "topology_rebalancer_skipped_candidates_total", skipped_landing
    )

    skipped = landing_skips(policy, cluster, prometheus.url)
    clients = {k: v for k, v in skipped.items() if k.startswith(f"{NAMESPACE}/client")}
    assert clients, skipped
    pod, reason = sorted(clients.items())[0]
    predicted = reason.split(" land on ", 1)[1].split(",", 1)[0]
    assert node_zone(cluster, predicted) == "zone-z", reason

    # Evicted all the same, the pod's replacement goes where the real scheduler puts it.
    core = client.CoreV1Api(api)
    name = pod.split("/", 1)[1]
    before = {p["metadata"]["name"] for p in namespace_pods(cluster, NAMESPACE)}
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=NAMESPACE))
    core.create_namespaced_pod_eviction(name, NAMESPACE, eviction)

    def replacement() -> str | None:
        for p in namespace_pods(cluster, NAMESPACE):
            fresh = (
                p["metadata"]["name"] not in before and p["metadata"]["labels"]["app"] == "client"
            )
            if fresh and p["spec"].get("nodeName"):
                return str(p["spec"]["nodeName"])
        return None

    wait_until(lambda: replacement() is not None, 60, "the client's replacement to be scheduled")
    landed = replacement()
    assert landed is not None and node_zone(cluster, landed) == node_zone(cluster, predicted), (
        landed
    )
