"""The policy ConfigMap on a real API server: missing means safe defaults, a valid change applies
at the next read, an invalid one is refused with an Event and the last good policy stays."""

from __future__ import annotations

import datetime

import pytest
from kubernetes import client

from harness.cluster import LocalCluster
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.kube_api import list_raw
from rebalancer.clients.stores import POLICY_KEY, ConfigMapPolicy

pytestmark = pytest.mark.e2e

NAMESPACE = "policy-reload"


def _write(core: client.CoreV1Api, text: str, create: bool = False) -> None:
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="rebalancer-policy", namespace=NAMESPACE),
        data={POLICY_KEY: text},
    )
    if create:
        core.create_namespaced_config_map(NAMESPACE, body)
    else:
        core.replace_namespaced_config_map("rebalancer-policy", NAMESPACE, body)


def test_reloads_keep_the_last_good_policy(cluster: LocalCluster) -> None:
    cluster.ensure_namespace(NAMESPACE)
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    recorder = EventRecorder(api, lambda: datetime.datetime.now(datetime.UTC))
    source = ConfigMapPolicy(api, NAMESPACE, "rebalancer-policy", recorder)

    policy, result = source.current()
    assert (result, policy.mode, source.generation) == ("missing", "dry-run", 0)

    _write(core, "mode: evict\ninterval_seconds: 60\n", create=True)
    policy, result = source.current()
    assert (result, policy.mode, policy.interval_seconds, source.generation) == (
        "loaded",
        "evict",
        60,
        1,
    )
    assert source.current()[1] == "unchanged"

    _write(core, "mode: evict\nlimits: {per_cycle: -1}\n")
    policy, result = source.current()
    assert (result, policy.mode, policy.interval_seconds, source.generation) == (
        "rejected",
        "evict",
        60,
        1,
    )
    events = [
        e
        for e in list_raw("Event", lambda **kw: core.list_namespaced_event(NAMESPACE, **kw))
        if e.get("reason") == "PolicyRejected"
    ]
    assert len(events) == 1
    assert events[0]["involvedObject"]["kind"] == "ConfigMap"
    assert "limits.per_cycle: Input should be greater than or equal to 0" in events[0]["message"]
    assert events[0]["type"] == "Warning"

    _write(core, "mode: dry-run\ninterval_seconds: 30\n")
    policy, result = source.current()
    assert (result, policy.mode, policy.interval_seconds, source.generation) == (
        "loaded",
        "dry-run",
        30,
        2,
    )
