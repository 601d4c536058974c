"""The controller on the real control plane, a real Prometheus and the ground-truth exporter:
dry-run evicts nothing and says what it would do; evict mode moves the planned pods, never breaks
a PDB, leaves a moved workload alone (also after a restart), and acts on no data at all; a state
too large for a ConfigMap is still saved."""

from __future__ import annotations

import datetime
import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from kubernetes import client

from harness.cluster import LocalCluster
from harness.exporter import ClusterTraffic
from harness.process import free_port, wait_until
from harness.scrape import scrape, total
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.eviction import EvictionExecutor
from rebalancer.clients.stores import POLICY_KEY, STATE_KEY, ConfigMapPolicy, ConfigMapState
from rebalancer.cluster.topology import Domain
from rebalancer.cost.figures import SECONDS_PER_MONTH
from rebalancer.planning.state import PlannerState
from rebalancer.planning.target import STRATEGY as TARGET_PLACEMENT
from rebalancer.planning.types import Move
from rebalancer.strategies.framework import Candidate
from tests.conftest import LIVE_POLICY_YAML
from tests.e2e.setups import Setup, split_pair_setup

pytestmark = pytest.mark.e2e

NAMESPACE = "ctl"


@pytest.fixture(scope="module")
def setup(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with split_pair_setup(cluster, NAMESPACE, tmp_path_factory.mktemp("prometheus-ctl")) as made:
        yield made


def test_dry_run_evicts_nothing_and_records_would_evict(setup: Setup) -> None:
    before = setup.pod_names("client") | setup.pod_names("server")
    controller = setup.controller("dry-run")
    would_evict = 0
    for _cycle in range(3):
        report = controller.run_cycle()
        assert report.result == "ok", report.detail
        assert report.outcomes and {o.result for o in report.outcomes} == {"would-evict"}
        would_evict += len(report.outcomes)
    assert setup.pod_names("client") | setup.pod_names("server") == before
    events = setup.events("WouldEvict")
    assert len(events) == would_evict
    # The target placement moves the pair: its strategy names every move, the split-peers
    # candidates for the same pods being skipped for it.
    assert all(TARGET_PLACEMENT in e["message"] and "target zone=" in e["message"] for e in events)
    registry = controller.metrics.evictions
    assert registry.labels("would-evict", TARGET_PLACEMENT)._value.get() == would_evict


def test_server_side_dry_run_reports_a_pdb_refusal(setup: Setup) -> None:
    """The planner saw a budget that is gone by the time of the eviction: the API server says so."""
    api = setup.cluster.api_client()
    policy_api = client.PolicyV1Api(api)
    policy_api.patch_namespaced_pod_disruption_budget(
        "client", NAMESPACE, {"spec": {"minAvailable": 3}}
    )
    try:
        setup.cluster.wait_pdb(NAMESPACE, "client", allowed=0)
        pod = sorted(setup.pod_names("client"))[0]
        move = Move(
            pod=f"{NAMESPACE}/{pod}",
            workload=None,
            origin={},
            target=Domain(0, ("zone-b",)),
            destination={"zone": "zone-b"},
            node="node-b11",
            target_labels={"topology.kubernetes.io/zone": "zone-b"},
            controller=None,
            gain=1.0,
            strategy="split-peers",
            reason="test",
        )
        recorder = EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC))
        [outcome] = EvictionExecutor(api, recorder, dry_run=True).execute((move,))
        assert outcome.result == "refused-by-pdb"
        assert pod in setup.pod_names("client")
    finally:
        policy_api.patch_namespaced_pod_disruption_budget(
            "client", NAMESPACE, {"spec": {"minAvailable": 2}}
        )
        setup.cluster.wait_pdb(NAMESPACE, "client", allowed=1)


class PdbWatcher:
    """Polls the ready pods of each workload and records the lowest count ever seen."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self.lowest = {"client": 3, "server": 3}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.stop.is_set():
            for app in self.lowest:
                self.lowest[app] = min(self.lowest[app], len(self.setup.pod_names(app)))
            self.stop.wait(0.05)

    def __enter__(self) -> PdbWatcher:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()


def test_evict_mode_moves_pods_keeps_pdbs_and_respects_cooldown(setup: Setup) -> None:
    before = {app: setup.pod_names(app) for app in ("client", "server")}
    with PdbWatcher(setup) as watcher:
        first = setup.controller("evict")
        report = first.run_cycle()
        assert report.result == "ok", report.detail
        done = [o.move for o in report.outcomes if o.result == "evicted"]
        evicted = {move.pod.split("/")[1] for move in done}
        assert evicted
        # evict mode steers nothing but still waits to judge where each replacement lands
        awaited = first.state.load().landings
        assert sorted(landing.evicted_pod for landing in awaited) == sorted(m.pod for m in done)
        assert not any(landing.hint.required for landing in awaited)
        for app in ("client", "server"):
            setup.cluster.wait_ready(NAMESPACE, app, 3)
        bounces = {(m.workload, m.destination["zone"], m.origin["zone"]) for m in done}
        # The next cycle, and a new controller after a "restart", plan no move that undoes
        # those. They plan in dry-run, so the later tests still find the pair split.
        followers = (setup.controller("dry-run"), setup.controller("dry-run"))
        for number, controller in enumerate(followers):
            again = controller.run_cycle()
            assert again.result == "ok", again.detail
            for outcome in again.outcomes:
                move = outcome.move
                for workload, entered, left in bounces:
                    if move.workload == workload:
                        assert move.origin["zone"] != entered, move
                        assert move.destination.get("zone") != left, move
            if number == 0:
                judged = sum(
                    controller.metrics.landings.labels(result)._value.get()
                    for result in ("landed-in-target", "landed-elsewhere")
                )
                assert judged == len(done)
    assert all(lowest >= 2 for lowest in watcher.lowest.values()), watcher.lowest
    after = setup.pod_names("client") | setup.pod_names("server")
    assert not evicted & after
    assert (before["client"] | before["server"]) - after == evicted


def test_no_prometheus_means_no_evictions(setup: Setup) -> None:
    before = setup.pod_names("client") | setup.pod_names("server")
    controller = setup.controller("evict", prometheus_url=f"http://127.0.0.1:{free_port()}")
    report = controller.run_cycle()
    assert report.result == "skipped-no-data"
    assert report.outcomes == ()
    assert "unreachable" in report.detail
    assert controller.metrics.traffic_failures.labels("unreachable")._value.get() == 1
    assert setup.pod_names("client") | setup.pod_names("server") == before


def test_run_once_from_the_command_line_logs_json(setup: Setup, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(LIVE_POLICY_YAML + setup.acting + "mode: dry-run\n")
    command = setup.run_command(policy, "cli-state", 0, "--once")
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    assert any(line["message"].startswith("would-evict ") for line in lines)
    assert lines[-1]["message"].startswith("cycle ok")


def test_run_once_without_prometheus_exits_3_with_one_line(setup: Setup, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(LIVE_POLICY_YAML + setup.acting + "mode: evict\n")
    before = setup.pod_names("client") | setup.pod_names("server")
    command = setup.run_command(policy, "cli-state", 0, "--once")
    command[command.index("--prometheus") + 1] = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 3, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last.startswith("rebalancer: cycle skipped-no-data: unreachable: "), last
    assert "Traceback" not in done.stderr
    assert setup.pod_names("client") | setup.pod_names("server") == before


def _scrape(port: int) -> dict[str, float]:
    """leader and the number of cycles run, from a replica's /metrics."""
    samples = scrape(port)
    return {
        "leader": total(samples, "topology_rebalancer_leader"),
        "cycles": total(samples, "topology_rebalancer_cycles_total"),
    }


def test_only_the_leader_acts_and_a_standby_takes_over(setup: Setup, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(LIVE_POLICY_YAML + setup.acting + "mode: dry-run\ninterval_seconds: 2\n")
    ports = {"a": free_port(), "b": free_port()}
    replicas = {
        name: subprocess.Popen(
            setup.run_command(
                policy,
                "ha-state",
                port,
                "--leader-elect",
                "--lease",
                f"{NAMESPACE}/rebalancer-leader",
                "--identity",
                f"replica-{name}",
            ),
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / f"{name}.log").open("w"),
        )
        for name, port in ports.items()
    }
    try:
        wait_until(lambda: sum(_scrape(p)["leader"] for p in ports.values()) == 1, 60, "a leader")
        leader = next(n for n, p in ports.items() if _scrape(p)["leader"] == 1)
        standby = next(n for n in ports if n != leader)
        wait_until(lambda: _scrape(ports[leader])["cycles"] >= 2, 30, "two cycles of the leader")
        assert _scrape(ports[standby]) == {"leader": 0.0, "cycles": 0.0}

        replicas[leader].kill()  # no goodbye: the lease must expire
        replicas[leader].wait()
        wait_until(lambda: _scrape(ports[standby])["cycles"] >= 1, 45, "the standby taking over")
        assert _scrape(ports[standby])["leader"] == 1

        replicas[standby].send_signal(signal.SIGTERM)
        assert replicas[standby].wait(timeout=30) == 0
    finally:
        for process in replicas.values():
            if process.poll() is None:
                process.kill()
                process.wait()


def test_metrics_show_the_true_figures(setup: Setup, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        LIVE_POLICY_YAML.replace("max_age_seconds: 60", "max_age_seconds: 60, bytes_per_unit: 1000")
        + setup.acting
        + "mode: dry-run\ninterval_seconds: 2\n"
    )
    port = free_port()
    started = time.time()
    replica = subprocess.Popen(
        setup.run_command(policy, "metrics-state", port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"

    ok_cycles = ("topology_rebalancer_cycles_total", (("result", "ok"),))
    try:
        wait_until(lambda: requests.get(f"{url}/readyz", timeout=2).ok, 60, "readyz")
        assert requests.get(f"{url}/healthz", timeout=2).text == "ok"
        # Ready comes before the first cycle ends (a replica that has not led yet is ready), so
        # the figures are read once a cycle has finished.
        wait_until(lambda: scrape(port).get(ok_cycles, 0) >= 1, 60, "a finished cycle")
        samples = scrape(port)
    finally:
        replica.send_signal(signal.SIGTERM)
        replica.wait(timeout=30)
    truth = ClusterTraffic(setup.scenario, setup.cluster.api_client()).true_crossing()

    def value(name: str, **labels: str) -> float:
        return samples[(f"topology_rebalancer_{name}", tuple(sorted(labels.items())))]

    zone = value("traffic_crossing", level="zone", when="current")
    assert zone == pytest.approx(truth["zone"], rel=0.05)
    assert value("traffic_crossing", level="rack", when="current") == pytest.approx(
        truth["rack"], rel=0.05
    )
    assert value("traffic") == pytest.approx(90.0, rel=0.05)
    assert value("traffic_crossing", level="zone", when="predicted") < zone
    monthly = zone * 1000 * SECONDS_PER_MONTH / 1e9 * 0.02
    assert value("cross_zone_cost_per_month", currency="USD", when="current") == pytest.approx(
        monthly
    )
    assert value("cycles_total", result="ok") >= 1
    # The tests before moved some of the pair: whichever strategy moves what is left.
    assert total(samples, "topology_rebalancer_evictions_total", result="would-evict") >= 1
    assert value("moves_planned") >= 1
    assert value("policy_generation") == 1
    assert value("leader") == 1
    assert value("last_success_timestamp_seconds") >= started
    assert (value("mode", mode="dry-run"), value("mode", mode="evict")) == (1, 0)
    assert value("interval_seconds") == 2  # as the policy above says


def test_a_policy_change_applies_at_the_next_cycle(setup: Setup) -> None:
    api = setup.cluster.api_client()
    core = client.CoreV1Api(api)
    recorder = EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC))
    policy = LIVE_POLICY_YAML + setup.acting + "mode: dry-run\n"
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="live-policy", namespace=NAMESPACE),
        data={POLICY_KEY: policy},
    )
    core.create_namespaced_config_map(NAMESPACE, body)
    controller = setup.controller("dry-run")
    controller.policies = ConfigMapPolicy(api, NAMESPACE, "live-policy", recorder)
    controller.state = ConfigMapState(api, NAMESPACE, "live-state")
    first = controller.run_cycle()
    assert {o.result for o in first.outcomes} == {"would-evict"}

    body.data = {POLICY_KEY: policy.replace("mode: dry-run", "mode: evict")}
    core.replace_namespaced_config_map("live-policy", NAMESPACE, body)
    second = controller.run_cycle()
    assert second.outcomes and {o.result for o in second.outcomes} <= {"evicted", "refused-by-pdb"}
    assert "evicted" in {o.result for o in second.outcomes}
    for app in ("client", "server"):
        setup.cluster.wait_ready(NAMESPACE, app, 3)


def test_cooldowns_are_saved_before_any_eviction_is_sent(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller that dies mid-cycle must come back knowing what it may have moved."""

    def crash(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("killed between planning and evicting")

    monkeypatch.setattr(EvictionExecutor, "execute", crash)
    controller = setup.controller("evict")
    controller.state = ConfigMapState(setup.cluster.api_client(), NAMESPACE, "crash-state")
    report = controller.run_cycle()  # the cycle ends in a result, the error counted
    assert report.result == "error"
    assert report.detail == "unexpected RuntimeError: killed between planning and evicting"
    remembered = controller.state.load()
    workloads = {"Deployment/ctl/client", "Deployment/ctl/server"}
    assert workloads & set(remembered.last_moved)
    assert workloads & {move.workload for move in remembered.recent_moves}


def test_a_state_too_large_for_a_configmap_is_saved_without_its_least_promising_streaks(
    cluster: LocalCluster,
) -> None:
    """A large cluster proposes a streak per candidate. Saved whole, 40,000 of them are more than
    the API server lets a ConfigMap hold, and every cycle would fail; saved, the best are kept."""
    cluster.ensure_namespace(NAMESPACE)
    api = cluster.api_client()
    candidates = [
        Candidate(
            pod=f"ns-{i % 100:03d}/svc-{i:06d}-5d8c7-abcde",
            target=Domain(1, ("zone-a", "rack-01")),
            gain=float(i),
            reason="",
            strategy="split-peers",
        )
        for i in range(40_000)
    ]
    state = PlannerState().observe(candidates)
    whole = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="whole-state"), data={STATE_KEY: state.stored()}
    )
    with pytest.raises(client.ApiException) as refused:
        client.CoreV1Api(api).create_namespaced_config_map(NAMESPACE, whole)
    assert refused.value.status == 422
    store = ConfigMapState(api, NAMESPACE, "large-state")
    store.save(state)
    loaded = store.load()
    assert 10_000 < len(loaded.streaks) < len(state.streaks)
    assert list(loaded.streaks) == list(state.streaks)[: len(loaded.streaks)]
    assert next(iter(loaded.streaks)) == "ns-099/svc-039999-5d8c7-abcde->1:zone-a/rack-01"
