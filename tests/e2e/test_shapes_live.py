"""Each real cluster's label shape on the real API server: nodes with those labels, pods placed by
the scheduler, the snapshot read live, and the move planned with the built-in or preset policy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import LocalCluster, local_cluster
from harness.shapes import SHAPES
from rebalancer.cli import main
from rebalancer.clients.kube_api import read_snapshot
from rebalancer.cluster.model import Snapshot
from tests.test_shapes import expect_the_clients_move, shape_nodes

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A control plane of its own: the shapes' nodes carry labels (a region, other zones) that
    would change the topology every later test of the session's cluster sees."""
    with local_cluster(tmp_path_factory.mktemp("shapes")) as running:
        yield running


def _deployment(namespace: str, name: str, replicas: int) -> dict[str, Any]:
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
                "spec": {"containers": [container]},
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
    shape, prefix = SHAPES[name], f"{name}-"
    namespace = f"shape-{name.replace('.', '-')}"  # a DNS label: no dots
    cluster.add_nodes(shape_nodes(shape, prefix))
    cluster.ensure_namespace(namespace)
    servers = {f"{prefix}n{index}" for index in shape.server_nodes}
    with cluster.cordoned_unless(lambda node: node["metadata"]["name"] == f"{prefix}n1"):
        cluster.apply([_deployment(namespace, "client", 2)])
        cluster.wait_ready(namespace, "client", 2)
    with cluster.cordoned_unless(lambda node: node["metadata"]["name"] in servers):
        cluster.apply([_deployment(namespace, "server", 3)])
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
