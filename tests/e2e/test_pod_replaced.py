"""A planned pod replaced by a namesake before its eviction, as a StatefulSet replaces its pods:
the namesake is not evicted, whether the executor's last check sees the change or, in a race
after that check, only the API server does (the eviction names the planned pod's UID)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness.cluster import LocalCluster
from harness.process import wait_until
from rebalancer.clients.eviction import EvictionExecutor
from rebalancer.planning.types import Move
from tests.e2e.setups import Setup, before_executing, split_pair_setup

pytestmark = pytest.mark.e2e

NAMESPACE = "replaced"


@pytest.fixture(scope="module")
def setup(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with split_pair_setup(cluster, NAMESPACE, tmp_path_factory.mktemp("prometheus-rp")) as made:
        yield made


def _gone(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, NAMESPACE)
    except ApiException as error:
        if error.status == 404:
            return True
        raise
    return False


def _replace_with_namesakes(core: client.CoreV1Api, moves: tuple[Move, ...]) -> dict[str, str]:
    """Delete each planned pod and make a pod of the same name on the same node; its own labels,
    so that the ReplicaSet does not adopt it. Returns name -> the namesake's UID."""
    namesakes = {}
    for move in moves:
        name = move.pod.split("/", 1)[1]
        raw: Any = core.read_namespaced_pod(name, NAMESPACE, _preload_content=False)
        spec = json.loads(raw.data)["spec"]
        # kwok deletes a pod by name, and retries a delete that found the pod gone. After a
        # forced delete, its retry once removed the namesake made meanwhile (in CI the executor
        # then found no pod to check). So the pod is deleted gracefully, for kwok to finish as a
        # kubelet would, and kwok's late attempts on it (185 ms after its delete, in one run)
        # are let pass before the namesake is made.
        core.delete_namespaced_pod(name, NAMESPACE)
        wait_until(partial(_gone, core, name), 30, f"pod {name} deleted")
        time.sleep(1)
        namesake = client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, labels={"namesake": "true"}),
            spec=client.V1PodSpec(
                node_name=spec["nodeName"],
                containers=[
                    client.V1Container(name=c["name"], image=c["image"]) for c in spec["containers"]
                ],
            ),
        )
        created = core.create_namespaced_pod(NAMESPACE, namesake)
        assert created.metadata is not None and created.metadata.uid
        namesakes[name] = created.metadata.uid
    return namesakes


@pytest.mark.parametrize("seen_by", ["last check", "API server"])
def test_a_pod_replaced_by_a_namesake_after_planning_is_not_evicted(
    setup: Setup, monkeypatch: pytest.MonkeyPatch, seen_by: str
) -> None:
    core = client.CoreV1Api(setup.cluster.api_client())
    namesakes: dict[str, str] = {}
    before_executing(
        monkeypatch, lambda moves: namesakes.update(_replace_with_namesakes(core, moves))
    )
    if seen_by == "API server":  # the replacement comes after the executor's last check
        monkeypatch.setattr(EvictionExecutor, "_outdated", lambda _self, _move: None)
    try:
        report = setup.controller("evict").run_cycle()
        assert report.result == "ok", report.detail
        assert namesakes, "the controller planned no move"
        assert [o.result for o in report.outcomes] == ["cancelled"] * len(report.outcomes)
        for outcome in report.outcomes:
            assert "replaced by another of the same name" in outcome.detail
            assert ("HTTP 409" in outcome.detail) == (seen_by == "API server")
        for name, uid in namesakes.items():
            metadata = core.read_namespaced_pod(name, NAMESPACE).metadata
            assert metadata is not None
            assert (metadata.uid, metadata.deletion_timestamp) == (uid, None)
        assert len(setup.events("EvictionCancelled")) >= len(report.outcomes)
    finally:
        for name in namesakes:
            core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=0)
