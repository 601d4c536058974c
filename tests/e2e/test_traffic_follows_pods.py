"""Prometheus, scraping the ground-truth exporter, names the real pods and follows them when
they are evicted and replaced."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.cluster import LocalCluster
from harness.live import live_scenario
from harness.process import wait_until
from harness.prometheus import PrometheusServer
from rebalancer.simulator.scenario import Scenario, parse_scenario
from tests.e2e.test_control_plane import evict

pytestmark = pytest.mark.e2e

SCENARIO = """
name: follow
workloads:
  - {name: client, namespace: follow, replicas: 2, pdb: {min_available: 1}}
  - {name: server, namespace: follow, replicas: 2}
traffic:
  - {source: follow/client, destination: follow/server, routing: even, rate: 40}
"""
SERIES = 'hubble_flows_processed_total{source_namespace="follow"}'


@pytest.fixture(scope="module")
def watched(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Scenario, PrometheusServer]]:
    scenario = parse_scenario(SCENARIO, "follow")
    with live_scenario(cluster, scenario, tmp_path_factory.mktemp("prometheus")) as (_, server):
        yield scenario, server


def _series_pods(server: PrometheusServer) -> set[tuple[str, str]]:
    return {
        (s["metric"]["source_pod"], s["metric"]["destination_pod"]) for s in server.query(SERIES)
    }


def _real_pairs(cluster: LocalCluster) -> set[tuple[str, str]]:
    clients = [p["metadata"]["name"] for p in cluster.ready_pods("follow", "client")]
    servers = [p["metadata"]["name"] for p in cluster.ready_pods("follow", "server")]
    return {(c, s) for c in clients for s in servers}


def test_series_carry_the_real_pod_names_and_follow_an_eviction(
    cluster: LocalCluster, watched: tuple[Scenario, PrometheusServer]
) -> None:
    _scenario, server = watched
    wait_until(lambda: _series_pods(server) == _real_pairs(cluster), 30, "series of every pair")
    victim = cluster.ready_pods("follow", "client")[0]
    assert evict(cluster, victim) == 201
    wait_until(
        lambda: (
            len(cluster.ready_pods("follow", "client")) == 2
            and victim["metadata"]["name"]
            not in {p["metadata"]["name"] for p in cluster.ready_pods("follow", "client")}
        ),
        60,
        "replacement client",
    )
    wait_until(lambda: _series_pods(server) == _real_pairs(cluster), 30, "series after eviction")
    assert all(victim["metadata"]["name"] != source for source, _ in _series_pods(server))
    rates = server.query(f"sum(rate({SERIES}[10s]))")
    assert rates and float(rates[0]["value"][1]) > 0
