"""Migrate mode on the real control plane: the webhook steers each replacement into the planned
zone, through the stock kube-scheduler, and cross-zone traffic falls; a chain moves together."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster
from harness.exporter import ClusterTraffic
from harness.live import live_scenario
from harness.process import wait_until
from harness.prometheus import PrometheusServer
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.kube_api import list_raw, read_snapshot
from rebalancer.clients.stores import ConfigMapState, FixedPolicy
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.config.policy import parse_policy
from rebalancer.controller.loop import Controller
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.planning.landing import Hint, Landing
from rebalancer.planning.state import PlannerState
from rebalancer.simulator.objects import workload_objects
from rebalancer.simulator.scenario import PdbSpec, WorkloadSpec, parse_scenario
from rebalancer.webhook.server import WebhookServer
from tests.conftest import LIVE_POLICY_YAML, split_pair_scenario
from tests.e2e.setups import serving_webhook, steering_controller, zones_of

pytestmark = pytest.mark.e2e

NAMESPACE = "mig"


def _policy(namespace: str) -> str:
    return f"""
mode: migrate
scope: {{namespaces: {{include: [{namespace}]}}}}
persistence: {{cycles: 1}}
cooldown: {{per_workload_seconds: 0}}
thresholds: {{min_gain: 1, min_gain_ratio: 0}}
"""


POLICY = _policy(NAMESPACE)
WEBHOOK_CONFIG = "topology-rebalancer-test"
CHAIN = "chain"
CHAIN_SCENARIO = f"""
name: chain-live
workloads:
  - {{name: frontend, namespace: {CHAIN}, replicas: 1, start_in: {{zone: zone-b}}}}
  - {{name: search, namespace: {CHAIN}, replicas: 2, pdb: {{min_available: 1}},
     start_in: {{zone: zone-a}}}}
  - {{name: geo, namespace: {CHAIN}, replicas: 2, pdb: {{min_available: 1}},
     start_in: {{zone: zone-a}}}}
traffic:
  - {{source: {CHAIN}/frontend, destination: {CHAIN}/search, routing: even, rate: 40}}
  - {{source: {CHAIN}/search, destination: {CHAIN}/geo, routing: pinned, rate: 40}}
"""
# The frontend has one replica, so it is protected and stays in zone b. Each search pod sends
# 20 to its geo pod and gets 20 from the frontend: alone it would trade one crossing for the
# other, and geo's traffic all stays in its zone.
CHAIN_POLICY = _policy(CHAIN) + "strategies: [{name: split-peers, args: {level: zone}}]\n"


@pytest.fixture(scope="module")
def webhook(cluster: LocalCluster) -> Iterator[WebhookServer]:
    with serving_webhook(cluster, [NAMESPACE, CHAIN], WEBHOOK_CONFIG) as server:
        yield server


@pytest.fixture(scope="module")
def live(
    cluster: LocalCluster, webhook: WebhookServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterTraffic, PrometheusServer]]:
    scenario = split_pair_scenario(NAMESPACE)
    with live_scenario(cluster, scenario, tmp_path_factory.mktemp("prometheus-mig")) as running:
        yield running


def test_replacements_land_in_the_planned_zone(
    cluster: LocalCluster, webhook: WebhookServer, live: tuple[ClusterTraffic, PrometheusServer]
) -> None:
    truth, prometheus = live
    hints = webhook.hints
    controller = steering_controller(
        cluster, prometheus.url, LIVE_POLICY_YAML + POLICY, NAMESPACE, webhook
    )
    before = truth.true_crossing()["zone"]
    landed = elsewhere = 0
    for _cycle in range(8):
        zones_before = {app: zones_of(cluster, NAMESPACE, app) for app in ("client", "server")}
        report = controller.run_cycle()
        assert report.result == "ok", report.detail
        moves = [o.move for o in report.outcomes if o.result == "evicted"]
        if not moves:
            break
        for app in ("client", "server"):
            cluster.wait_ready(NAMESPACE, app, 3)
            cluster.wait_pdb(NAMESPACE, app, allowed=1)
        for move in moves:
            app = "client" if "/client-" in move.pod else "server"
            new = {
                n: z
                for n, z in zones_of(cluster, NAMESPACE, app).items()
                if n not in zones_before[app]
            }
            if move.destination["zone"] in new.values():
                landed += 1
            else:
                elsewhere += 1
        time.sleep(11)  # let the 10 s rate window fill with the replacements' traffic
    assert hints.pending(time.time()) == []  # every hint was consumed by a replacement
    # the cycle that found nothing more to do judged the last replacements too
    assert controller.metrics.landings.labels("landed-in-target")._value.get() == landed
    assert controller.state.load().landings == []
    after = truth.true_crossing()["zone"]
    print(
        f"migrate: cross-zone {before:.1f} -> {after:.1f} flows/s; "
        f"landed {landed}, elsewhere {elsewhere}"
    )
    assert landed + elsewhere > 0
    assert landed / (landed + elsewhere) >= 0.9
    assert after < before


@pytest.mark.parametrize("mode", ["migrate", "dry-run"])
def test_a_replacement_pending_past_a_required_hint_is_released_unless_in_dry_run(
    cluster: LocalCluster,
    webhook: WebhookServer,
    live: tuple[ClusterTraffic, PrometheusServer],
    mode: str,
) -> None:
    """The release goes through the one eviction path: with the mode's dry-run flag (in
    dry-run the pod stays, and only a WouldRelease Event says what would have been done), the
    UID precondition, and an Event."""
    api = cluster.api_client()
    apps = client.AppsV1Api(api)
    name = f"stuck-{mode}"
    # A budget that allows no disruption: only because the pod is Pending may it be evicted.
    stuck = WorkloadSpec(name=name, namespace=NAMESPACE, replicas=1, pdb=PdbSpec(min_available=1))
    deployment, budget = workload_objects(stuck)
    deployment["spec"]["template"]["spec"]["nodeSelector"] = {ZONE_LABEL: "zone-nowhere"}
    cluster.apply([deployment, budget])
    core = client.CoreV1Api(api)

    def pending_pods() -> list[dict[str, Any]]:
        return [
            p
            for p in list_raw(
                "Pod",
                lambda **kw: core.list_namespaced_pod(
                    NAMESPACE, label_selector=f"app={name}", **kw
                ),
            )
            if not p["metadata"].get("deletionTimestamp")
        ]

    def reasons_on(pod_name: str) -> set[str]:
        events = core.list_namespaced_event(
            NAMESPACE, field_selector=f"involvedObject.name={pod_name}"
        )
        return {event.reason or "" for event in events.items}

    wait_until(lambda: len(pending_pods()) == 1, 30, "the stuck pod")
    [pod] = pending_pods()
    owner = pod["metadata"]["ownerReferences"][0]
    hint = Hint(
        namespace=NAMESPACE,
        owner_kind=owner["kind"],
        owner_name=owner["name"],
        workload=f"Deployment/{NAMESPACE}/{name}",
        domain={ZONE_LABEL: "zone-nowhere"},
        expires=1.0,
        required=True,
    )
    landing = Landing(hint=hint, evicted_pod=f"{NAMESPACE}/gone", evicted_at=0.0)
    policy = (LIVE_POLICY_YAML + POLICY).replace("mode: migrate", f"mode: {mode}")
    controller = Controller(
        api=api,
        snapshots=lambda: read_snapshot(api),
        prometheus_url=live[1].url,
        policies=FixedPolicy(parse_policy(policy, f"{mode} policy")),
        state=ConfigMapState(api, NAMESPACE, f"release-state-{mode}"),
        metrics=ControllerMetrics(CollectorRegistry()),
        recorder=EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC)),
        hints=webhook.hints,
    )
    controller.state.save(PlannerState(landings=[landing]))
    report = controller.run_cycle()
    assert report.result == "ok", report.detail
    assert controller.metrics.landings.labels("not-scheduled")._value.get() == 1
    stuck_name = pod["metadata"]["name"]
    if mode == "dry-run":
        wait_until(lambda: "WouldRelease" in reasons_on(stuck_name), 30, "a WouldRelease Event")
        time.sleep(2)  # a real eviction would have marked the pod for deletion by now
        [still] = pending_pods()
        assert still["metadata"]["uid"] == pod["metadata"]["uid"]
        assert "Released" not in reasons_on(stuck_name)
    else:
        wait_until(
            lambda: stuck_name not in {p["metadata"]["name"] for p in pending_pods()},
            30,
            "the stuck pod released",
        )
        assert "Released" in reasons_on(stuck_name)
    apps.delete_namespaced_deployment(name, NAMESPACE)
    client.PolicyV1Api(api).delete_namespaced_pod_disruption_budget(name, NAMESPACE)


@pytest.fixture(scope="module")
def chain_live(
    cluster: LocalCluster, webhook: WebhookServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterTraffic, PrometheusServer]]:
    scenario = parse_scenario(CHAIN_SCENARIO, "chain-live")
    with live_scenario(cluster, scenario, tmp_path_factory.mktemp("prometheus-chain")) as running:
        yield running


def test_a_chain_moves_together_into_its_caller_s_zone(
    cluster: LocalCluster,
    webhook: WebhookServer,
    chain_live: tuple[ClusterTraffic, PrometheusServer],
) -> None:
    truth, prometheus = chain_live
    controller = steering_controller(
        cluster, prometheus.url, LIVE_POLICY_YAML + CHAIN_POLICY, CHAIN, webhook
    )
    before = truth.true_crossing()["zone"]
    search, geo = f"Deployment/{CHAIN}/search", f"Deployment/{CHAIN}/geo"
    cycles = searches = 0
    for _cycle in range(4):
        report = controller.run_cycle()
        assert report.result == "ok", report.detail
        moves = [o.move for o in report.outcomes if o.result == "evicted"]
        if not moves:
            break
        assert {m.destination["zone"] for m in moves} == {"zone-b"}
        assert {m.workload for m in moves} <= {search, geo}
        if cycles == 0:
            # A chain is one decision: its pods go in the same cycle, into the same zone, as a
            # joint move of the target placement (whose reason names the partner). Later
            # cycles may move single pods: a replacement takes a new name, and the exporter
            # pairs pinned pods by name, so the search pod left may now call the moved geo.
            assert {m.workload for m in moves} == {search, geo}
            assert all(" and " in m.reason for m in moves), [m.reason for m in moves]
        cycles += 1
        searches += sum(m.workload == search for m in moves)
        for app in ("search", "geo"):
            cluster.wait_ready(CHAIN, app, 2)
            cluster.wait_pdb(CHAIN, app, allowed=1)
        time.sleep(11)  # let the 10 s rate window fill with the replacements' traffic
    after = truth.true_crossing()["zone"]
    print(f"chain: cross-zone {before:.1f} -> {after:.1f} flows/s in {cycles} cycle(s)")
    assert cycles >= 1
    assert set(zones_of(cluster, CHAIN, "frontend").values()) == {"zone-b"}
    moved = sum(zone == "zone-b" for zone in zones_of(cluster, CHAIN, "search").values())
    assert moved == searches
    assert after < before
