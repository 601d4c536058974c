"""The split client/server pair on the real control plane with a real Prometheus, and a controller
for it: the setup that the controller, fault and cluster-fault tests share, one namespace each."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster
from harness.exporter import ClusterTraffic
from harness.live import live_scenario, served_traffic
from harness.process import free_port, wait_until
from harness.prometheus import PrometheusServer
from harness.scrape import scrape, total
from harness.webhook import webhook_configuration
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.eviction import EvictionExecutor, Outcome
from rebalancer.clients.hints import HintStore
from rebalancer.clients.inputs import TrafficInput
from rebalancer.clients.kube_api import list_raw, read_snapshot
from rebalancer.clients.prometheus import PrometheusReader
from rebalancer.clients.stores import ConfigMapState, FixedPolicy
from rebalancer.cluster.topology import ZONE_LABEL
from rebalancer.config.policy import Policy, parse_policy
from rebalancer.controller.loop import Controller
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.planning.cycle import plan_cycle
from rebalancer.planning.state import PlannerState
from rebalancer.planning.types import Move
from rebalancer.simulator.scenario import NodeSpec, Scenario
from rebalancer.webhook.server import WebhookServer
from rebalancer.webhook.serving_keys import shared_serving_keys
from tests.conftest import LIVE_POLICY_YAML, split_pair_scenario

Execute = Callable[..., list[Outcome]]


def before_executing(
    monkeypatch: pytest.MonkeyPatch, fault: Callable[[tuple[Move, ...]], None]
) -> None:
    """Run `fault` once the plan is made and just before its first eviction is sent."""
    execute: Execute = EvictionExecutor.execute

    def faulty(
        self: EvictionExecutor, moves: tuple[Move, ...], *args: Any, **kwargs: Any
    ) -> list[Outcome]:
        fault(moves)
        return execute(self, moves, *args, **kwargs)

    monkeypatch.setattr(EvictionExecutor, "execute", faulty)


@contextmanager
def serving_webhook(
    cluster: LocalCluster, namespaces: list[str], configuration: str
) -> Iterator[WebhookServer]:
    """Our webhook on this machine, registered for `namespaces`, its hints in the first one
    (one store for the controller and its webhook, as in `rebalancer run`)."""
    api = cluster.api_client()
    cluster.ensure_namespace(namespaces[0])
    keys = shared_serving_keys(
        api, (namespaces[0], "webhook-keys"), dns_names=[], ip_addresses=["127.0.0.1"]
    )
    server = WebhookServer(
        HintStore(api, namespaces[0], "hints"), keys, port=free_port(), address="127.0.0.1"
    ).start()
    url = f"https://127.0.0.1:{server.port}/mutate"
    cluster.apply([webhook_configuration(configuration, url, namespaces)])
    server.publish_ca(api, configuration)
    try:
        yield server
    finally:
        client.AdmissionregistrationV1Api(api).delete_mutating_webhook_configuration(configuration)
        server.stop()


def steering_controller(
    cluster: LocalCluster, prometheus_url: str, policy: str, namespace: str, webhook: WebhookServer
) -> Controller:
    """A controller with `policy` (text) whose hints `webhook` serves, its state in
    `namespace`."""
    api = cluster.api_client()
    return Controller(
        api=api,
        snapshots=lambda: read_snapshot(api),
        prometheus_url=prometheus_url,
        policies=FixedPolicy(parse_policy(policy, "test policy")),
        state=ConfigMapState(api, namespace, "state"),
        metrics=ControllerMetrics(CollectorRegistry()),
        recorder=EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC)),
        hints=webhook.hints,  # one store for the controller and its webhook, as in `rebalancer run`
    )


def zones_of(cluster: LocalCluster, namespace: str, app: str) -> dict[str, str]:
    """Each Ready pod of `app`, by name, with its node's zone."""
    nodes = {n: s.labels for n, s in read_snapshot(cluster.api_client()).nodes.items()}
    return {
        p["metadata"]["name"]: nodes[p["spec"]["nodeName"]][ZONE_LABEL]
        for p in cluster.ready_pods(namespace, app)
    }


def landing_skips(policy: Policy, cluster: LocalCluster, url: str) -> dict[str, str]:
    """Pod -> why the plan skipped it for where its replacement would land, planned on what a
    controller reads now."""
    api = cluster.api_client()
    snapshot = read_snapshot(api)
    traffic = TrafficInput(policy.traffic, PrometheusReader(url, 10)).read(snapshot)
    outcome = plan_cycle(policy, snapshot, traffic, PlannerState(), now=time.time())
    assert outcome.plan is not None, outcome.failure
    return {skip.pod: skip.reason for skip in outcome.plan.skipped if skip.category == "landing"}


def tolerating(objects: list[dict[str, Any]], taint: dict[str, str]) -> list[dict[str, Any]]:
    """The objects, their pod templates tolerating `taint`: a test's own tainted nodes."""
    for obj in objects:
        template = obj.get("spec", {}).get("template")
        if template is not None:
            template["spec"]["tolerations"] = [{**taint, "operator": "Equal"}]
    return objects


def namespace_pods(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    core = client.CoreV1Api(cluster.api_client())
    return list_raw("Pod", lambda **kw: core.list_namespaced_pod(namespace, **kw))


def node_zone(cluster: LocalCluster, node: str) -> str:
    raw: Any = client.CoreV1Api(cluster.api_client()).read_node(node)
    return str(raw.metadata.labels[ZONE_LABEL])


@contextmanager
def served_on_own_nodes(
    cluster: LocalCluster, scenario: Scenario, nodes: list[NodeSpec], workdir: Path
) -> Iterator[PrometheusServer]:
    """A Prometheus serving the scenario's traffic, for a test whose pods, all in one namespace,
    run on nodes of its own; afterwards the namespace and those nodes are deleted."""
    (namespace,) = {workload.namespace for workload in scenario.workloads}
    traffic = ClusterTraffic(scenario, cluster.api_client())
    try:
        with served_traffic(traffic.rates, [namespace], workdir) as server:
            yield server
    finally:
        core = client.CoreV1Api(cluster.api_client())
        core.delete_namespace(namespace)
        wait_until(
            lambda: not namespace_pods(cluster, namespace), 60, f"{namespace}'s pods to be gone"
        )
        for node in nodes:
            core.delete_node(node.name)


def acting_policy(namespace: str, *, predict_landing: bool = False) -> str:
    """Policy lines that let a test's controller act on its first cycle, in its namespace only.
    In evict mode it evicts wherever the scheduler may put the replacement, unless
    `predict_landing`: most tests judge the eviction machinery, test_evict_landing the
    prediction of where a replacement lands."""
    return f"""
scope: {{namespaces: {{include: [{namespace}]}}}}
persistence: {{cycles: 1}}
thresholds: {{min_gain: 1, min_gain_ratio: 0}}
evict: {{predict_landing: {str(predict_landing).lower()}}}
"""


@dataclass
class Setup:
    cluster: LocalCluster
    prometheus: PrometheusServer
    scenario: Scenario
    namespace: str

    @property
    def acting(self) -> str:
        return acting_policy(self.namespace)

    def controller(
        self,
        mode: str,
        prometheus_url: str | None = None,
        extra: str = "",
        registry: CollectorRegistry | None = None,
        *,
        predict_landing: bool = False,
        base: str = LIVE_POLICY_YAML,
    ) -> Controller:
        """`base`: the topology and traffic lines of the policy."""
        api = self.cluster.api_client()
        acting = acting_policy(self.namespace, predict_landing=predict_landing)
        text = base + acting + extra + f"mode: {mode}\n"
        return Controller(
            api=api,
            snapshots=lambda: read_snapshot(api),
            prometheus_url=prometheus_url or self.prometheus.url,
            policies=FixedPolicy(parse_policy(text, "test policy")),
            state=ConfigMapState(api, self.namespace, "rebalancer-state"),
            metrics=ControllerMetrics(registry or CollectorRegistry()),
            recorder=EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC)),
        )

    def run_command(self, policy: Path, state: str, port: int, *extra: str) -> list[str]:
        """`rebalancer run` against this setup, as a replica would be started."""
        return [
            sys.executable,
            "-m",
            "rebalancer.cli",
            "run",
            *extra,
            "--kubeconfig",
            str(self.cluster.kubeconfig),
            "--prometheus",
            self.prometheus.url,
            "--policy",
            str(policy),
            "--state-configmap",
            f"{self.namespace}/{state}",
            "--metrics-port",
            str(port),
            "--metrics-address",
            "127.0.0.1",
        ]

    def pod_names(self, app: str) -> set[str]:
        return {p["metadata"]["name"] for p in self.cluster.ready_pods(self.namespace, app)}

    def pair_pods(self) -> set[str]:
        return self.pod_names("client") | self.pod_names("server")

    def events(self, reason: str) -> list[dict[str, Any]]:
        core = client.CoreV1Api(self.cluster.api_client())
        found = list_raw("Event", lambda **kw: core.list_namespaced_event(self.namespace, **kw))
        return [e for e in found if e.get("reason") == reason]


@contextmanager
def split_pair_setup(
    cluster: LocalCluster, namespace: str, workdir: Path, scenario: Scenario | None = None
) -> Iterator[Setup]:
    """The split pair of `split_pair_scenario`, or `scenario`: a client and a server, live."""
    scenario = scenario or split_pair_scenario(namespace)
    with live_scenario(cluster, scenario, workdir) as (_truth, prometheus):
        yield Setup(cluster, prometheus, scenario, namespace)


@dataclass(frozen=True)
class MigrateRun:
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]
    log: list[dict[str, Any]]
    """The controller's JSON log lines."""

    def refused(self) -> list[str]:
        return [m for m in (line["message"] for line in self.log) if "403" in m or "Forbidden" in m]


def migrate_cycle_as(
    cluster: LocalCluster,
    kubeconfig: Path,
    args: list[str],
    *,
    webhook: str,
    workloads: str,
    workdir: Path,
) -> MigrateRun:
    """An installed controller's flags (`args`), run on this machine with `kubeconfig` (its
    ServiceAccount's), against a split pair in `workloads`, until a replacement's landing is
    judged. The webhook is pointed at it: the cluster cannot reach a Service on this machine."""
    webhook_port, metrics_port = free_port(), free_port()
    admission = client.AdmissionregistrationV1Api(cluster.api_client())
    admission.patch_mutating_webhook_configuration(
        webhook,
        [
            {
                "op": "replace",
                "path": "/webhooks/0/clientConfig",
                "value": {"url": f"https://127.0.0.1:{webhook_port}/mutate"},
            }
        ],
    )
    scenario = split_pair_scenario(workloads)
    with live_scenario(cluster, scenario, workdir / "prometheus") as (_truth, prometheus):
        flags = {arg.split("=", 1)[0]: arg for arg in args}
        flags["--prometheus"] = f"--prometheus={prometheus.url}"
        flags["--metrics-port"] = f"--metrics-port={metrics_port}"
        flags["--webhook-port"] = f"--webhook-port={webhook_port}"
        command = [sys.executable, "-m", "rebalancer.cli", "run", *flags.values()]
        command += ["--metrics-address=127.0.0.1", f"--kubeconfig={kubeconfig}"]
        log = workdir / "controller.log"
        with log.open("w") as output:
            replica = subprocess.Popen(
                command,
                stderr=output,
                stdout=output,
                env={**os.environ, "POD_NAME": "rebalancer-test-0"},
            )
        try:
            wait_until(
                lambda: total(scrape(metrics_port), "topology_rebalancer_landings_total") >= 1,
                120,
                "an eviction, its replacement and the landing judged",
            )
            samples = scrape(metrics_port)
        finally:
            replica.send_signal(signal.SIGTERM)
            replica.wait(timeout=30)
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return MigrateRun(samples, lines)
