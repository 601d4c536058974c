"""Migrate mode asks where the scheduler would put a steered replacement before it moves a pod,
and the real kube-scheduler, through the real webhook, agrees. On four nodes of the test's own
(tainted for its pods, which select them): four workers fill most of one host in zone x and the
fifth, in zone y, talks with them. Steered to their host, its replacement would still go back
to zone y: the hint's preferred affinity is one score, and spreading away from its siblings and
least allocated outweigh it there. The controller moves nothing and says where it would land;
with the check off, it moves the worker, and the real scheduler puts the steered replacement in
the zone predicted, not on the host it was steered to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from harness.cluster import LocalCluster
from harness.process import wait_until
from harness.prometheus import PrometheusServer
from rebalancer.config.policy import parse_policy
from rebalancer.simulator.objects import node_object, workload_objects
from rebalancer.simulator.scenario import NodeSpec, parse_scenario
from rebalancer.webhook.server import WebhookServer
from tests.conftest import LIVE_POLICY_YAML
from tests.e2e.setups import (
    landing_skips,
    namespace_pods,
    node_zone,
    served_on_own_nodes,
    serving_webhook,
    steering_controller,
    tolerating,
)

pytestmark = pytest.mark.e2e

NAMESPACE = "mland"
TAINT = {"key": "topology-rebalancer.test/mland", "value": "x", "effect": "NoSchedule"}
POOL = {"pool": "mland"}
NODES = [
    NodeSpec(name=f"mland-{zone}{n}", zone=f"zone-{zone}", rack=f"rack-{zone}{n}", labels=POOL)
    for zone in "xy"
    for n in (1, 2)
]
CROWDED = "mland-x1"
SCENARIO = parse_scenario(
    f"""
name: migrate-landing
workloads:
  - {{name: worker, namespace: {NAMESPACE}, replicas: 5, cpu: 1500m, memory: 6Gi,
     pdb: {{min_available: 1}}, node_selector: {{pool: mland}}}}
traffic:
  - {{source: {NAMESPACE}/worker, destination: {NAMESPACE}/worker, rate: 40}}
""",
    "migrate-landing",
)
POLICY = f"""
mode: migrate
scope: {{namespaces: {{include: [{NAMESPACE}]}}}}
persistence: {{cycles: 1}}
cooldown: {{per_workload_seconds: 0}}
thresholds: {{min_gain: 1, min_gain_ratio: 0}}
protections: {{min_spread: {{domains: 1}}}}
strategies: [{{name: split-peers, args: {{level: host}}}}]
"""


@pytest.fixture(scope="module")
def webhook(cluster: LocalCluster) -> Iterator[WebhookServer]:
    with serving_webhook(cluster, [NAMESPACE], "topology-rebalancer-test-mland") as server:
        yield server


@pytest.fixture(scope="module")
def prometheus(
    cluster: LocalCluster, webhook: WebhookServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    cluster.add_nodes([{**node_object(n), "spec": {"taints": [TAINT]}} for n in NODES])
    (workload,) = SCENARIO.workloads
    objects = tolerating(workload_objects(workload), TAINT)
    apps = client.AppsV1Api(cluster.api_client())
    # Four workers on the crowded host, then the fifth in zone y.
    with cluster.only_schedulable({"host": CROWDED}):
        for obj in objects:
            if obj["kind"] == "Deployment":
                obj["spec"]["replicas"] = 4
        cluster.apply(objects)
        cluster.wait_ready(NAMESPACE, workload.name, 4, 90)
    with cluster.only_schedulable({"host": "mland-y1"}):
        apps.patch_namespaced_deployment_scale(workload.name, NAMESPACE, {"spec": {"replicas": 5}})
        cluster.wait_ready(NAMESPACE, workload.name, 5, 90)
    workdir = tmp_path_factory.mktemp("prometheus-mland")
    with served_on_own_nodes(cluster, SCENARIO, NODES, workdir) as server:
        yield server


def test_migrate_mode_moves_nothing_the_real_scheduler_would_land_elsewhere(
    cluster: LocalCluster, webhook: WebhookServer, prometheus: PrometheusServer
) -> None:
    lone = next(p for p in namespace_pods(cluster, NAMESPACE) if p["spec"]["nodeName"] != CROWDED)
    lone_name = lone["metadata"]["name"]
    checked = steering_controller(
        cluster, prometheus.url, LIVE_POLICY_YAML + POLICY, NAMESPACE, webhook
    )
    report = checked.run_cycle()
    assert report.result == "ok", report.detail
    assert report.outcomes == ()
    skipped = landing_skips(
        parse_policy(LIVE_POLICY_YAML + POLICY, "test policy"), cluster, prometheus.url
    )
    reason = skipped[f"{NAMESPACE}/{lone_name}"]
    assert reason.startswith(f"its replacement, steered to zone-x/rack-x1/{CROWDED}, would")
    predicted = reason.split(" land on ", 1)[1].split(",", 1)[0]
    assert node_zone(cluster, predicted) == "zone-y", reason

    # With the check off the worker is moved, and its steered replacement lands where the
    # real scheduler scores highest: where predicted, not on the host it was steered to.
    unchecked = steering_controller(
        cluster,
        prometheus.url,
        LIVE_POLICY_YAML + POLICY + "migrate: {predict_landing: false}\n",
        NAMESPACE,
        webhook,
    )
    before = {p["metadata"]["name"] for p in namespace_pods(cluster, NAMESPACE)}
    report = unchecked.run_cycle()
    assert report.result == "ok", report.detail
    assert [o.move.pod for o in report.outcomes if o.result == "evicted"] == [
        f"{NAMESPACE}/{lone_name}"
    ]

    def replacement() -> str | None:
        for p in namespace_pods(cluster, NAMESPACE):
            steered = p["spec"].get("affinity", {}).get("nodeAffinity", {})
            if p["metadata"]["name"] not in before and p["spec"].get("nodeName"):
                assert steered.get("preferredDuringSchedulingIgnoredDuringExecution"), p["spec"]
                return str(p["spec"]["nodeName"])
        return None

    wait_until(lambda: replacement() is not None, 60, "the worker's replacement to be scheduled")
    landed = replacement()
    assert landed is not None and landed != CROWDED
    assert node_zone(cluster, landed) == "zone-y", landed
