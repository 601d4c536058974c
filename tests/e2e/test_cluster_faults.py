"""Faults of the cluster itself, on the real control plane: the API server restarted mid-cycle
(which also drops every watch), nodes changed while a plan is in flight, a node without topology
labels, the scheduler stopped, the webhook unreachable, and the leader killed between recording a
hint and evicting. None of them may cause a wrong eviction or lose a pod."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from harness.cluster import LocalCluster
from harness.process import free_port, wait_until
from harness.webhook import webhook_configuration
from rebalancer.clients.hints import HintStore
from rebalancer.clients.stores import ConfigMapState
from rebalancer.clients.watch_cache import WatchCache
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.planning.types import Move
from rebalancer.simulator.objects import workload_objects
from rebalancer.simulator.scenario import WorkloadSpec, parse_scenario
from tests.e2e.setups import Setup, before_executing, split_pair_setup

pytestmark = pytest.mark.e2e

NAMESPACE = "cfaults"


@pytest.fixture(scope="module")
def setup(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with split_pair_setup(cluster, NAMESPACE, tmp_path_factory.mktemp("prometheus-cf")) as made:
        yield made


def test_an_api_server_restart_mid_cycle_evicts_nothing_and_the_cache_recovers(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = setup.cluster
    cache = WatchCache(cluster.api_client()).start()
    try:
        assert cache.wait_synced(60)
        before = setup.pair_pods()
        controller = setup.controller("evict")
        controller.snapshots = cache.snapshot
        before_executing(monkeypatch, lambda _moves: cluster.stop_component("kube-apiserver"))
        try:
            mid_cycle = controller.run_cycle()
            monkeypatch.undo()
            # Every watch broke with the server: until they are re-listed, cycles refuse to act.
            wait_until(
                lambda: not all(r.synced.is_set() for r in cache.reflectors), 30, "lost watches"
            )
            while_down = controller.run_cycle()
        finally:
            cluster.start_component("kube-apiserver")
        assert mid_cycle.result == "error" and "state ConfigMap" in mid_cycle.detail
        evictions = controller.metrics.evictions
        assert evictions.labels("evicted", "split-peers")._value.get() == 0
        assert evictions.labels("cancelled", "split-peers")._value.get() >= 1
        assert while_down.result == "error"
        # A cycle reads its state first (to take surges under way a step further), so the
        # server being down is what it says, before the cache could.
        assert while_down.detail.startswith("state ConfigMap: "), while_down.detail
        assert cache.wait_synced(90)
        assert setup.pair_pods() == before
        recovered = setup.controller("dry-run")
        recovered.snapshots = cache.snapshot
        report = recovered.run_cycle()
        assert report.result == "ok", report.detail
        assert {o.result for o in report.outcomes} == {"would-evict"}
    finally:
        cache.stop()


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"metadata": {"labels": {ZONE_LABEL: "zone-gone"}}}, "is no longer in zone="),
        ({"spec": {"unschedulable": True}}, "is not Ready and schedulable any more"),
        (None, "the pod or its planned node is gone"),
    ],
    ids=["relabelled", "cordoned", "deleted"],
)
def test_a_target_node_changed_while_the_plan_is_in_flight_cancels_the_move(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any] | None, why: str
) -> None:
    """`change` is a patch to each planned node, or None to delete it (and make it again)."""
    core = client.CoreV1Api(setup.cluster.api_client())
    originals: dict[str, dict[str, Any]] = {}

    def change_targets(moves: tuple[Move, ...]) -> None:
        for name in sorted({move.node for move in moves}):
            raw: Any = core.read_node(name, _preload_content=False)
            node = json.loads(raw.data)
            originals[name] = {
                "metadata": {"name": name, "labels": node["metadata"]["labels"]},
                "spec": {"unschedulable": None},
                "status": {"allocatable": node["status"]["allocatable"]},
            }
            if change is None:
                core.delete_node(name)
            else:
                core.patch_node(name, change)

    before = setup.pair_pods()
    before_executing(monkeypatch, change_targets)
    try:
        report = setup.controller("evict").run_cycle()
    finally:
        if change is None:
            setup.cluster.add_nodes(list(originals.values()))
        for name, original in originals.items():
            core.patch_node(name, {key: original[key] for key in ("metadata", "spec")})
    assert report.result == "ok", report.detail
    assert report.outcomes and {o.result for o in report.outcomes} == {"cancelled"}
    assert all(why in outcome.detail for outcome in report.outcomes)
    assert setup.pair_pods() == before
    assert len(setup.events("EvictionCancelled")) >= len(report.outcomes)


def test_a_node_without_topology_labels_is_never_a_target(setup: Setup) -> None:
    core = client.CoreV1Api(setup.cluster.api_client())
    name = "unlabelled-1"
    setup.cluster.add_nodes(
        [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {}},
                "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"}},
            }
        ]
    )
    try:
        report = setup.controller("dry-run").run_cycle()
    finally:
        core.delete_node(name)
    assert report.result == "ok", report.detail
    assert report.outcomes
    assert all(o.move.node != name and o.move.destination for o in report.outcomes)


NO_PDB_NAMESPACE = "nosched"


def test_with_the_scheduler_stopped_no_workload_is_evicted_again(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """No PDB guards these workloads: only the controller's own rule keeps it from evicting
    more replicas while the first replacements cannot be scheduled."""
    scenario = parse_scenario(
        f"""
name: no-scheduler
workloads:
  - {{name: client, namespace: {NO_PDB_NAMESPACE}, replicas: 4, start_in: {{zone: zone-a}}}}
  - {{name: server, namespace: {NO_PDB_NAMESPACE}, replicas: 4, start_in: {{zone: zone-b}}}}
traffic:
  - {{source: {NO_PDB_NAMESPACE}/client, destination: {NO_PDB_NAMESPACE}/server,
     routing: even, rate: 90}}
""",
        "no-scheduler",
    )
    with split_pair_setup(cluster, NO_PDB_NAMESPACE, tmp_path, scenario) as setup:
        controller = setup.controller("evict", extra="cooldown: {per_workload_seconds: 0}\n")
        evicted: Counter[str] = Counter()
        settling = 0
        cluster.stop_component("kube-scheduler")
        try:
            for _cycle in range(3):
                report = controller.run_cycle()
                assert report.result == "ok", report.detail
                for outcome in report.outcomes:
                    if outcome.result == "evicted":
                        evicted[str(outcome.move.workload)] += 1
                settling = int(controller.metrics.skips.labels("settling")._value.get())
                time.sleep(1)  # the replacements are created, and stay Pending
        finally:
            cluster.start_component("kube-scheduler")
        assert evicted and max(evicted.values()) == 1, evicted
        assert settling >= 1
        for app in ("client", "server"):
            cluster.wait_ready(NO_PDB_NAMESPACE, app, 4, timeout=90)


def test_pods_are_still_created_while_the_webhook_is_unreachable(cluster: LocalCluster) -> None:
    namespace = "nowebhook"
    cluster.ensure_namespace(namespace)
    name = "unreachable-webhook"
    url = f"https://127.0.0.1:{free_port()}/mutate"  # nothing listens there
    cluster.apply([webhook_configuration(name, url, [namespace])])
    admission = client.AdmissionregistrationV1Api(cluster.api_client())
    try:
        cluster.apply(workload_objects(WorkloadSpec(name="web", namespace=namespace, replicas=2)))
        cluster.wait_ready(namespace, "web", 2, timeout=90)
    finally:
        admission.delete_mutating_webhook_configuration(name)


class Killed(BaseException):
    """The process dying: nothing after it runs, not even an `except Exception`."""


def test_a_leader_killed_between_hint_and_eviction_leaves_no_hint_behind(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs last in this module: its evictions change the placement the tests above rely on."""
    api = setup.cluster.api_client()
    hints = HintStore(api, NAMESPACE, "kill-hints")

    def leader() -> Any:
        controller = setup.controller("migrate")
        controller.hints = hints
        controller.state = ConfigMapState(api, NAMESPACE, "kill-state")
        return controller

    def die(*_args: object, **_kwargs: object) -> None:
        raise Killed

    before = setup.pair_pods()
    monkeypatch.setattr(client.CoreV1Api, "create_namespaced_pod_eviction", die)
    with pytest.raises(Killed):
        leader().run_cycle()
    monkeypatch.undo()
    [orphan] = hints.pending(time.time())
    assert setup.pair_pods() == before

    successor = leader()
    report = successor.run_cycle()
    assert report.result == "ok", report.detail
    assert "evicted" in {o.result for o in report.outcomes}
    awaited = [landing.hint for landing in successor.state.load().landings]
    live = hints.pending(time.time())
    assert orphan not in live
    assert all(hint in awaited for hint in live)
    for app in ("client", "server"):
        setup.cluster.wait_ready(NAMESPACE, app, 3, timeout=90)
