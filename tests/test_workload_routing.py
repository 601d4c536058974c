"""Routing advice from workload traffic (Istio's), counted per workload: the same calls, advice
and rerouting as the pod traffic it stands for, spelled out pod pair by pod pair, each pair
both ways as its series named it."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from harness import builders as b
from rebalancer.cluster.model import Snapshot
from rebalancer.cost.figures import Price
from rebalancer.cost.routing import advise
from rebalancer.cost.service_calls import ServiceCalls, calls_of
from rebalancer.cost.workload_calls import WorkloadCalls
from rebalancer.planning.cycle import plan_cycle
from rebalancer.planning.state import PlannerState
from rebalancer.traffic.mapping import read_traffic
from rebalancer.traffic.model import PodTraffic, Sample, WorkloadTraffic
from rebalancer.traffic.queries import build_queries
from rebalancer.traffic.settings import IstioSource
from tests.conftest import (
    SERVICE_KINDS,
    assert_same_advice,
    make_policy,
    routed_service,
    snapshot_of,
)

ISTIO = build_queries(IstioSource(source="istio"))
PRICE = Price(0.02, 1.0, 0)


def _series(source: str, destination: str, rate: float) -> Sample:
    return Sample(("default", source, "default", destination), rate)


def _workload_traffic(snapshot: Snapshot, series: list[Sample]) -> WorkloadTraffic:
    traffic = read_traffic(series, None, ISTIO, snapshot, 60)
    assert isinstance(traffic, WorkloadTraffic), traffic
    return traffic


def _spelled_out(traffic: WorkloadTraffic) -> PodTraffic:
    """Every pod pair of each workload pair, each way at the rate its series named."""
    rates: dict[tuple[str, str], float] = {}
    for (first, second), rate in traffic.rates.items():
        forward = traffic.forward.get((first, second), 0.0)
        pairs = (
            itertools.combinations(traffic.members[first], 2)
            if first == second
            else itertools.product(traffic.members[first], traffic.members[second])
        )
        for one, other in pairs:
            rates[one, other] = forward
            rates[other, one] = rate - forward
    return PodTraffic.of(rates)


def _random_cluster(seed: int) -> tuple[Snapshot, list[Sample]]:
    """Deployments in zones a-c and on a node without a zone, behind Services of every kind
    the advice tells apart (cluster-wide, PreferSameZone, Local, Topology Aware Routing,
    endpoints in a zone no node is in), some endpoints not ready, some workloads behind two
    Services, some behind a Service for only part of their pods, some behind none; and
    workload series between them, within one workload too."""
    rng = random.Random(seed)
    zones = ["a", "b", "c"]
    nodes = [(f"n-{zone}{i}", zone) for zone in zones for i in range(2)] + [("n-none", None)]
    objects: list[b.Obj] = [b.node(name, zone) for name, zone in nodes]
    sizes: dict[str, int] = {}
    for number in range(8):
        name = f"s{number}"
        placed = [rng.choice(nodes) for _ in range(rng.randint(1, 5))]
        sizes[name] = len(placed)
        deployment = b.deployment_pods(name, [node for node, _zone in placed])
        objects += deployment
        kind = rng.choice([*SERVICE_KINDS, "none"])
        if kind == "none":
            continue
        pods = [o["metadata"]["name"] for o in deployment if o["kind"] == "Pod"]
        listed = [(pod, node, zone) for pod, (node, zone) in zip(pods, placed, strict=True)]
        if number % 3 == 2:  # a Service for only some of the workload's pods
            listed = listed[: rng.randint(1, len(listed))]
        objects += routed_service(rng, name, kind, listed, second=number % 4 == 3)
    names = list(sizes)
    ends = {(rng.choice(names), rng.choice(names)) for _ in range(20)}
    series = [
        # a whole number per pod pair, so both ways of counting add up exactly
        _series(source, destination, rng.randint(1, 40) * sizes[source] * sizes[destination])
        for source, destination in sorted(ends)
    ]
    return snapshot_of(objects), series


@pytest.mark.parametrize("seed", range(40))
def test_workload_calls_are_the_calls_of_the_pod_pairs_they_stand_for(seed: int) -> None:
    snapshot, series = _random_cluster(seed)
    traffic = _workload_traffic(snapshot, series)
    by_workload = WorkloadCalls.of(traffic, snapshot)
    by_pod = ServiceCalls.of(_spelled_out(traffic), snapshot)
    counted, spelled = by_workload.tally(), by_pod.tally()
    assert counted.zonal == pytest.approx(spelled.zonal)
    assert counted.by_node.keys() == spelled.by_node.keys()
    assert list(counted.by_node.values()) == pytest.approx(
        [spelled.by_node[key] for key in counted.by_node]
    )
    assert calls_of(by_workload).keys() == calls_of(by_pod).keys()
    fast, slow = advise(by_workload, 1.5, PRICE), advise(by_pod, 1.5, PRICE)
    assert_same_advice(fast, slow)


def _web_and_api(api_zones: str, *, web_service: bool = False) -> Snapshot:
    """web, one pod in each of zones a-c, and api, one pod in each of `api_zones`, behind a
    Service routed cluster-wide; web behind one too if asked."""
    objects = [b.node(f"n-{zone}", zone) for zone in "abc"]
    for name, zones, behind in (("web", "abc", web_service), ("api", api_zones, True)):
        deployment = b.deployment_pods(name, [f"n-{zone}" for zone in zones])
        objects += deployment
        if behind:
            pods = [o["metadata"]["name"] for o in deployment if o["kind"] == "Pod"]
            listed = [(pod, f"n-{zone}", zone) for pod, zone in zip(pods, zones, strict=True)]
            objects += [b.service(name, {"app": name}), b.endpoint_slice(f"{name}-1", name, listed)]
    return snapshot_of(objects)


def test_the_calls_kept_in_their_zone_leave_the_traffic_planned_on() -> None:
    """api in zones a and b: PreferSameZone keeps the calls from a and b in their zone, and
    those from c cross as before: a third of the pair's rate is left to plan moves on."""
    snapshot = _web_and_api("ab")
    traffic = _workload_traffic(snapshot, [_series("web", "api", 90.0)])
    calls = WorkloadCalls.of(traffic, snapshot)
    [advice] = advise(calls, 2.0, PRICE)
    assert advice.recommended == "PreferSameZone"
    assert advice.zones_without_endpoint == ("c",)
    assert advice.crossing_today == pytest.approx(60.0)  # half of a's and b's calls, all of c's
    assert advice.crossing_recommended == pytest.approx(30.0)
    routed = calls.rerouted({"default/api": "PreferSameZone"})
    pair = ("Deployment/default/api", "Deployment/default/web")
    assert routed.rates == {pair: pytest.approx(90.0 / 6 / 3)}
    assert routed.forward == {pair: 0.0}  # api sorts first: web's calls went the other way
    assert calls.rerouted({}) is traffic


def test_replies_and_calls_between_services_are_rerouted_as_named() -> None:
    """web is behind a Service too, so each way is the calls its series named: web's calls to
    api stay in their zones, api's to web (not rerouted) stay in the pair's rate."""
    snapshot = _web_and_api("abc", web_service=True)
    traffic = _workload_traffic(
        snapshot, [_series("web", "api", 90.0), _series("api", "web", 45.0)]
    )
    routed = WorkloadCalls.of(traffic, snapshot).rerouted({"default/api": "PreferSameZone"})
    pair = ("Deployment/default/api", "Deployment/default/web")
    assert routed.rates == {pair: pytest.approx(45.0 / 9)}
    assert routed.forward == {pair: pytest.approx(45.0 / 9)}


def test_no_move_is_planned_for_calls_routing_keeps_in_their_zone() -> None:
    """Through a whole cycle with workload traffic: web and api in every zone, api routed
    cluster-wide. Routing keeps it all local, so with plan_around no move is planned and the
    routing section says so; without plan_around the moves are planned on today's routing."""
    snapshot = _web_and_api("abc")
    traffic = _workload_traffic(snapshot, [_series("web", "api", 9000.0)])
    policy = make_policy(
        traffic={"source": "istio", "unit": "bytes/s"}, routing={"plan_around": True}
    )
    outcome = plan_cycle(policy, snapshot, traffic, PlannerState(), now=1e6)
    [routing] = outcome.routing
    assert routing.recommended == "PreferSameZone"
    assert routing.kept_local == pytest.approx(6000.0)
    assert outcome.today is not None and outcome.today.crossing["zone"] == pytest.approx(6000.0)
    assert outcome.plan is not None and outcome.plan.before.crossing["zone"] == 0.0
    assert outcome.plan.moves == ()
    off = make_policy(
        traffic={"source": "istio", "unit": "bytes/s"}, routing={"plan_around": False}
    )
    unplanned = plan_cycle(off, snapshot, traffic, PlannerState(), now=1e6)
    assert unplanned.plan is not None
    assert unplanned.plan.before.crossing["zone"] == pytest.approx(6000.0)
    assert np.isclose(unplanned.routing[0].kept_local, 6000.0)
