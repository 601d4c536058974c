"""Each real cluster's label shape on the real API server: nodes with those labels, pods placed by
the scheduler, the snapshot read live, and the move planned with the built-in or preset policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import LocalCluster
from harness.shapes import HOST, SHAPES
from rebalancer.cli import main
from rebalancer.clients.kube_api import read_snapshot
from rebalancer.cluster.model import Snapshot
from tests.test_shapes import expect_the_clients_move, shape_nodes

pytestmark = pytest.mark.e2e


def _deployment(namespace: str, name: str, replicas: int, hosts: list[str]) -> dict[str, Any]:
    """Pods the scheduler places on `hosts`, as a Deployment (the rebalancer moves no bare pod)."""
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOST, "operator": "In", "values": hosts}]}
                ]
            }
        }
    }
    container = {"name": "main", "image": "app", "resources": {"requests": {"cpu": "100m"}}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [container], "affinity": affinity},
            },
        },
    }


def _only(snapshot: Snapshot, prefix: str, namespace: str) -> Snapshot:
    """The shape's nodes and pods: the session's cluster also holds the other shapes' nodes."""
    return Snapshot(
        nodes={name: node for name, node in snapshot.nodes.items() if name.startswith(prefix)},
        pods={key: pod for key, pod in snapshot.pods.items() if pod.namespace == namespace},
        pdbs=[pdb for pdb in snapshot.pdbs if pdb.namespace == namespace],
        workloads={
            ref: workload
            for ref, workload in snapshot.workloads.items()
            if ref.namespace == namespace
        },
    )


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_label_shape_read_live_plans_the_clients_move(
    cluster: LocalCluster, name: str
) -> None:
    shape, prefix, namespace = SHAPES[name], f"{name}-", f"shape-{name}"
    cluster.add_nodes(shape_nodes(shape, prefix))
    cluster.ensure_namespace(namespace)
    servers = sorted({f"{prefix}n{index}" for index in shape.server_nodes})
    cluster.apply(
        [
            _deployment(namespace, "client", 2, [f"{prefix}n1"]),
            _deployment(namespace, "server", 3, servers),
        ]
    )
    cluster.wait_ready(namespace, "client", 2)
    cluster.wait_ready(namespace, "server", 3)
    snapshot = _only(read_snapshot(cluster.api_client()), prefix, namespace)
    for node_name, labels in shape.node_labels(prefix).items():
        assert snapshot.nodes[node_name].labels.items() >= labels.items()  # as read from the API
    expect_the_clients_move(shape, snapshot, prefix)


def test_topology_read_live_counts_each_shapes_nodes(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the shapes above: `rebalancer topology` on the live cluster, with the Topograph
    preset, finds its nodes at tier-0 and no node at tier-3."""
    shape = SHAPES["topograph"]
    cluster.add_nodes(shape_nodes(shape, "topograph-"))
    policy = tmp_path / "policy.yaml"
    policy.write_text("topology: {preset: topograph}\n")
    kubeconfig = str(cluster.kubeconfig)
    args = ["topology", "--kubeconfig", kubeconfig, "--policy", str(policy), "--output", "json"]
    assert main(args) == 0
    levels = {level["name"]: level for level in json.loads(capsys.readouterr().out)["levels"]}
    assert levels["tier-0"]["in_force"] and levels["tier-0"]["nodes"] >= 4
    assert not levels["tier-3"]["in_force"]
