"""`make soak`: the controller in migrate mode for minutes on the local control plane, under
traffic that keeps changing shape and random faults, with the safety invariants checked all along.

The controller runs as `rebalancer run` with its webhook, the way it runs in a cluster. The
harness plays the world around it: it switches the traffic between the scenario's phases, breaks
Prometheus (through the fault proxy), stops the scheduler, restarts the API server, and watches:
- no PDB broken at any moment (InvariantWatch polls the pods);
- no eviction acted on faulty data: none recorded while a Prometheus fault was in force;
- no move undoes a move of the same workload within its cooldown, and no workload moves more
  pods in one cooldown than it has replicas (from the moves the controller records in its state
  ConfigMap, polled throughout, so none is missed when the cooldown prunes them);
- no pod lost: once the faults stop, every workload is back to its desired Ready replicas;
- the controller's memory stays flat: its RSS after warm-up against its RSS at the end;
- the controller process never exits on its own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import requests
from kubernetes import client
from urllib3.exceptions import HTTPError

from harness.cluster import LocalCluster, local_cluster
from harness.faults import FAULTS, FaultyPrometheus, faulty_prometheus
from harness.invariants import InvariantWatch, crowded_moves, ready_by_workload, undoing_moves
from harness.live import live_scenario
from harness.paths import REPO as ROOT
from harness.process import free_port, wait_until
from harness.scrape import by_label, scrape
from harness.webhook import webhook_configuration
from rebalancer.clients.stores import STATE_KEY
from rebalancer.config.policy import load_policy
from rebalancer.planning.state import PlannerState, RecentMove
from rebalancer.simulator.scenario import Scenario, load_scenario

FAULTS_DIR = ROOT / "examples" / "faults"
NAMESPACE = "topology-rebalancer"
STATE = "soak-state"
WEBHOOK = "topology-rebalancer-soak"
PROMETHEUS_FAULTS = tuple(fault for fault in FAULTS if fault != "none")
CLUSTER_FAULTS = ("scheduler-down", "apiserver-restart")
APISERVER_RESTART_GAP_SECONDS = 60.0
"""Restarts closer together than the node monitor's grace period starve kwok's node leases; the
node lifecycle controller then marks every pod NotReady, and kwok, unlike a kubelet, never marks
them Ready again. Real nodes would recover, so the harness keeps its restarts apart."""
ACTED_ON_FAULT_GRACE_SECONDS = 2.0
"""A cycle that read its traffic just before a fault began may record its moves just after."""


@dataclass(frozen=True)
class SoakSettings:
    seconds: float = 600.0
    seed: int = 0
    scenario: Path = FAULTS_DIR / "shifting-traffic.yaml"
    policy: Path = FAULTS_DIR / "soak-policy.yaml"
    phase_seconds: float = 45.0
    """How long each traffic phase of the scenario lasts before the next takes over."""
    mean_fault_gap_seconds: float = 25.0
    fault_seconds: float = 15.0
    settle_seconds: float = 150.0
    """How long the workloads get, once the faults stop, to be back at their Ready replicas."""


@dataclass
class SoakSummary:
    seconds: float
    cycles: dict[str, float]
    evictions: dict[str, float]
    """The controller's own count, by result."""
    pods_replaced: int
    """Pods of the scenario seen by the API server and gone by the end: the ground truth."""
    faults: dict[str, int]
    pdb_violations: list[str]
    acted_on_faulty_data: list[str]
    undone: list[str]
    crowded: list[str]
    not_back: list[str]
    controller_exits: int
    rss_start_mib: float
    rss_end_mib: float
    rss_max_mib: float
    polls: int
    moves: list[dict[str, Any]] = field(default_factory=list)

    @property
    def violations(self) -> int:
        return (
            len(self.pdb_violations)
            + len(self.acted_on_faulty_data)
            + len(self.undone)
            + len(self.crowded)
            + len(self.not_back)
            + self.controller_exits
        )

    def table(self) -> str:
        rows = [
            ("duration", f"{self.seconds:.0f} s"),
            ("cycles", _by_result(self.cycles)),
            ("evictions (controller)", _by_result(self.evictions)),
            ("pods replaced (API server)", str(self.pods_replaced)),
            ("faults injected", _by_result({k: float(v) for k, v in self.faults.items()})),
            ("pod polls", str(self.polls)),
            ("PDB broken", str(len(self.pdb_violations))),
            ("evictions on faulty data", str(len(self.acted_on_faulty_data))),
            ("moves undone within cooldown", str(len(self.undone))),
            ("more moves in a cooldown than replicas", str(len(self.crowded))),
            ("workloads not back to Ready replicas", str(len(self.not_back))),
            ("controller exits", str(self.controller_exits)),
            ("invariant violations", str(self.violations)),
            ("controller RSS after warm-up / end / max", _rss(self)),
        ]
        lines = ["| figure | value |", "|---|---|"]
        lines += [f"| {name} | {value} |" for name, value in rows]
        details = [
            *self.pdb_violations,
            *self.acted_on_faulty_data,
            *self.undone,
            *self.crowded,
            *self.not_back,
        ]
        return "\n".join(lines + [f"- {line}" for line in details])


def _by_result(counts: dict[str, float]) -> str:
    shown = [f"{name} {value:g}" for name, value in sorted(counts.items()) if value]
    return f"{sum(counts.values()):g} ({', '.join(shown)})" if shown else "0"


def _rss(summary: SoakSummary) -> str:
    return (
        f"{summary.rss_start_mib:.0f} / {summary.rss_end_mib:.0f} / {summary.rss_max_mib:.0f} MiB"
    )


@dataclass
class _Controller:
    """`rebalancer run` as a child process, restarted (and counted) should it ever exit."""

    argv: list[str]
    log: Path
    metrics_port: int
    process: subprocess.Popen[bytes] | None = None
    exits: int = 0

    def start(self) -> None:
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(self.argv, stdout=output, stderr=output)

    def supervise(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            self.exits += 1
            self.start()

    def rss_mib(self) -> float | None:
        if self.process is None:
            return None
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except OSError:
            return None
        kilobytes = next(
            line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")
        )
        return int(kilobytes) / 1024

    def figures(self) -> dict[str, dict[str, float]]:
        """cycles_total and evictions_total by result, from the controller's /metrics."""
        samples = scrape(self.metrics_port)
        return {
            "cycles": by_label(samples, "topology_rebalancer_cycles_total", "result"),
            "evictions": by_label(samples, "topology_rebalancer_evictions_total", "result"),
        }

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class _World:
    """What the harness changes and what it has seen."""

    cluster: LocalCluster
    proxy: FaultyPrometheus
    rng: random.Random
    faults: Counter[str] = field(default_factory=Counter)
    prometheus_windows: list[tuple[float, float, str]] = field(default_factory=list)
    """(start, end, fault) in Unix seconds, as the controller records its moves."""
    moves: dict[tuple[str, str, str, float], RecentMove] = field(default_factory=dict)
    active: tuple[float, Callable[[], None]] | None = None
    """The fault in force: when it ends (monotonic seconds), and how to end it."""
    last_restart: float = -APISERVER_RESTART_GAP_SECONDS

    def begin_fault(self, seconds: float) -> None:
        """One fault, chosen at random, in force for `seconds` (an API server restart is over
        once it is back)."""
        kinds = ["prometheus", *CLUSTER_FAULTS]
        if time.monotonic() - self.last_restart < APISERVER_RESTART_GAP_SECONDS:
            kinds.remove("apiserver-restart")
        kind = self.rng.choice(kinds)
        if kind == "apiserver-restart":
            self.faults[kind] += 1
            self.cluster.stop_component("kube-apiserver")
            time.sleep(2.0)
            self.cluster.start_component("kube-apiserver")
            self.last_restart = time.monotonic()
            return
        if kind == "scheduler-down":
            self.faults[kind] += 1
            self.cluster.stop_component("kube-scheduler")
            self.active = (
                time.monotonic() + seconds,
                lambda: self.cluster.start_component("kube-scheduler"),
            )
            return
        fault = self.rng.choice(PROMETHEUS_FAULTS)
        self.faults[f"prometheus {fault}"] += 1
        started = time.time()
        self.proxy.fault = fault

        def end() -> None:
            self.proxy.fault = "none"
            self.prometheus_windows.append((started, time.time(), fault))

        self.active = (time.monotonic() + seconds, end)

    def end_fault(self, *, now: bool = False) -> None:
        if self.active is not None and (now or time.monotonic() >= self.active[0]):
            self.active[1]()
            self.active = None

    def observe(self) -> None:
        """Remember every move the controller has recorded."""
        core = client.CoreV1Api(self.cluster.api_client())
        try:
            config_map: Any = core.read_namespaced_config_map(STATE, NAMESPACE)
            text = (config_map.data or {}).get(STATE_KEY)
            if text:
                for move in PlannerState.model_validate_json(text).recent_moves:
                    key = (move.workload, json.dumps(move.left), json.dumps(move.entered), move.at)
                    self.moves[key] = move
        except (client.ApiException, HTTPError, OSError, ValueError):
            return  # the API server is down by design now and then; the next poll catches up


def _controller_argv(
    cluster: LocalCluster, prometheus_url: str, policy: Path, webhook_port: int, metrics_port: int
) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rebalancer.cli",
        "run",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--prometheus={prometheus_url}",
        f"--policy={policy}",
        f"--state-configmap={NAMESPACE}/{STATE}",
        f"--hints-configmap={NAMESPACE}/soak-hints",
        f"--webhook-port={webhook_port}",
        f"--webhook-config={WEBHOOK}",
        f"--webhook-secret={NAMESPACE}/soak-webhook",
        f"--metrics-port={metrics_port}",
        "--metrics-address=127.0.0.1",
    ]


def run_soak(settings: SoakSettings, workdir: Path) -> SoakSummary:
    scenario = load_scenario(settings.scenario)
    cooldown = load_policy(settings.policy).cooldown.per_workload_seconds
    namespaces = sorted({w.namespace for w in scenario.workloads})
    with local_cluster(workdir / "cluster") as cluster:
        for namespace in [NAMESPACE, *namespaces]:
            cluster.ensure_namespace(namespace)
        webhook_port, metrics_port = free_port(), free_port()
        url = f"https://127.0.0.1:{webhook_port}/mutate"
        cluster.apply([webhook_configuration(WEBHOOK, url, namespaces)])
        with (
            live_scenario(cluster, scenario.in_phase(0), workdir / "prometheus") as (truth, prom),
            faulty_prometheus(prom.url, slow_seconds=5.0) as proxy,
        ):
            argv = _controller_argv(cluster, proxy.url, settings.policy, webhook_port, metrics_port)
            controller = _Controller(argv, workdir / "controller.log", metrics_port)
            world = _World(cluster, proxy, random.Random(settings.seed))
            watch = InvariantWatch(scenario, cluster.api_client()).start()
            controller.start()
            try:
                wait_until(lambda: controller.figures()["cycles"].get("ok", 0) >= 1, 120, "a cycle")
                started = time.monotonic()
                rss: list[tuple[float, float]] = []
                figures = controller.figures()
                next_fault = started + world.rng.expovariate(1 / settings.mean_fault_gap_seconds)
                while (elapsed := time.monotonic() - started) < settings.seconds:
                    truth.scenario = scenario.in_phase(int(elapsed // settings.phase_seconds))
                    controller.supervise()
                    world.observe()
                    sample = controller.rss_mib()
                    if sample is not None:
                        rss.append((elapsed, sample))
                    world.end_fault()
                    if world.active is None and time.monotonic() >= next_fault:
                        world.begin_fault(min(settings.fault_seconds, settings.seconds - elapsed))
                        gap = world.rng.expovariate(1 / settings.mean_fault_gap_seconds)
                        next_fault = time.monotonic() + settings.fault_seconds + gap
                    with contextlib.suppress(requests.RequestException):
                        figures = controller.figures()  # else keep the last figures read
                    time.sleep(1.0)
                world.end_fault(now=True)
                not_back = _wait_back(cluster, scenario, watch, settings.settle_seconds)
                world.observe()
                figures = controller.figures()
                final_uids = {pod["metadata"]["uid"] for pod in watch.pods()}
            finally:
                world.end_fault(now=True)
                controller.stop()
                watch.stop()
    return SoakSummary(
        seconds=settings.seconds,
        cycles=figures["cycles"],
        evictions=figures["evictions"],
        pods_replaced=len(watch.uids_seen - final_uids),
        faults=dict(sorted(world.faults.items())),
        pdb_violations=list(watch.pdb_violations),
        acted_on_faulty_data=acted_on_faults(world.moves.values(), world.prometheus_windows),
        undone=undoing_moves([(m, m.left) for m in world.moves.values()], cooldown),
        crowded=crowded_moves(scenario, list(world.moves.values()), cooldown),
        not_back=not_back,
        controller_exits=controller.exits,
        polls=watch.polls,
        moves=[m.model_dump() for m in sorted(world.moves.values(), key=lambda m: m.at)],
        **_rss_figures(rss, settings.seconds),
    )


def acted_on_faults(
    moves: Iterable[RecentMove], windows: Iterable[tuple[float, float, str]]
) -> list[str]:
    """Moves recorded while a Prometheus fault was in force: (start, end, fault) windows."""
    return [
        f"{move.workload} moved at {move.at:.0f} during prometheus {fault}"
        for move in moves
        for started, ended, fault in windows
        if started + ACTED_ON_FAULT_GRACE_SECONDS <= move.at <= ended
    ]


def _rss_figures(samples: list[tuple[float, float]], seconds: float) -> dict[str, float]:
    """RSS once warmed up (past a tenth of the run, and at least 30 s), at the end, and at most."""
    if not samples:
        return {"rss_start_mib": 0.0, "rss_end_mib": 0.0, "rss_max_mib": 0.0}
    warm = [rss for elapsed, rss in samples if elapsed >= max(30.0, seconds / 10)] or [
        samples[-1][1]
    ]
    return {
        "rss_start_mib": warm[0],
        "rss_end_mib": samples[-1][1],
        "rss_max_mib": max(rss for _elapsed, rss in samples),
    }


def _wait_back(
    cluster: LocalCluster, scenario: Scenario, watch: InvariantWatch, timeout: float
) -> list[str]:
    """Workloads still short of their desired Ready replicas after `timeout`."""

    def short() -> list[str]:
        ready = ready_by_workload(scenario, watch.pods())
        return [
            f"{w.key}: {len(ready[w.key])} of {scenario.pods_of(w)} Ready"
            for w in scenario.workloads
            if len(ready[w.key]) < scenario.pods_of(w)
        ]

    deadline = time.monotonic() + timeout
    while (missing := short()) and time.monotonic() < deadline:
        time.sleep(1.0)
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(description="the controller under shifting traffic and faults")
    parser.add_argument("--seconds", type=float, default=SoakSettings.seconds)
    parser.add_argument("--seed", type=int, default=SoakSettings.seed)
    parser.add_argument("--output", type=Path, help="write OUTPUT.md and OUTPUT.json")
    parser.add_argument("--workdir", type=Path, help="for logs and state (default: a new temp dir)")
    args = parser.parse_args()
    # a fresh etcd and fresh logs every run
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="soak-"))
    print(f"control plane and controller logs: {workdir}", file=sys.stderr)
    try:
        summary = run_soak(SoakSettings(seconds=args.seconds, seed=args.seed), workdir)
    except KeyboardInterrupt:
        print("soak: stopped; every process it had started has been ended", file=sys.stderr)
        sys.exit(130)
    table = summary.table()
    print(table)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.with_suffix(".md").write_text(
            f"# make soak\n\n{args.seconds:g} s, seed {args.seed}\n\n{table}\n"
        )
        args.output.with_suffix(".json").write_text(json.dumps(asdict(summary), indent=2) + "\n")
    sys.exit(1 if summary.violations else 0)


if __name__ == "__main__":
    main()
