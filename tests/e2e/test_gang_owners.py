"""Gangs another scheduler owns, on the real control plane with those projects' CRDs installed.

Each gang is a real Job whose pod template carries what its owner writes on the pods it places
(Kueue, Volcano, KAI-Scheduler, Koordinator, scheduler-plugins Coscheduling, a JobSet's child
Job, a LeaderWorkerSet group, the upstream PodGroup API), next to the owner's own object (a
Workload, a PodGroup, a JobSet...) made from the project's CRD. The test binds the pods, as a gang
scheduler does, half in one rack and half in a rack of another zone; their all-to-all traffic
goes through a real Prometheus. A cycle in evict mode must move only the gang with no owner, and
report every owned one with its owner's fix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster, build_binaries, is_ready
from harness.deploy import install_crds
from harness.live import served_traffic
from harness.process import wait_until
from rebalancer.cli import main
from rebalancer.clients.kube_api import list_raw
from rebalancer.cluster.gang_owners import OWNERS
from tests.conftest import LIVE_POLICY_YAML
from tests.e2e.setups import Setup

pytestmark = pytest.mark.e2e

NAMESPACE = "gangs"
BINDER = "gang-test-binder"
"""The schedulerName of gangs whose owner has no scheduler of its own here: the default
scheduler leaves them, and the test binds them."""
MEMBERS = 4
SPLIT = ("node-a11", "node-a12", "node-b11", "node-b12")
"""Two members in rack r1 of zone a, two in rack r1 of zone b: one rack could hold all four."""
POLICY = """
strategies: [{name: gang-consolidation, args: {level: rack}}]
limits: {per_cycle: 10, per_workload: 4}
"""


@dataclass(frozen=True)
class Gang:
    name: str
    owner: str | None
    """The owner the rebalancer should name; None for the gang left to it."""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduler: str = BINDER
    pod_group: str | None = None
    objects: tuple[dict[str, Any], ...] = ()
    """The owner's own objects, from its CRDs (or the built-in PodGroup API)."""


def _cr(api_version: str, kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }


CONTAINERS = [{"name": "main", "image": "trainer"}]
GANGS = (
    Gang(
        "kueue-train",
        "Kueue",
        labels={"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/podset": "main"},
        annotations={"kueue.x-k8s.io/workload": "job-kueue-train-5b2c1"},
        objects=(
            _cr(
                "kueue.x-k8s.io/v1beta2",
                "Workload",
                "job-kueue-train-5b2c1",
                {
                    "queueName": "team-a",
                    "podSets": [
                        {
                            "name": "main",
                            "count": MEMBERS,
                            "template": {"spec": {"containers": CONTAINERS}},
                        }
                    ],
                },
            ),
        ),
    ),
    Gang(
        "volcano-train",
        "Volcano",
        labels={"volcano.sh/job-name": "volcano-train", "volcano.sh/queue-name": "default"},
        annotations={"scheduling.k8s.io/group-name": "volcano-train"},
        scheduler="volcano",
        objects=(
            _cr(
                "scheduling.volcano.sh/v1beta1", "PodGroup", "volcano-train", {"minMember": MEMBERS}
            ),
        ),
    ),
    Gang(
        "kai-train",
        "KAI-Scheduler",
        labels={"kai.scheduler/queue": "team-a"},
        annotations={"pod-group-name": "pg-kai-train"},
        scheduler="kai-scheduler",
        objects=(
            _cr(
                "scheduling.run.ai/v2alpha2",
                "PodGroup",
                "pg-kai-train",
                {"minMember": MEMBERS, "queue": "team-a"},
            ),
        ),
    ),
    Gang(
        "koord-train",
        "Koordinator",
        annotations={
            "gang.scheduling.koordinator.sh/name": "koord-train",
            "gang.scheduling.koordinator.sh/min-available": str(MEMBERS),
        },
        scheduler="koord-scheduler",
        objects=(
            _cr(
                "scheduling.sigs.k8s.io/v1alpha1", "PodGroup", "koord-train", {"minMember": MEMBERS}
            ),
        ),
    ),
    Gang(
        "cosched-train",
        "Coscheduling",
        labels={"scheduling.x-k8s.io/pod-group": "cosched-train"},
        objects=(
            _cr(
                "scheduling.x-k8s.io/v1alpha1", "PodGroup", "cosched-train", {"minMember": MEMBERS}
            ),
        ),
    ),
    Gang(
        "jobset-train-workers-0",
        "JobSet",
        labels={
            "jobset.sigs.k8s.io/jobset-name": "jobset-train",
            "jobset.sigs.k8s.io/replicatedjob-name": "workers",
        },
        annotations={"jobset.sigs.k8s.io/jobset-name": "jobset-train"},
        objects=(
            _cr(
                "jobset.x-k8s.io/v1alpha2",
                "JobSet",
                "jobset-train",
                {
                    "replicatedJobs": [
                        {
                            "name": "workers",
                            "replicas": 1,
                            "template": {
                                "spec": {
                                    "parallelism": MEMBERS,
                                    "completions": MEMBERS,
                                    "template": {"spec": {"containers": CONTAINERS}},
                                }
                            },
                        }
                    ]
                },
            ),
        ),
    ),
    Gang(
        "lws-serve",
        "LeaderWorkerSet",
        labels={
            "leaderworkerset.sigs.k8s.io/name": "lws-serve",
            "leaderworkerset.sigs.k8s.io/group-index": "0",
        },
        objects=(
            _cr(
                "leaderworkerset.x-k8s.io/v1",
                "LeaderWorkerSet",
                "lws-serve",
                {
                    "leaderWorkerTemplate": {
                        "size": MEMBERS,
                        "workerTemplate": {"spec": {"containers": CONTAINERS}},
                    }
                },
            ),
        ),
    ),
    Gang(
        "podgroup-train",
        "PodGroup API",
        pod_group="podgroup-train",
        objects=(
            _cr(
                "scheduling.k8s.io/v1alpha2",
                "Workload",
                "podgroup-train",
                {
                    "podGroupTemplates": [
                        {"name": "workers", "schedulingPolicy": {"gang": {"minCount": MEMBERS}}}
                    ]
                },
            ),
            _cr(
                "scheduling.k8s.io/v1alpha2",
                "PodGroup",
                "podgroup-train",
                {
                    "podGroupTemplateRef": {
                        "workload": {
                            "workloadName": "podgroup-train",
                            "podGroupTemplateName": "workers",
                        }
                    },
                    "schedulingPolicy": {"gang": {"minCount": MEMBERS}},
                },
            ),
        ),
    ),
    # Elastic (torchrun elastic): moved pod by pod, so evict mode moves it too; a job that
    # restarts whole is moved only where its pods are steered (tests/e2e/test_jobs.py).
    Gang("plain-train", None, annotations={"topology-rebalancer.io/elastic": "true"}),
)


def _install_crds(cluster: LocalCluster) -> None:
    directories = sorted(build_binaries().glob("gang-crds-*"))
    assert len(directories) == 7, directories  # Kueue, Volcano, KAI, JobSet, LWS and two PodGroups
    install_crds(cluster.kubeconfig, directories)


def _job(gang: Gang) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": gang.scheduler,
        "restartPolicy": "Never",
        "containers": [
            {**CONTAINERS[0], "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}
        ],
    }
    if gang.pod_group:
        spec["schedulingGroup"] = {"podGroupName": gang.pod_group}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": gang.name, "namespace": NAMESPACE},
        "spec": {
            "parallelism": MEMBERS,
            "completions": MEMBERS,
            "backoffLimit": MEMBERS,  # room to evict every member: an evicted pod counts as failed
            "template": {
                "metadata": {"labels": gang.labels, "annotations": gang.annotations},
                "spec": spec,
            },
        },
    }


def _gang_pods(core: client.CoreV1Api, gang: str) -> list[dict[str, Any]]:
    pods = list_raw(
        "Pod",
        lambda **kw: core.list_namespaced_pod(NAMESPACE, label_selector=f"job-name={gang}", **kw),
    )
    return sorted(pods, key=lambda p: p["metadata"]["name"])


def _bind(core: client.CoreV1Api, pod: str, node: str) -> None:
    """What a gang scheduler does once it has placed the whole gang."""
    binding = client.V1Binding(
        metadata=client.V1ObjectMeta(name=pod),
        target=client.V1ObjectReference(kind="Node", name=node),
    )
    core.create_namespaced_pod_binding(pod, NAMESPACE, binding, _preload_content=False)


@pytest.fixture(scope="module")
def gangs(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    _install_crds(cluster)
    cluster.ensure_namespace(NAMESPACE)
    core = client.CoreV1Api(cluster.api_client())
    custom = client.CustomObjectsApi(cluster.api_client())
    for gang in GANGS:
        for obj in gang.objects:
            group, version = obj["apiVersion"].split("/")
            plural = obj["kind"].lower() + "s"
            custom.create_namespaced_custom_object(group, version, NAMESPACE, plural, obj)
    cluster.apply([_job(gang) for gang in GANGS])
    for gang in GANGS:
        wait_until(
            lambda g=gang.name: len(_gang_pods(core, g)) == MEMBERS,  # type: ignore[misc]
            timeout=60,
            what=f"the Job controller to create {gang.name}'s pods",
        )
        for pod, node in zip(_gang_pods(core, gang.name), SPLIT, strict=True):
            _bind(core, pod["metadata"]["name"], node)
    wait_until(
        lambda: all(is_ready(p) for g in GANGS for p in _gang_pods(core, g.name)),
        timeout=60,
        what="every bound gang member Running and Ready",
    )
    members = {
        g.name: [f"{NAMESPACE}/{p['metadata']['name']}" for p in _gang_pods(core, g.name)]
        for g in GANGS
    }
    rates = {
        (source, destination): 10.0
        for pods in members.values()
        for source in pods
        for destination in pods
        if source != destination
    }
    workdir = tmp_path_factory.mktemp("gangs")
    with served_traffic(lambda: rates, [NAMESPACE], workdir) as prometheus:
        yield Setup(cluster, prometheus, None, NAMESPACE)  # type: ignore[arg-type]


def test_the_owners_objects_are_accepted_by_their_crds(gangs: Setup) -> None:
    custom = client.CustomObjectsApi(gangs.cluster.api_client())
    for gang in GANGS:
        for obj in gang.objects:
            group, version = obj["apiVersion"].split("/")
            found: Any = custom.get_namespaced_custom_object(
                group, version, NAMESPACE, obj["kind"].lower() + "s", obj["metadata"]["name"]
            )
            assert found["spec"], obj  # stored, with the spec the project's schema kept


def test_the_plan_reports_every_owned_gang_and_moves_only_the_plain_one(
    gangs: Setup, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(LIVE_POLICY_YAML + gangs.acting + POLICY + "mode: dry-run\n")
    argv = [
        "plan",
        "--kubeconfig",
        str(gangs.cluster.kubeconfig),
        "--prometheus",
        gangs.prometheus.url,
    ]
    assert main([*argv, "--policy", str(policy), "--output", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    owned = {g.name: g for g in GANGS if g.owner}
    reported = {entry["owner"]: entry for entry in document["owned_gangs"]}
    assert set(reported) == {g.owner for g in owned.values()} == set(OWNERS)
    for entry in reported.values():
        assert (entry["pods"], entry["level"], entry["spans"], entry["fits_in"]) == (
            MEMBERS,
            "rack",
            2,
            1,
        )
        assert "topology.kubernetes.io/rack" in entry["fix"]
    moved = {move["pod"].split("/")[1].rsplit("-", 1)[0] for move in document["moves"]}
    assert moved == {"plain-train"}
    reasons = {skip["pod"]: skip["reason"] for skip in document["skipped"]}
    core = client.CoreV1Api(gangs.cluster.api_client())
    for gang in owned.values():
        keys = [f"{NAMESPACE}/{pod['metadata']['name']}" for pod in _gang_pods(core, gang.name)]
        said = [reasons[key] for key in keys if key in reasons]
        assert said, gang.name  # gang-consolidation proposed them, by their Job's label
        assert all(r.startswith(f"member of {gang.owner} gang ") for r in said), said


def test_an_evict_cycle_evicts_no_member_of_an_owned_gang(gangs: Setup) -> None:
    core = client.CoreV1Api(gangs.cluster.api_client())
    before = {
        p["metadata"]["uid"]: (g.name, p["spec"]["nodeName"])
        for g in GANGS
        for p in _gang_pods(core, g.name)
    }
    registry = CollectorRegistry()
    controller = gangs.controller("evict", extra=POLICY, registry=registry)
    report = controller.run_cycle()
    assert report.result == "ok", report.detail
    evicted = [o.move.pod for o in report.outcomes if o.result == "evicted"]
    assert evicted and all(pod.startswith(f"{NAMESPACE}/plain-train-") for pod in evicted)
    after = {
        p["metadata"]["uid"]: p["spec"].get("nodeName")
        for g in GANGS
        for p in _gang_pods(core, g.name)
    }
    for uid, (gang, node) in before.items():
        if gang != "plain-train":
            assert after.get(uid) == node, (gang, uid)
    for owner in OWNERS:
        spread = registry.get_sample_value(
            "topology_rebalancer_owned_gangs_spread", {"owner": owner}
        )
        assert spread == 1, owner
