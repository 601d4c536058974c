"""Dry-run is absolute: every call the product makes that can evict goes through one place,
which sends it with dryRun in dry-run mode, and nothing in the product deletes a pod."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from kubernetes import client

from rebalancer.clients.eviction import EvictionExecutor
from rebalancer.cluster.topology import Domain
from rebalancer.planning.types import Move

PRODUCT = Path(__file__).resolve().parents[1] / "rebalancer"
EVICTING = {"create_namespaced_pod_eviction"}
DELETING_PODS = {"delete_namespaced_pod", "delete_collection_namespaced_pod"}


def _called(path: Path) -> list[tuple[str, ast.Call]]:
    return [
        (node.func.attr, node)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]


def test_only_the_eviction_path_evicts_and_nothing_deletes_a_pod() -> None:
    evicting, deleting = [], []
    for path in sorted(PRODUCT.rglob("*.py")):
        for name, call in _called(path):
            where = f"{path.relative_to(PRODUCT)}:{call.lineno}"
            if name in EVICTING:
                evicting.append((where, call))
            if name in DELETING_PODS:
                deleting.append(where)
    assert deleting == []
    assert {where.split(":")[0] for where, _call in evicting} == {"clients/eviction.py"}
    # Each eviction's body is the one `_eviction` builds, with the mode's dry-run flag.
    for where, call in evicting:
        body = call.args[2]
        assert isinstance(body, ast.Call | ast.Name), where
        if isinstance(body, ast.Call):
            assert isinstance(body.func, ast.Attribute) and body.func.attr == "_eviction", where


class Recording:
    """Stands in for CoreV1Api: pods are Pending and unbound, nodes Ready; evictions are kept."""

    def __init__(self) -> None:
        self.evictions: list[Any] = []

    def read_namespaced_pod(self, name: str, namespace: str) -> client.V1Pod:
        return client.V1Pod(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=f"uid-{name}"),
            spec=client.V1PodSpec(containers=[]),
        )

    def read_node(self, name: str) -> client.V1Node:
        ready = client.V1NodeCondition(type="Ready", status="True")
        return client.V1Node(
            metadata=client.V1ObjectMeta(name=name, labels={"zone": "b"}),
            status=client.V1NodeStatus(conditions=[ready]),
        )

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body: Any) -> None:
        self.evictions.append(body)


class Quiet:
    def record(self, *args: Any, **kwargs: Any) -> None:
        """Events are not the point here."""


def test_in_dry_run_every_eviction_sent_is_a_dry_run_with_the_pods_uid() -> None:
    executor = EvictionExecutor(client.ApiClient(), Quiet(), dry_run=True)  # type: ignore[arg-type]
    recording = Recording()
    executor.core = recording  # type: ignore[assignment]
    move = Move(
        pod="shop/web-1",
        workload="Deployment/shop/web",
        origin={"zone": "a"},
        target=Domain(0, ("b",)),
        destination={"zone": "b"},
        node="n-b",
        target_labels={"zone": "b"},
        controller=("ReplicaSet", "web-rs"),
        gain=1.0,
        strategy="split-peers",
        reason="test",
        uid="uid-web-1",
    )
    assert [outcome.result for outcome in executor.execute((move,))] == ["would-evict"]
    assert executor.release("shop/web-2", "uid-web-2") == "would be released (dry-run)"
    assert [body.delete_options.dry_run for body in recording.evictions] == [["All"], ["All"]]
    uids = [body.delete_options.preconditions.uid for body in recording.evictions]
    assert uids == ["uid-web-1", "uid-web-2"]


def test_only_the_routing_client_patches_a_service_and_always_with_the_dry_run_flag() -> None:
    patching = [
        (path.relative_to(PRODUCT).as_posix(), call)
        for path in sorted(PRODUCT.rglob("*.py"))
        for name, call in _called(path)
        if name in {"patch_namespaced_service", "replace_namespaced_service"}
    ]
    assert [where for where, _call in patching] == ["clients/routing.py"]
    for where, call in patching:
        flags = [ast.unparse(k.value) for k in call.keywords if k.arg == "dry_run"]
        assert flags == ["'All' if self.dry_run else None"], where
