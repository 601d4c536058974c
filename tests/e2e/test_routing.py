"""Routing before moving, on the real control plane with a real Prometheus: Services and their
EndpointSlices (written by the real EndpointSlice controller) are read, the recommendation is
said in Events and metrics in dry-run, and trafficDistribution is set only on a Service that
opted in, under a policy that allows it. The exporter routes each call by the Services as the API
server has them, so the change shows in the traffic Prometheus reads next."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry

from harness.cluster import LocalCluster
from harness.exporter import ISTIO_TCP_SENT, ClusterTraffic
from harness.live import served_traffic
from harness.process import wait_until
from rebalancer.clients.kube_api import list_raw
from rebalancer.cost.routing import ROUTING_ANNOTATION
from rebalancer.planning.routing import CHANGED, RECOMMENDED, WOULD_CHANGE
from rebalancer.simulator.scenario import parse_scenario
from tests.conftest import LIVE_POLICY_YAML
from tests.e2e.setups import Setup, split_pair_setup

pytestmark = pytest.mark.e2e

NAMESPACE = "routing"
SCENARIO = parse_scenario(
    f"""
name: routing-live
workloads:
  - {{name: web, namespace: {NAMESPACE}, replicas: 3, spread: [{{level: zone, max_skew: 1}}]}}
  - {{name: api, namespace: {NAMESPACE}, replicas: 3, spread: [{{level: zone, max_skew: 1}}]}}
  - {{name: search, namespace: {NAMESPACE}, replicas: 3, spread: [{{level: zone, max_skew: 1}}]}}
traffic:
  - {{source: {NAMESPACE}/web, destination: {NAMESPACE}/api, routing: even, rate: 90}}
  - {{source: {NAMESPACE}/web, destination: {NAMESPACE}/search, routing: even, rate: 60}}
""",
    "routing-live",
)
# Every zone has a web client and an endpoint of each Service, so default routing sends two
# thirds of each call across zones and PreferSameZone none. No eviction budget: the pods stay
# where they are while the routing is tested.
NO_MOVES = "limits: {per_cycle: 0}\nrouting: {plan_around: true, %s}\n"


@pytest.fixture(scope="module")
def routed(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with split_pair_setup(
        cluster, NAMESPACE, tmp_path_factory.mktemp("routing"), SCENARIO
    ) as setup:
        core = client.CoreV1Api(cluster.api_client())
        core.patch_namespaced_service(
            "api", NAMESPACE, {"metadata": {"annotations": {ROUTING_ANNOTATION: "apply"}}}
        )
        yield setup


def _cycle(setup: Setup, mode: str, apply: bool) -> CollectorRegistry:
    """One cycle of a fresh controller; its metrics."""
    registry = CollectorRegistry()
    controller = setup.controller(
        mode, extra=NO_MOVES % f"apply: {str(apply).lower()}", registry=registry
    )
    report = controller.run_cycle()
    assert report.result == "ok", report.detail
    assert report.outcomes == ()
    return registry


def _distribution(setup: Setup, name: str) -> str | None:
    core = client.CoreV1Api(setup.cluster.api_client())
    service: Any = core.read_namespaced_service(name, NAMESPACE)
    return service.spec.traffic_distribution  # type: ignore[no-any-return]


def _service_events(setup: Setup, reason: str) -> dict[str, list[str]]:
    core = client.CoreV1Api(setup.cluster.api_client())
    found = list_raw("Event", lambda **kw: core.list_namespaced_event(NAMESPACE, **kw))
    by_service: dict[str, list[str]] = {}
    for event in found:
        involved = event["involvedObject"]
        if event.get("reason") == reason and involved["kind"] == "Service":
            by_service.setdefault(involved["name"], []).append(event["message"])
    return by_service


def _sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(f"topology_rebalancer_{name}", labels)
    assert value is not None, name
    return value


def test_the_endpoints_are_read_as_the_endpointslice_controller_wrote_them(
    routed: Setup,
) -> None:
    controller = routed.controller("dry-run")
    snapshot = controller.snapshots()
    api = snapshot.services[f"{NAMESPACE}/api"]
    pods = {
        key
        for key, pod in snapshot.pods.items()
        if pod.namespace == NAMESPACE and pod.labels.get("app") == "api"
    }
    assert {e.pod for e in api.endpoints} == pods
    assert len({e.zone for e in api.endpoints}) == 3
    assert api.resource_version and api.annotations[ROUTING_ANNOTATION] == "apply"


def test_dry_run_says_it_in_events_and_metrics_and_patches_nothing(routed: Setup) -> None:
    metrics = _cycle(routed, "dry-run", apply=True)
    recommended = _service_events(routed, RECOMMENDED)
    assert set(recommended) == {"search"}  # api opted in: it gets the dry-run of the change
    assert "PreferSameZone would keep" in recommended["search"][0]
    assert set(_service_events(routed, WOULD_CHANGE)) == {"api"}
    assert _sample(metrics, "routing_changes_total", result="would-set") == 1
    assert _sample(metrics, "routing_recommendations") == 2
    # Two thirds of 150 cross today; PreferSameZone keeps all of it, give or take the rate's
    # sampling in Prometheus.
    assert _sample(metrics, "routing_kept_local") == pytest.approx(100, rel=0.1)
    assert _distribution(routed, "api") is None
    assert _distribution(routed, "search") is None


def test_without_the_policy_switch_nothing_is_patched(routed: Setup) -> None:
    metrics = _cycle(routed, "evict", apply=False)
    assert _distribution(routed, "api") is None
    assert (
        sum(
            _sample(metrics, "routing_changes_total", result=result)
            for result in ("set", "would-set", "conflict", "refused", "not-kept", "failed")
        )
        == 0
    )


def test_workload_traffic_gets_the_advice_pod_traffic_gets(routed: Setup, tmp_path: Path) -> None:
    """The same calls reported per workload pair, in bytes, as Istio's proxies do, through a
    real Prometheus: the same two recommendations, and the same share kept local."""
    truth = ClusterTraffic(routed.scenario, routed.cluster.api_client())

    def in_bytes() -> dict[tuple[str, str], float]:
        return {pair: 1000 * rate for pair, rate in truth.workload_rates().items()}

    assert set(in_bytes()) == {
        (f"{NAMESPACE}/web", f"{NAMESPACE}/api"),
        (f"{NAMESPACE}/web", f"{NAMESPACE}/search"),
    }
    with served_traffic(in_bytes, [NAMESPACE], tmp_path, metric=ISTIO_TCP_SENT) as prometheus:
        registry = CollectorRegistry()
        controller = routed.controller(
            "dry-run",
            prometheus.url,
            NO_MOVES % "apply: false",
            registry,
            base=LIVE_POLICY_YAML.replace("source: hubble", "source: istio"),
        )
        report = controller.run_cycle()
    assert report.result == "ok", report.detail
    assert _sample(registry, "routing_recommendations") == 2
    assert _sample(registry, "routing_kept_local") == pytest.approx(100_000, rel=0.1)
    assert _distribution(routed, "api") is None


def test_the_opted_in_service_alone_is_set_and_the_traffic_follows(routed: Setup) -> None:
    before = _sample(_cycle(routed, "dry-run", apply=False), "routing_kept_local")
    metrics = _cycle(routed, "evict", apply=True)
    assert _sample(metrics, "routing_changes_total", result="set") == 1
    assert _distribution(routed, "api") == "PreferSameZone"
    assert _distribution(routed, "search") is None
    [message] = _service_events(routed, CHANGED)["api"]
    assert "topology-rebalancer.io/routing=apply" in message

    # The calls to api now stay in their zone, so once Prometheus's window has only the new
    # rates, routing has only search's crossing left to keep local.
    def only_search_left() -> bool:
        return _sample(_cycle(routed, "dry-run", apply=False), "routing_kept_local") < before / 2

    wait_until(only_search_left, 60, "api's calls kept in their zone, in Prometheus")
    metrics = _cycle(routed, "dry-run", apply=False)
    assert _sample(metrics, "routing_recommendations") == 1
    assert _sample(metrics, "routing_kept_local") == pytest.approx(40, rel=0.1)
