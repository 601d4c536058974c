"""The split client/server pair on the real control plane with a real Prometheus, and a controller
for it: the setup that the controller, fault and cluster-fault tests share, one namespace each."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster
from harness.live import live_scenario
from harness.prometheus import PrometheusServer
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.eviction import EvictionExecutor, Outcome
from rebalancer.clients.kube_api import list_raw, read_snapshot
from rebalancer.clients.stores import ConfigMapState, FixedPolicy
from rebalancer.config.policy import parse_policy
from rebalancer.controller.loop import Controller
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.planning.types import Move
from rebalancer.simulator.scenario import Scenario
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


def acting_policy(namespace: str) -> str:
    """Policy lines that let a test's controller act on its first cycle, in its namespace only."""
    return f"""
scope: {{namespaces: {{include: [{namespace}]}}}}
persistence: {{cycles: 1}}
thresholds: {{min_gain: 1, min_gain_ratio: 0}}
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
        self, mode: str, prometheus_url: str | None = None, extra: str = ""
    ) -> Controller:
        api = self.cluster.api_client()
        text = LIVE_POLICY_YAML + self.acting + extra + f"mode: {mode}\n"
        return Controller(
            api=api,
            snapshots=lambda: read_snapshot(api),
            prometheus_url=prometheus_url or self.prometheus.url,
            policies=FixedPolicy(parse_policy(text, "test policy")),
            state=ConfigMapState(api, self.namespace, "rebalancer-state"),
            metrics=ControllerMetrics(CollectorRegistry()),
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
