"""Surge migration on the real control plane: a single-replica Deployment whose PDB allows no
disruption is moved make-before-break (the real Deployment and ReplicaSet controllers scale it,
the webhook steers the new pod, the stock scheduler places it), with never fewer Ready pods than
desired; and a controller killed at each step leaves the next leader to finish or undo the surge
within its first cycle, with no Deployment scaled up and no deletion cost or hint left behind."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster, is_ready
from harness.invariants import ReadyWatcher
from harness.live import live_scenario
from harness.process import wait_until
from harness.prometheus import PrometheusServer
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.hints import HintStore
from rebalancer.clients.kube_api import list_raw, read_snapshot
from rebalancer.clients.stores import ConfigMapState, FixedPolicy
from rebalancer.clients.surge import SurgeClient
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.config.policy import parse_policy
from rebalancer.controller.loop import Controller
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.planning.surge import DELETION_COST
from rebalancer.simulator.scenario import parse_scenario
from rebalancer.webhook.server import WebhookServer
from tests.conftest import LIVE_POLICY_YAML
from tests.e2e.setups import serving_webhook

pytestmark = pytest.mark.e2e

KILL_STEPS = (
    "before-hint",
    "before-scale-up",
    "after-scale-up",
    "waiting",
    "after-mark",
    "after-scale-back",
    "scaled-down",
)
"""Where the first controller dies: around each call of a surge, and between cycles."""
NAMESPACES = ("surge", *(f"surge-{step}" for step in KILL_STEPS))
WEBHOOK_CONFIG = "topology-rebalancer-surge-test"
POLICY = """
mode: migrate
migrate: {method: surge, surge: {ready_timeout_seconds: 60}}
scope: {namespaces: {include: [NAMESPACE]}}
persistence: {cycles: 1}
cooldown: {per_workload_seconds: 600}
thresholds: {min_gain: 1, min_gain_ratio: 0}
"""


def _workloads(namespace: str) -> str:
    """A one-replica cache in zone a whose PDB allows no disruption, called by an api in zone b
    that may not move (a StatefulSet whose PDB holds both pods): only a surge moves the cache.
    Small requests: eight of these share the session's nodes with every other test's."""
    return f"""
  - {{name: cache, namespace: {namespace}, replicas: 1, pdb: {{min_available: 1}},
     cpu: 100m, memory: 64Mi, start_in: {{zone: zone-a}}}}
  - {{name: api, namespace: {namespace}, kind: StatefulSet, replicas: 2, cpu: 100m,
     memory: 64Mi, pdb: {{min_available: 2}}, start_in: {{zone: zone-b}}}}"""


SCENARIO = parse_scenario(
    "name: surge-live\nworkloads:"
    + "".join(_workloads(namespace) for namespace in NAMESPACES)
    + "\ntraffic:"
    + "".join(
        f"\n  - {{source: {ns}/api, destination: {ns}/cache, routing: even, rate: 90}}"
        for ns in NAMESPACES
    )
    + "\n",
    "surge-live",
)


class Killed(BaseException):
    """The controller process dying at this point: nothing after it runs."""


@pytest.fixture(scope="module")
def webhook(cluster: LocalCluster) -> Iterator[WebhookServer]:
    with serving_webhook(cluster, list(NAMESPACES), WEBHOOK_CONFIG) as server:
        yield server


@pytest.fixture(scope="module")
def prometheus(
    cluster: LocalCluster, webhook: WebhookServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusServer]:
    with live_scenario(cluster, SCENARIO, tmp_path_factory.mktemp("prometheus-surge")) as live:
        yield live[1]


def _controller(
    cluster: LocalCluster, webhook: WebhookServer, prometheus: PrometheusServer, namespace: str
) -> Controller:
    """A fresh controller process, as a new leader would be: same state, its own identity."""
    api = cluster.api_client()
    text = LIVE_POLICY_YAML + POLICY.replace("NAMESPACE", namespace)
    return Controller(
        api=api,
        snapshots=lambda: read_snapshot(api),
        prometheus_url=prometheus.url,
        policies=FixedPolicy(parse_policy(text, "surge policy")),
        state=ConfigMapState(api, namespace, "state"),
        metrics=ControllerMetrics(CollectorRegistry()),
        recorder=EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC)),
        hints=webhook.hints,
    )


def _cache_pods(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    core = client.CoreV1Api(cluster.api_client())
    return list_raw(
        "Pod",
        lambda **kw: core.list_namespaced_pod(namespace, label_selector="app=cache", **kw),
    )


def _serving(cluster: LocalCluster, namespace: str) -> int:
    """Ready cache pods not terminating: what can serve."""
    return sum(is_ready(pod) for pod in _cache_pods(cluster, namespace))


def _replicas(cluster: LocalCluster, namespace: str) -> int:
    apps = client.AppsV1Api(cluster.api_client())
    scale: Any = apps.read_namespaced_deployment_scale("cache", namespace)
    return int(scale.spec.replicas)


def _zone_of(cluster: LocalCluster, pod: dict[str, Any]) -> str:
    nodes = read_snapshot(cluster.api_client()).nodes
    return nodes[pod["spec"]["nodeName"]].labels[ZONE_LABEL]


def _nothing_left_behind(cluster: LocalCluster, webhook: WebhookServer, namespace: str) -> None:
    """No pod that stays carries the deletion cost, and no hint waits for a new pod."""
    wait_until(
        lambda: (
            not any(
                (p["metadata"].get("annotations") or {}).get(DELETION_COST)
                for p in _cache_pods(cluster, namespace)
                if not p["metadata"].get("deletionTimestamp")
            )
        ),
        20,
        "the marked pod gone, or unmarked",
    )
    assert [h for h in webhook.hints.pending(time.time()) if h.namespace == namespace] == []


def test_a_surge_moves_a_single_replica_without_a_moment_below_desired(
    cluster: LocalCluster, webhook: WebhookServer, prometheus: PrometheusServer
) -> None:
    namespace = NAMESPACES[0]
    [old] = [p for p in _cache_pods(cluster, namespace) if is_ready(p)]
    assert _zone_of(cluster, old) == "zone-a"
    watcher = ReadyWatcher(SCENARIO, cluster.api_client()).start()
    controller = _controller(cluster, webhook, prometheus, namespace)
    try:
        report = controller.run_cycle()
        assert report.result == "ok", report.detail
        assert [o.result for o in report.outcomes] == ["surged"]

        def completed() -> bool:
            assert controller.run_cycle().result == "ok"
            return not controller.state.load().surges

        wait_until(completed, 60, "the surge ended")
        assert controller.metrics.surges.labels("completed")._value.get() == 1
        wait_until(lambda: len(_cache_pods(cluster, namespace)) == 1, 30, "the old pod gone")
    finally:
        watcher.stop()
    [new] = _cache_pods(cluster, namespace)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert _zone_of(cluster, new) == "zone-b"
    assert _replicas(cluster, namespace) == 1
    # the desired count at every 50 ms sample of a pod watch, and both pods serving while the
    # new one was Ready and the old one not yet gone
    cache = f"{namespace}/cache"
    samples, below, least, _relists = watcher.figures()
    assert samples > 0 and below.get(cache, 0) == 0 and least[cache] == 1
    assert watcher.most[cache] == 2
    assert controller.state.load().surges == []
    _nothing_left_behind(cluster, webhook, namespace)
    core = client.CoreV1Api(cluster.api_client())
    events = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={old['metadata']['name']}"
    )
    assert {"SurgeStarted", "SurgeCompleted"} <= {e.reason for e in events.items}


def _kill_at(step: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the surge's call at `step` the process's last."""
    scale: Callable[..., None] = SurgeClient._scale

    def killing_scale(self: SurgeClient, record: Any, expected: int, replicas: int) -> None:
        up = replicas > expected
        if step == "before-scale-up" and up:
            raise Killed
        scale(self, record, expected, replicas)
        if (step == "after-scale-up" and up) or (step == "after-scale-back" and not up):
            raise Killed

    def killing_add(*_args: Any) -> None:
        raise Killed

    mark: Callable[..., None] = SurgeClient.mark_old_pod

    def killing_mark(self: SurgeClient, record: Any) -> None:
        mark(self, record)
        raise Killed

    monkeypatch.setattr(SurgeClient, "_scale", killing_scale)
    if step == "before-hint":
        monkeypatch.setattr(HintStore, "add", killing_add)
    if step == "after-mark":
        monkeypatch.setattr(SurgeClient, "mark_old_pod", killing_mark)


def _new_pod_ready(cluster: LocalCluster, namespace: str) -> bool:
    return _serving(cluster, namespace) == 2


@pytest.mark.parametrize("step", KILL_STEPS)
def test_a_controller_killed_mid_surge_leaves_the_next_leader_to_finish_or_undo_it(
    cluster: LocalCluster,
    webhook: WebhookServer,
    prometheus: PrometheusServer,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    namespace = f"surge-{step}"
    first = _controller(cluster, webhook, prometheus, namespace)
    with monkeypatch.context() as patched:
        _kill_at(step, patched)
        if step in {"before-hint", "before-scale-up", "after-scale-up"}:
            with pytest.raises(Killed):
                first.run_cycle()
        else:
            assert [o.result for o in first.run_cycle().outcomes] == ["surged"]
            if step != "waiting":
                wait_until(lambda: _new_pod_ready(cluster, namespace), 30, "the new pod Ready")
                if step == "scaled-down":
                    assert first.run_cycle().result == "ok"
                    assert first.state.load().surges[0].phase == "scaled-down"
                else:
                    with pytest.raises(Killed):
                        first.run_cycle()
    [record] = first.state.load().surges
    leader = _controller(cluster, webhook, prometheus, namespace)
    report = leader.run_cycle()
    assert report.result == "ok", report.detail
    assert report.outcomes == ()  # it backs off; no new surge over the one it took over
    assert _replicas(cluster, namespace) == record.replicas == 1
    ended = leader.state.load().surges
    if ended:  # scaled back in this cycle: the old pod's removal is checked in the next
        assert [r.phase for r in ended] == ["scaled-down"]
        wait_until(
            lambda: leader.run_cycle().result == "ok" and not leader.state.load().surges,
            30,
            "the surge ended",
        )
    _nothing_left_behind(cluster, webhook, namespace)
    cluster.wait_ready(namespace, "cache", 1)
