"""A live trial: one scenario on a fresh local control plane, the real controller cycling in a
chosen mode, and every figure taken from the ground truth rather than the controller's model.

Where a replacement landed is read off the API server (the new pod of the evicted pod's
workload and its node's labels), in every mode, so evict and migrate are judged the same way.
The demo, the mode comparison benchmark and its e2e test all run through here.
"""

from __future__ import annotations

import datetime
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import networkx as nx
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster, local_cluster
from harness.exporter import ClusterTraffic
from harness.invariants import InvariantWatch, ReadyWatcher, ready_by_workload
from harness.live import live_scenario
from harness.process import free_port
from harness.webhook import webhook_configuration
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.hints import HintStore
from rebalancer.clients.kube_api import list_raw, read_snapshot
from rebalancer.clients.stores import ConfigMapState, FixedPolicy
from rebalancer.config.policy import Mode, Policy
from rebalancer.controller.loop import Controller
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.planning.report import rounded
from rebalancer.planning.types import Move
from rebalancer.simulator.scenario import Scenario
from rebalancer.webhook.server import WebhookServer
from rebalancer.webhook.serving_keys import shared_serving_keys

Method = Literal["evict", "surge"]
CONTROLLER_NAMESPACE = "topology-rebalancer"
WEBHOOK_CONFIGURATION = "topology-rebalancer"
SETTLE_SECONDS = 60.0


@dataclass(frozen=True)
class TrialCycle:
    cycle: int
    mode: Mode
    result: str
    crossing: dict[str, float]
    """True flows/s crossing each level once the cycle's replacements are Ready."""
    planned: tuple[Move, ...]
    """Moves the cycle evicted, or in dry-run would have evicted."""
    attempted: int
    """Every outcome, refusals included: zero means the planner found nothing to do."""
    landed: int = 0
    elsewhere: int = 0
    not_scheduled: int = 0


@dataclass
class TrialSummary:
    scenario: str
    mode: Mode
    level: str
    """The level whose crossing traffic the trial is judged by."""
    before: dict[str, float]
    cycles: list[TrialCycle]
    pdb_violations: list[str]
    spread_violations: list[str]
    invariant_polls: int
    method: Method = "evict"
    """migrate.method: `surge` moves Deployments make-before-break."""
    ready_samples: int = 0
    """Samples of each Deployment's Ready pods, taken every 50 ms."""
    below_desired: dict[str, int] = field(default_factory=dict)
    """Deployment -> samples with fewer Ready pods than its replicas."""
    least_ready: dict[str, int] = field(default_factory=dict)
    watch_relists: int = 0
    """Times the Ready watcher's pod watch ended in an error and was listed again."""

    @property
    def after(self) -> dict[str, float]:
        return self.cycles[-1].crossing if self.cycles else self.before

    @property
    def moves(self) -> int:
        return sum(len(c.planned) for c in self.cycles if c.mode != "dry-run")

    @property
    def landed(self) -> int:
        return sum(c.landed for c in self.cycles)

    @property
    def judged(self) -> int:
        return sum(c.landed + c.elsewhere + c.not_scheduled for c in self.cycles)

    @property
    def drop(self) -> float:
        """The share of the judged level's crossing traffic the trial removed."""
        before = self.before[self.level]
        return (before - self.after[self.level]) / before if before else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "mode": self.mode,
            "level": self.level,
            "cycles": len(self.cycles),
            "crossing_before": rounded(self.before),
            "crossing_after": rounded(self.after),
            "drop": round(self.drop, 4),
            "moves": self.moves,
            "landed_in_target": self.landed,
            "landed_elsewhere": sum(c.elsewhere for c in self.cycles),
            "not_scheduled": sum(c.not_scheduled for c in self.cycles),
            "pdb_violations": self.pdb_violations,
            "spread_violations": self.spread_violations,
            "invariant_polls": self.invariant_polls,
            "method": self.method,
            "ready_samples": self.ready_samples,
            "samples_below_desired": self.below_desired,
            "least_ready": self.least_ready,
            "watch_relists": self.watch_relists,
        }


@dataclass(frozen=True)
class _PodSeen:
    uid: str
    workload: str
    node_labels: dict[str, str]


@dataclass
class Trial:
    cluster: LocalCluster
    scenario: Scenario
    truth: ClusterTraffic
    controller: Controller
    watch: InvariantWatch
    ready: ReadyWatcher
    window_seconds: int
    spread_violations: list[str] = field(default_factory=list)

    def cycle(self, number: int, mode: Mode) -> TrialCycle:
        policies = self.controller.policies
        assert isinstance(policies, FixedPolicy)
        policies.policy = policies.policy.model_copy(update={"mode": mode})
        before = self._ready_pods()
        report = self.controller.run_cycle()
        acted = {"evicted", "would-evict", "surged", "would-surge"}
        planned = tuple(o.move for o in report.outcomes if o.result in acted)
        self._settle_surges()
        landings = (0, 0, 0)
        if mode != "dry-run" and planned:
            landings = self._landings(planned, before)
            time.sleep(self.window_seconds + 1)  # a full rate() window of the new placement
        self.spread_violations += [f"cycle {number}: {v}" for v in self.watch.spread_violations()]
        return TrialCycle(
            number,
            mode,
            report.result,
            self.truth.true_crossing(),
            planned,
            len(report.outcomes),
            *landings,
        )

    def _settle_surges(self) -> None:
        """Take the surges this cycle started to their end, between cycles, as a controller
        cycling every few seconds would; nothing new is planned meanwhile."""
        self.controller.settle_surges(SETTLE_SECONDS, 0.25)

    def _ready_pods(self) -> dict[str, _PodSeen]:
        core = client.CoreV1Api(self.cluster.api_client())
        nodes = {
            node["metadata"]["name"]: node["metadata"].get("labels") or {}
            for node in list_raw("Node", core.list_node)
        }
        return {
            f"{pod['metadata']['namespace']}/{pod['metadata']['name']}": _PodSeen(
                pod["metadata"]["uid"], workload, nodes[pod["spec"]["nodeName"]]
            )
            for workload, pods in ready_by_workload(self.scenario, self.watch.pods()).items()
            for pod in pods
        }

    def _landings(
        self, evicted: tuple[Move, ...], before: dict[str, _PodSeen]
    ) -> tuple[int, int, int]:
        """(landed in target, landed elsewhere, not scheduled) for the evicted pods' replacements.

        Each workload's replacements are the Ready pods it did not have before the cycle; they
        are paired with its moves by a maximum matching, so which replacement belongs to which
        move cannot make a landing count as a miss.
        """
        replicas = {w.key: self.scenario.pods_of(w) for w in self.scenario.workloads}
        moves_of: dict[str, list[Move]] = defaultdict(list)
        for move in evicted:
            moves_of[before[move.pod].workload].append(move)
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            after = self._ready_pods()
            ready = {key: 0 for key in moves_of}
            for seen in after.values():
                if seen.workload in ready:
                    ready[seen.workload] += 1
            if all(ready[w] >= replicas[w] for w in moves_of) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        old_uids = {seen.uid for seen in before.values()}
        landed = elsewhere = not_scheduled = 0
        for workload, moves in moves_of.items():
            new = [s for s in after.values() if s.workload == workload and s.uid not in old_uids]
            graph: nx.Graph[int | str] = nx.Graph()
            graph.add_nodes_from(range(len(moves)))
            graph.add_nodes_from(f"pod-{i}" for i in range(len(new)))
            graph.add_edges_from(
                (m, f"pod-{p}")
                for m, move in enumerate(moves)
                for p, pod in enumerate(new)
                if move.target_labels.items() <= pod.node_labels.items()
            )
            matched = len(nx.bipartite.maximum_matching(graph, top_nodes=range(len(moves)))) // 2
            landed += matched
            placed_elsewhere = min(len(moves), len(new)) - matched
            elsewhere += placed_elsewhere
            not_scheduled += len(moves) - matched - placed_elsewhere
        return landed, elsewhere, not_scheduled


@contextmanager
def live_trial(
    scenario: Scenario, policy: Policy, workdir: Path, window_seconds: int = 10
) -> Iterator[Trial]:
    """The scenario running on its own control plane, with a controller, its webhook (for
    migrate cycles) and the invariant watch; everything is stopped on the way out."""
    namespaces = sorted({w.namespace for w in scenario.workloads})
    with local_cluster(workdir / "cluster") as cluster:
        api = cluster.api_client()
        for namespace in [CONTROLLER_NAMESPACE, *namespaces]:
            cluster.ensure_namespace(namespace)
        hints = HintStore(api, CONTROLLER_NAMESPACE, "rebalancer-hints")
        keys = shared_serving_keys(
            api, (CONTROLLER_NAMESPACE, "webhook-keys"), dns_names=[], ip_addresses=["127.0.0.1"]
        )
        webhook = WebhookServer(hints, keys, port=free_port(), address="127.0.0.1").start()
        try:
            url = f"https://127.0.0.1:{webhook.port}/mutate"
            cluster.apply([webhook_configuration(WEBHOOK_CONFIGURATION, url, namespaces)])
            webhook.publish_ca(api, WEBHOOK_CONFIGURATION)
            with live_scenario(cluster, scenario, workdir / "prometheus", window_seconds) as (
                truth,
                prometheus,
            ):
                controller = Controller(
                    api=api,
                    snapshots=lambda: read_snapshot(api),
                    prometheus_url=prometheus.url,
                    policies=FixedPolicy(policy),
                    state=ConfigMapState(api, CONTROLLER_NAMESPACE, "rebalancer-state"),
                    metrics=ControllerMetrics(CollectorRegistry()),
                    recorder=EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC)),
                    hints=hints,
                )
                watch = InvariantWatch(scenario, api).start()
                ready = ReadyWatcher(scenario, api).start()
                try:
                    yield Trial(cluster, scenario, truth, controller, watch, ready, window_seconds)
                finally:
                    watch.stop()
                    ready.stop()
        finally:
            webhook.stop()


def with_method(policy: Policy, method: Method) -> Policy:
    """The policy with `method` as migrate mode's."""
    return policy.model_copy(
        update={"migrate": policy.migrate.model_copy(update={"method": method})}
    )


def scoped(policy: Policy, scenario: Scenario) -> Policy:
    """The policy with its scope the scenario's own namespaces, whichever they are: the demo
    policy names the demo's."""
    namespaces = policy.scope.namespaces.model_copy(
        update={"include": tuple(sorted({w.namespace for w in scenario.workloads}))}
    )
    return policy.model_copy(
        update={"scope": policy.scope.model_copy(update={"namespaces": namespaces})}
    )


def run_trial(
    scenario: Scenario,
    policy: Policy,
    workdir: Path,
    *,
    mode: Mode,
    cycles: int,
    level: str,
    method: Method = "evict",
) -> TrialSummary:
    """`cycles` cycles in `mode`, all of them, so every mode gets the same number of chances;
    `method` is migrate mode's."""
    with live_trial(scenario, with_method(policy, method), workdir) as trial:
        before = trial.truth.true_crossing()
        figures = [trial.cycle(number, mode) for number in range(1, cycles + 1)]
        return TrialSummary(
            scenario.name,
            mode,
            level,
            before,
            figures,
            list(trial.watch.pdb_violations),
            trial.spread_violations,
            trial.watch.polls,
            method,
            *trial.ready.figures(),
        )
