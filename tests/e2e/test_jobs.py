"""A training job on the real control plane: an indexed Job whose four ranks talk in a ring,
placed rank by rank across two racks, each node with room for one rank. The racks are the
test's own, tainted for the ranks alone: the modules before it leave their pods on the shared
nodes, and where those take more than a node's room beside a rank, no reordering fits.

One migrate cycle moves the job whole: the ranks to reorder are evicted together although the
per-workload limit is one, the real Job controller makes each again with its completion index,
and our webhook steers each replacement to the rack planned for its own rank. The test binds the
replacements where their affinity points, as a gang scheduler would; the ring then crosses racks
as planned, and the next cycle judges every landing in its target and does not restart the job
again.

The Job runs under restartPolicy OnFailure with a backoffLimit of 3: the ranks a restart leaves
restart their containers in place rather than fail, so the two evictions are its only failed
pods (under Never all four ranks would fail, and the restart would be refused). The real Job
controller counts the two and the Job runs on."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster, is_ready
from harness.live import served_traffic
from harness.process import wait_until
from harness.prometheus import PrometheusServer
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.inputs import TrafficInput
from rebalancer.clients.kube_api import list_raw, read_snapshot
from rebalancer.clients.prometheus import PrometheusReader
from rebalancer.clients.stores import ConfigMapState, FixedPolicy
from rebalancer.config.policy import parse_policy
from rebalancer.controller.loop import Controller
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.planning.cycle import plan_cycle
from rebalancer.planning.landing import COMPLETION_INDEX
from rebalancer.planning.state import PlannerState
from rebalancer.simulator.objects import node_object
from rebalancer.simulator.scenario import RACK_LABEL, NodeSpec
from rebalancer.webhook.server import WebhookServer
from tests.conftest import LIVE_POLICY_YAML
from tests.e2e.setups import acting_policy, serving_webhook

pytestmark = pytest.mark.e2e

NAMESPACE = "jobs"
BINDER = "job-test-binder"
"""The ranks' schedulerName: the default scheduler leaves them, and the test binds them."""
RANKS = 4
TAINT = {"key": "topology-rebalancer.test/jobs", "value": "ring", "effect": "NoSchedule"}
NODES = [
    NodeSpec(name=f"jobs-{rack}-{n}", zone="zone-jobs", rack=f"rack-{rack}")
    for rack in ("j1", "j2")
    for n in (1, 2)
]
"""Two racks of two 8-CPU nodes, for the ranks only."""
START = ("jobs-j1-1", "jobs-j2-1", "jobs-j1-2", "jobs-j2-2")
"""Rank i on START[i]: racks j1, j2, j1, j2, so every link of the ring crosses a rack."""
CPU = "5"
"""Of a node's 8: one rank per node, so only a reordering of the ranks helps."""
POLICY = """
strategies: [{name: split-peers, args: {level: zone, down_to: rack}}]
limits: {per_cycle: 10, per_node: 2, per_namespace: 5, per_workload: 1, per_zone: 3}
cooldown: {per_workload_seconds: 0}
mode: migrate
"""
WEBHOOK_CONFIG = "topology-rebalancer-jobs"


def _job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "ring", "namespace": NAMESPACE},
        "spec": {
            "completionMode": "Indexed",
            "parallelism": RANKS,
            "completions": RANKS,
            "backoffLimit": 3,
            "template": {
                "spec": {
                    "schedulerName": BINDER,
                    "restartPolicy": "OnFailure",
                    "tolerations": [{**TAINT, "operator": "Equal"}],
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "trainer",
                            "resources": {"requests": {"cpu": CPU, "memory": "1Gi"}},
                        }
                    ],
                }
            },
        },
    }


def _all_pods(core: client.CoreV1Api) -> list[dict[str, Any]]:
    return list_raw(
        "Pod",
        lambda **kw: core.list_namespaced_pod(NAMESPACE, label_selector="job-name=ring", **kw),
    )


def _ranks(core: client.CoreV1Api) -> dict[int, dict[str, Any]]:
    """The live pod of each rank (not the terminating one being replaced)."""
    pods = _all_pods(core)
    return {
        int(p["metadata"]["annotations"][COMPLETION_INDEX]): p
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        and p.get("status", {}).get("phase") not in ("Failed", "Succeeded")
    }


def _why_not(controller: Controller) -> str:
    """What the cycle's plan skipped and why, planned again on what the controller reads: the
    cause when a cycle moved nothing."""
    policy, _reloaded = controller.policies.current()
    snapshot = controller.snapshots()
    reader = PrometheusReader(controller.prometheus_url, policy.traffic.timeout_seconds)
    traffic = TrafficInput(policy.traffic, reader).read(snapshot)
    outcome = plan_cycle(
        policy, snapshot, traffic, PlannerState(), now=time.time(), persistence_required=1
    )
    skipped = outcome.plan.skipped if outcome.plan is not None else ()
    return "; ".join(f"{s.pod}: {s.reason}" for s in skipped) or str(outcome.failure)


def _bind(core: client.CoreV1Api, pod: str, node: str) -> None:
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod),
        target=client.V1ObjectReference(kind="Node", name=node),
    )
    core.create_namespaced_pod_binding(pod, NAMESPACE, binding, _preload_content=False)


def _racks(cluster: LocalCluster) -> dict[str, str]:
    return {
        n: node.labels[RACK_LABEL] for n, node in read_snapshot(cluster.api_client()).nodes.items()
    }


def _ring_crossings(core: client.CoreV1Api, racks: dict[str, str]) -> int:
    ranks = _ranks(core)
    rack = {i: racks[p["spec"]["nodeName"]] for i, p in ranks.items()}
    return sum(rack[i] != rack[(i + 1) % RANKS] for i in range(RANKS))


@pytest.fixture(scope="module")
def webhook(cluster: LocalCluster) -> Iterator[WebhookServer]:
    with serving_webhook(cluster, [NAMESPACE], WEBHOOK_CONFIG) as server:
        yield server


@pytest.fixture(scope="module")
def nodes(cluster: LocalCluster) -> Iterator[None]:
    cluster.add_nodes([{**node_object(n), "spec": {"taints": [TAINT]}} for n in NODES])
    yield
    core = client.CoreV1Api(cluster.api_client())
    for node in NODES:
        core.delete_node(node.name)


@pytest.fixture(scope="module")
def prometheus(
    cluster: LocalCluster,
    nodes: None,
    webhook: WebhookServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PrometheusServer]:
    core = client.CoreV1Api(cluster.api_client())
    cluster.apply([_job()])
    wait_until(lambda: len(_ranks(core)) == RANKS, 60, "the Job controller to make the ranks")
    for index, pod in _ranks(core).items():
        _bind(core, pod["metadata"]["name"], START[index])
    wait_until(
        lambda: all(is_ready(p) for p in _ranks(core).values()), 60, "every rank Running and Ready"
    )

    def ring() -> dict[tuple[str, str], float]:
        """Rank i sends to rank i + 1, whichever pods run them now."""
        names = {i: f"{NAMESPACE}/{p['metadata']['name']}" for i, p in _ranks(core).items()}
        if len(names) < RANKS:
            return {}
        return {(names[i], names[(i + 1) % RANKS]): 10.0 for i in range(RANKS)}

    workdir = tmp_path_factory.mktemp("prometheus-jobs")
    try:
        with served_traffic(ring, [NAMESPACE], workdir) as server:
            yield server
    finally:
        # Before its nodes go, or the pods on them would be left to the pod GC.
        client.BatchV1Api(cluster.api_client()).delete_namespaced_job(
            "ring", NAMESPACE, propagation_policy="Background"
        )
        wait_until(lambda: not _all_pods(core), 60, "the ring Job's pods to be gone")


def test_a_ring_is_reordered_whole_in_one_cycle_each_rank_steered_to_its_own_rack(
    cluster: LocalCluster, webhook: WebhookServer, prometheus: PrometheusServer
) -> None:
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    racks = _racks(cluster)
    assert _ring_crossings(core, racks) == RANKS
    controller = Controller(
        api=api,
        snapshots=lambda: read_snapshot(api),
        prometheus_url=prometheus.url,
        policies=FixedPolicy(
            parse_policy(LIVE_POLICY_YAML + acting_policy(NAMESPACE) + POLICY, "jobs policy")
        ),
        state=ConfigMapState(api, NAMESPACE, "state"),
        metrics=ControllerMetrics(CollectorRegistry()),
        recorder=EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC)),
        hints=webhook.hints,
    )
    before = {i: p["metadata"]["uid"] for i, p in _ranks(core).items()}
    report = controller.run_cycle()
    assert report.result == "ok", report.detail
    moves = [o.move for o in report.outcomes if o.result == "evicted"]
    # More than the per-workload limit of one, all of the job, in this one cycle.
    assert len(moves) >= 2, _why_not(controller)
    assert {m.job for m in moves} == {f"{NAMESPACE}/ring"}
    planned = {int(m.rank or "-1"): m.destination["rack"] for m in moves}
    assert len(set(planned.values())) == 2, planned  # the ranks go different ways

    def replaced() -> dict[int, dict[str, Any]]:
        now = _ranks(core)
        return {i: p for i, p in now.items() if i in planned and p["metadata"]["uid"] != before[i]}

    wait_until(lambda: len(replaced()) == len(planned), 60, "the Job controller's replacements")
    taken = {p["spec"].get("nodeName") for i, p in _ranks(core).items() if i not in planned}
    for index, pod in sorted(replaced().items()):
        terms = pod["spec"]["affinity"]["nodeAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        steered = {
            e["key"]: e["values"][0] for t in terms for e in t["preference"]["matchExpressions"]
        }
        assert steered[RACK_LABEL] == planned[index], (index, steered)  # its own rank's hint
        # Bind as a scheduler honouring the hint: a free node of the rack, once the rank that
        # held it has gone.
        free = [n for n in START if racks[n] == planned[index] and n not in taken]
        assert free, (index, taken)
        taken.add(free[0])
        _bind(core, pod["metadata"]["name"], free[0])
    wait_until(
        lambda: len(_ranks(core)) == RANKS and all(is_ready(p) for p in _ranks(core).values()),
        60,
        "the replaced ranks Running and Ready",
    )
    assert _ring_crossings(core, racks) == 2  # two runs of two ranks
    assert webhook.hints.pending(time.time()) == []
    time.sleep(11)  # the 10 s rate window, filled with the new ranks' traffic
    again = controller.run_cycle()
    assert again.result == "ok", again.detail
    assert again.outcomes == ()  # the job is not restarted again
    status = client.BatchV1Api(api).read_namespaced_job("ring", NAMESPACE).status
    assert status is not None and status.failed == len(planned)
    assert not any(c.type == "Failed" and c.status == "True" for c in status.conditions or ())
    assert controller.metrics.landings.labels("landed-in-target")._value.get() == len(planned)
