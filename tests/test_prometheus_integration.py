"""Against a real Prometheus scraping a Hubble-style or an Istio-style exporter: the plan follows
the true traffic, and with Prometheus gone nothing is planned and the exit code says why."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness import builders as b
from harness.exporter import HUBBLE_FLOWS, ISTIO_TCP_SENT, FlowCounters, FlowMetric, Pair, serve
from harness.prometheus import Engine, PrometheusServer
from rebalancer.cli import main
from tests.conftest import LIVE_POLICY_YAML, all_pairs, grid_nodes, pod_keys, snapshot_of

pytestmark = pytest.mark.integration


CLIENTS_AND_SERVERS = [
    *grid_nodes(),
    *b.deployment_pods("client", ["node-a11", "node-a12", "node-a21"]),
    *b.deployment_pods("server", ["node-b11", "node-b12", "node-b21"]),
]


@contextmanager
def watched(
    workdir: Path,
    objects: list[b.Obj],
    source: str,
    rates: dict[Pair, float],
    metric: FlowMetric,
    *,
    engine: Engine = "prometheus",
) -> Iterator[tuple[Path, Path, str]]:
    """The policy and snapshot files, and the URL of a Prometheus that has scraped the exporter
    of these rates for a whole rate() window: rate() divides by the whole window, so it is true
    only once the window is full."""
    snapshot_file = workdir / "snapshot.json"
    snapshot_file.write_text(json.dumps(b.k8s_list(objects)))
    policy_file = workdir / "policy.yaml"
    policy_file.write_text(LIVE_POLICY_YAML.replace("source: hubble", f"source: {source}"))
    with serve(FlowCounters(lambda: rates, metric)) as target:
        server = PrometheusServer(workdir, [target], engine=engine)
        try:
            server.wait_ready()
            server.wait_for(f"count_over_time({metric.name}_total[10s]) >= 10", len(rates))
            yield policy_file, snapshot_file, server.url
        finally:
            server.stop()


def _split_pair(
    tmp_path_factory: pytest.TempPathFactory, engine: Engine
) -> Iterator[tuple[Path, Path, str]]:
    """Clients in zone a talking to servers in zone b, a quiet pair, and `engine` watching."""
    objects = [*CLIENTS_AND_SERVERS, *b.deployment_pods("quiet", ["node-a22", "node-b22"])]
    snapshot = snapshot_of(objects)
    rates = all_pairs(pod_keys(snapshot, "client"), pod_keys(snapshot, "server"), 20.0)
    quiet = pod_keys(snapshot, "quiet")
    rates[(quiet[0], quiet[1])] = 0.05
    rates[("default/deleted-pod-1", quiet[0])] = 5.0  # a pod that is gone from the cluster
    workdir = tmp_path_factory.mktemp(engine)
    with watched(workdir, objects, "hubble", rates, HUBBLE_FLOWS, engine=engine) as files:
        yield files


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    yield from _split_pair(tmp_path_factory, "prometheus")


@pytest.fixture(scope="module")
def vm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """The same, read from VictoriaMetrics, a second PromQL engine (MetricsQL)."""
    yield from _split_pair(tmp_path_factory, "victoria-metrics")


@pytest.fixture(scope="module")
def istio_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, str]]:
    """The same clients and servers, with traffic that Istio's proxies report per workload, in
    bytes: 180 kB/s between them, and 300 B/s between the two pods of a quiet workload, below
    the 1 KiB/s a pair needs by default when the source counts bytes."""
    rates = {
        ("default/client", "default/server"): 180_000.0,
        ("default/quiet", "default/quiet"): 300.0,
        ("default/gone", "default/server"): 5.0,
    }
    objects = [*CLIENTS_AND_SERVERS, *b.deployment_pods("quiet", ["node-a22", "node-b22"])]
    workdir = tmp_path_factory.mktemp("prometheus-istio")
    with watched(workdir, objects, "istio", rates, ISTIO_TCP_SENT) as files:
        yield files


def plan(
    policy: Path, snapshot: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, object], str]:
    code = main(
        [
            "plan",
            "--policy",
            str(policy),
            "--snapshot",
            str(snapshot),
            "--prometheus",
            url,
            "--output",
            "json",
        ]
    )
    out, err = capsys.readouterr()
    return code, json.loads(out), err


@pytest.mark.parametrize(
    ("watched_cluster", "traffic"),
    [
        ("cluster", {"series": 11, "unmatched": {"unknown-pod": 1}}),
        ("vm_cluster", {"series": 11, "unmatched": {"unknown-pod": 1}}),
        ("istio_cluster", {"series": 3, "unmatched": {"unknown-workload": 1}}),
    ],
)
def test_plan_reads_real_prometheus_and_moves_the_split_pair(
    watched_cluster: str,
    traffic: dict[str, object],
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """9 pod pairs at 20 a second, all crossing zones, as the exporter says: one series each
    from Hubble, or 180 kB/s between the two workloads from Istio, split over their pods. The
    quiet pair is below the threshold for the source's unit, so it is neither moved nor
    counted."""
    policy, snapshot, url = request.getfixturevalue(watched_cluster)
    code, document, _err = plan(policy, snapshot, url, capsys)
    assert code == 0
    moves = document["moves"]
    assert isinstance(moves, list) and moves
    for move in moves:
        assert move["pod"].startswith(("default/client", "default/server"))
        assert move["from"]["zone"] != move["to"]["zone"]
    figures, predicted = document["figures"], document["predicted"]
    assert isinstance(figures, dict) and isinstance(predicted, dict)
    scale = 1000.0 if watched_cluster == "istio_cluster" else 1.0
    assert figures["crossing"]["zone"] == pytest.approx(180.0 * scale, rel=0.05)
    assert predicted["crossing"]["zone"] < figures["crossing"]["zone"]
    assert document["traffic"] == traffic
    assert "default/quiet" not in json.dumps(document)


def test_with_prometheus_stopped_nothing_is_planned_and_exit_is_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [*grid_nodes(), *b.deployment_pods("client", ["node-a11", "node-a12"])]
    snapshot = tmp_path / "snapshot.json"
    snapshot.write_text(json.dumps(b.k8s_list(objects)))
    policy = tmp_path / "policy.yaml"
    policy.write_text(LIVE_POLICY_YAML)
    with serve(FlowCounters(dict)) as target:
        server = PrometheusServer(tmp_path, [target])
        server.wait_ready()
        url = server.url
        server.stop()
    code, document, err = plan(policy, snapshot, url, capsys)
    assert code == 3
    assert document["moves"] == []
    assert document["error"] == {"reason": "unreachable", "detail": f"{url}: ConnectionError"}
    assert err.strip().endswith(f"no moves: traffic unreachable: {url}: ConnectionError")
