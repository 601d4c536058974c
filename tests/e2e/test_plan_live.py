"""`rebalancer snapshot` and `rebalancer plan` read a real API server and a real Prometheus."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster import LocalCluster
from harness.exporter import ClusterTraffic
from harness.live import live_scenario
from harness.prometheus import PrometheusServer
from rebalancer.cli import main
from rebalancer.clients.inputs import load_snapshot
from rebalancer.cluster.model import WorkloadRef
from rebalancer.simulator.scenario import load_scenario
from tests.conftest import LIVE_POLICY_YAML

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples" / "scenarios"


@pytest.fixture(scope="module")
def chatty(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ClusterTraffic, PrometheusServer]]:
    scenario = load_scenario(EXAMPLES / "chatty-pair.yaml")
    with live_scenario(cluster, scenario, tmp_path_factory.mktemp("prometheus-live")) as live:
        yield live


def test_snapshot_command_writes_what_the_parser_reads(
    cluster: LocalCluster,
    chatty: tuple[ClusterTraffic, PrometheusServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    output = tmp_path / "snapshot.json"
    assert main(["snapshot", "--kubeconfig", str(cluster.kubeconfig), "--output", str(output)]) == 0
    snapshot = load_snapshot(output)
    assert len(snapshot.nodes) == 12
    clients = [
        p
        for p in snapshot.pods.values()
        if p.namespace == "shop" and p.labels.get("app") == "client"
    ]
    assert len(clients) == 3
    assert {p.workload for p in clients} == {WorkloadRef("Deployment", "shop", "client")}
    assert {pdb.name for pdb in snapshot.pdbs if pdb.namespace == "shop"} == {"client", "server"}
    assert "wrote" in capsys.readouterr().out


def test_live_plan_sees_the_true_cross_zone_traffic(
    cluster: LocalCluster,
    chatty: tuple[ClusterTraffic, PrometheusServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    traffic, server = chatty
    policy = tmp_path / "policy.yaml"
    policy.write_text(LIVE_POLICY_YAML + "scope: {namespaces: {include: [shop]}}\n")
    code = main(
        [
            "plan",
            "--policy",
            str(policy),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--prometheus",
            server.url,
            "--output",
            "json",
        ]
    )
    document = json.loads(capsys.readouterr().out)
    assert code == 0, document
    truth = traffic.true_crossing()
    shop_pairs = [
        p
        for p in document["figures"]["by_workload_pair"]
        if p["workloads"] == ["Deployment/shop/client", "Deployment/shop/server"]
    ]
    assert shop_pairs and shop_pairs[0]["rate"] == pytest.approx(120.0, rel=0.05)
    assert document["figures"]["crossing"]["zone"] == pytest.approx(
        truth["zone"], rel=0.05, abs=1.0
    )
