"""The routing prediction: kube-proxy's choice of endpoints under each set of hints, the hints
a trafficDistribution brings, who calls which Service, and the advice made of them."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from harness import builders as b
from rebalancer.cluster.model import Endpoint, Snapshot
from rebalancer.cost import routing
from rebalancer.cost.figures import SECONDS_PER_MONTH, Price
from rebalancer.cost.kube_proxy import (
    MESH_ANNOTATION,
    Call,
    Chooser,
    hinted,
    route,
    topology_mode,
)
from rebalancer.cost.routing import ROUTING_ANNOTATION, RoutingAdvice, advise
from rebalancer.cost.service_calls import ServiceCalls, calls_of
from rebalancer.planning.cycle import plan_cycle
from rebalancer.planning.report import outcome_json, outcome_table
from rebalancer.planning.state import PlannerState
from rebalancer.traffic.model import PodTraffic
from tests.conftest import (
    SERVICE_KINDS,
    assert_same_advice,
    make_policy,
    routed_service,
    snapshot_of,
)


def chosen(
    endpoints: Sequence[Endpoint], node: str | None, zone: str | None, local_only: bool
) -> list[Endpoint]:
    return [endpoints[i] for i in Chooser(endpoints, local_only)(node, zone)]


def _endpoint(pod: str, node: str, zone: str | None, ready: bool = True) -> Endpoint:
    return Endpoint(f"default/{pod}", node, zone, ready, ready, not ready)


def _cluster(
    servers: list[tuple[str, str]],
    clients: list[tuple[str, str]],
    distribution: str | None = None,
    mutate: b.Mutator = None,
) -> Snapshot:
    """Nodes n-<zone>, one per zone; servers and clients as (pod, zone)."""
    zones = sorted({zone for _pod, zone in [*servers, *clients]})
    hints = "PreferSameZone" if distribution in ("PreferSameZone", "PreferClose") else None
    return snapshot_of(
        [
            *(b.node(f"n-{zone}", zone) for zone in zones),
            *(b.pod(pod, f"n-{zone}", None, labels={"app": "api"}) for pod, zone in servers),
            *(b.pod(pod, f"n-{zone}", None) for pod, zone in clients),
            b.service("api", {"app": "api"}, traffic_distribution=distribution, mutate=mutate),
            b.endpoint_slice(
                "api-1", "api", [(pod, f"n-{zone}", zone) for pod, zone in servers], hinted=hints
            ),
        ]
    )


def _calls(clients: list[tuple[str, str]], rate: float = 1.0) -> PodTraffic:
    """Each client calls `api-0` (the Service's pods are all one to the prediction)."""
    return PodTraffic.of({(f"default/{pod}", "default/api-0"): rate for pod, _zone in clients})


PRICE = Price(per_gb_cross_zone=0.02, bytes_per_unit=None, zone_level=0)


def _advise(
    snapshot: Snapshot, traffic: PodTraffic, max_endpoint_load: float = 2.0
) -> list[RoutingAdvice]:
    return advise(ServiceCalls.of(traffic, snapshot), max_endpoint_load, PRICE)


THREE = [("api-0", "a"), ("api-1", "b"), ("api-2", "c")]
CLIENTS = [("web-a", "a"), ("web-b", "b"), ("web-c", "c")]


def test_cluster_wide_routing_sends_two_thirds_across_three_zones_and_same_zone_none() -> None:
    [advice] = _advise(_cluster(THREE, CLIENTS), _calls(CLIENTS))
    assert (advice.service, advice.today, advice.recommended) == (
        "default/api",
        "Cluster",
        "PreferSameZone",
    )
    assert advice.calls == pytest.approx(3.0)
    assert advice.crossing_today == pytest.approx(2.0)
    assert advice.crossing_recommended == pytest.approx(0.0)
    assert advice.kept_local == pytest.approx(2.0)
    assert advice.zones_without_endpoint == ()


def test_a_zone_without_an_endpoint_falls_back_to_every_endpoint_and_is_named() -> None:
    snapshot = _cluster(THREE[:2], CLIENTS)
    [advice] = _advise(snapshot, _calls(CLIENTS))
    assert advice.zones_without_endpoint == ("c",)
    assert advice.crossing_recommended == pytest.approx(1.0)  # zone c's calls, all across
    assert advice.crossing_today == pytest.approx(2.0)  # half of each zone's, and all of c's


def test_no_advice_that_would_pile_a_zones_clients_on_one_endpoint() -> None:
    servers = [("api-0", "a"), ("api-1", "b"), ("api-2", "b"), ("api-3", "b")]
    clients = [(f"web-{i}", "a") for i in range(9)] + [("web-b", "b")]
    [advice] = _advise(_cluster(servers, clients), _calls(clients))
    assert advice.recommended is None
    assert "3.6x an even share" in advice.note  # 9 of 10 calls on 1 of 4 endpoints
    [relaxed] = _advise(_cluster(servers, clients), _calls(clients), max_endpoint_load=4.0)
    assert relaxed.recommended == "PreferSameZone"


def test_a_service_already_routed_in_its_zone_is_left_as_it_is() -> None:
    snapshot = _cluster(THREE, CLIENTS, distribution="PreferClose")
    [advice] = _advise(snapshot, _calls(CLIENTS))
    assert (advice.today, advice.recommended, advice.crossing_today) == (
        "PreferSameZone",
        None,
        0.0,
    )


def test_a_service_the_mesh_routes_in_its_zone_is_left_as_it_is() -> None:
    """Istio's proxies keep its calls in their zone by the annotation, though no hint is
    written: nothing crosses today and nothing is recommended; the field, where set, wins."""

    def annotate(distribution: str | None) -> b.Mutator:
        def mutate(service: b.Obj) -> None:
            service["metadata"]["annotations"] = {MESH_ANNOTATION: "PreferClose"}
            if distribution:
                service["spec"]["trafficDistribution"] = distribution

        return mutate

    [advice] = _advise(_cluster(THREE, CLIENTS, mutate=annotate(None)), _calls(CLIENTS))
    assert advice.today == f"{MESH_ANNOTATION}=PreferClose"
    assert advice.recommended is None
    assert advice.crossing_today == 0.0
    snapshot = _cluster(THREE, CLIENTS, mutate=annotate("NoSuchValue"))
    [advice] = _advise(snapshot, _calls(CLIENTS))
    assert advice.today == "Cluster" and advice.crossing_today == pytest.approx(2.0)
    assert advice.recommended == "PreferSameZone"


def test_the_topology_mode_annotation_is_named_as_what_to_remove() -> None:
    def annotate(service: b.Obj) -> None:
        service["metadata"]["annotations"] = {"service.kubernetes.io/topology-mode": "Auto"}

    [advice] = _advise(_cluster(THREE, CLIENTS, mutate=annotate), _calls(CLIENTS))
    assert advice.today == "service.kubernetes.io/topology-mode=Auto"
    assert advice.recommended == "PreferSameZone"
    assert (
        advice.note
        == "remove service.kubernetes.io/topology-mode: it overrides trafficDistribution"
    )


def test_kube_proxy_uses_zone_hints_only_when_every_ready_endpoint_has_one() -> None:
    endpoints = [
        *hinted([_endpoint("a0", "n1", "a"), _endpoint("b0", "n2", "b")], "PreferSameZone")
    ]
    assert [e.pod for e in chosen(endpoints, "n1", "a", False)] == ["default/a0"]
    unhinted = [*endpoints, _endpoint("c0", "n3", None)]
    assert len(chosen(unhinted, "n1", "a", False)) == 3
    # a not-ready endpoint without hints does not turn them off
    assert (
        len(chosen([*endpoints, _endpoint("c1", "n3", None, ready=False)], "n1", "a", False)) == 1
    )


def test_kube_proxy_prefers_the_node_then_the_zone_then_the_cluster() -> None:
    endpoints = hinted(
        [_endpoint("a0", "n1", "a"), _endpoint("a1", "n2", "a"), _endpoint("b0", "n3", "b")],
        "PreferSameNode",
    )
    assert [e.pod for e in chosen(endpoints, "n1", "a", False)] == ["default/a0"]
    assert [e.pod for e in chosen(endpoints, "n9", "a", False)] == ["default/a0", "default/a1"]
    assert len(chosen(endpoints, "n9", "c", False)) == 3


def test_local_policy_drops_calls_from_a_node_without_an_endpoint() -> None:
    endpoints = [_endpoint("a0", "n1", "a")]
    routed = route(endpoints, [Call("n1", "a", 1.0), Call("n2", "a", 2.0)], True, with_load=True)
    assert (routed.dropped, routed.crossing, dict(routed.load)) == (2.0, 0.0, {0: 1.0})


def test_with_no_ready_endpoint_calls_go_to_serving_terminating_ones_anywhere() -> None:
    leaving = Endpoint("default/a0", "n1", "b", False, True, True)
    gone = Endpoint("default/a1", "n1", "b", False, False, True)
    assert chosen([leaving, gone], "n2", "a", False) == [leaving]


def test_calls_go_from_the_source_to_its_destinations_services_only() -> None:
    snapshot = snapshot_of(
        [
            b.node("n-a", "a"),
            b.node("n-b", "b"),
            b.pod("web", "n-a", None),
            b.pod("api-0", "n-b", None, labels={"app": "api"}),
            b.pod("api-1", "n-a", None, labels={"app": "api"}),
            b.service("api", {"app": "api"}),
            b.service(
                "api-peers", {"app": "api"}, mutate=lambda s: s["spec"].update(clusterIP="None")
            ),
            b.endpoint_slice("api-1", "api", [("api-0", "n-b", "b"), ("api-1", "n-a", "a")]),
            b.endpoint_slice(
                "peers-1", "api-peers", [("api-0", "n-b", "b"), ("api-1", "n-a", "a")]
            ),
        ]
    )
    traffic = PodTraffic.of(
        {
            ("default/web", "default/api-0"): 3.0,  # calls
            ("default/api-0", "default/web"): 1.0,  # their replies, which flow counts include
            ("default/api-0", "default/api-1"): 5.0,  # peers: not calls to their own Service
        }
    )
    calls = calls_of(ServiceCalls.of(traffic, snapshot))
    assert list(calls) == ["default/api"]  # the headless Service routes nothing
    assert calls["default/api"] == [Call(None, "a", 4.0)]  # replies and all, per zone


def test_the_plan_says_which_services_routing_would_keep_in_their_zone() -> None:
    """Through a whole cycle: web in each zone calls api in each zone evenly, as cluster-wide
    routing spreads it; the plan's routing section, in JSON and in the table, says what
    PreferSameZone keeps local and what that bills (bytes/s, so it is priced)."""
    snapshot = _cluster(THREE, CLIENTS)
    traffic = PodTraffic.of(
        {
            (f"default/{client}", f"default/{server}"): 1000.0
            for client, _zone in CLIENTS
            for server, _zone2 in THREE
        }
    )
    policy = make_policy(traffic={"source": "hubble", "unit": "bytes/s"})
    outcome = plan_cycle(policy, snapshot, traffic, PlannerState(), now=1e6)
    [routing] = outcome_json(outcome, "bytes/s", "USD")["routing"]
    assert routing["recommended"] == "PreferSameZone"
    assert routing["crossing_today"] == pytest.approx(6000.0)
    assert routing["kept_local"] == pytest.approx(6000.0)
    assert routing["monthly_saved"] == pytest.approx(6000.0 * SECONDS_PER_MONTH / 1e9 * 0.02)
    table = outcome_table(outcome, "bytes/s", "USD")
    assert "routing (Services whose calls cross zones):" in table
    assert "default/api  Cluster  PreferSameZone  6000 of 9000  6000" in table
    quiet = make_policy(traffic={"source": "hubble", "unit": "bytes/s"}, routing={"advise": False})
    assert plan_cycle(quiet, snapshot, traffic, PlannerState(), now=1e6).routing == ()


def test_a_pod_behind_two_services_splits_its_calls_and_local_ones_count_by_node() -> None:
    def local(service: b.Obj) -> None:
        service["spec"]["internalTrafficPolicy"] = "Local"

    snapshot = snapshot_of(
        [
            b.node("n-a", "a"),
            b.node("n-a2", "a"),
            b.pod("web", "n-a", None),
            b.pod("web2", "n-a2", None),
            b.pod("api-0", "n-a", None, labels={"app": "api"}),
            b.service("api", {"app": "api"}),
            b.service("api-local", {"app": "api"}, mutate=local),
            b.endpoint_slice("api-1", "api", [("api-0", "n-a", "a")]),
            b.endpoint_slice("local-1", "api-local", [("api-0", "n-a", "a")]),
        ]
    )
    traffic = PodTraffic.of(
        {("default/web", "default/api-0"): 4.0, ("default/web2", "default/api-0"): 2.0}
    )
    calls = calls_of(ServiceCalls.of(traffic, snapshot))
    assert calls["default/api"] == [Call(None, "a", 3.0)]
    assert sorted(calls["default/api-local"], key=str) == [
        Call("n-a", "a", 2.0),
        Call("n-a2", "a", 1.0),
    ]
    routed = route(
        snapshot.services["default/api-local"].endpoints, calls["default/api-local"], True
    )
    assert routed.dropped == 1.0  # web2's node has no endpoint


def _even_calls() -> PodTraffic:
    return PodTraffic.of(
        {
            (f"default/{client}", f"default/{server}"): 1000.0
            for client, _zone in CLIENTS
            for server, _zone2 in THREE
        }
    )


def test_rerouted_traffic_sends_each_clients_calls_to_its_zone() -> None:
    calls = ServiceCalls.of(_even_calls(), _cluster(THREE, CLIENTS))
    routed = calls.rerouted({"default/api": "PreferSameZone"})
    assert routed.rates == {
        ("default/api-0", "default/web-a"): 3000.0,
        ("default/api-1", "default/web-b"): 3000.0,
        ("default/api-2", "default/web-c"): 3000.0,
    }
    assert routed.forward.tolist() == [0.0, 0.0, 0.0]  # api-x sorts first: the calls go back


def test_moves_are_planned_on_the_traffic_the_recommended_routing_leaves() -> None:
    """Routing keeps all of it local, so the plan spends no move on it and says so in three
    columns; with plan_around off, or the Service's routing kept, it plans as routed today."""
    policy = make_policy(
        traffic={"source": "hubble", "unit": "bytes/s"}, routing={"plan_around": True}
    )
    outcome = plan_cycle(policy, _cluster(THREE, CLIENTS), _even_calls(), PlannerState(), now=1e6)
    assert outcome.today is not None and outcome.today.crossing["zone"] == pytest.approx(6000.0)
    assert outcome.plan is not None and outcome.plan.before.crossing["zone"] == 0.0
    assert outcome.plan.moves == ()
    document = outcome_json(outcome, "bytes/s", "USD")
    assert document["figures"]["crossing"]["zone"] == pytest.approx(6000.0)
    assert document["routed"]["crossing"]["zone"] == 0.0
    assert "figure                       now    after routing  after plan" in outcome_table(
        outcome, "bytes/s", "USD"
    )

    def keep(service: b.Obj) -> None:
        service["metadata"]["annotations"] = {ROUTING_ANNOTATION: "keep"}

    kept = plan_cycle(
        policy, _cluster(THREE, CLIENTS, mutate=keep), _even_calls(), PlannerState(), now=1e6
    )
    off = make_policy(
        traffic={"source": "hubble", "unit": "bytes/s"}, routing={"plan_around": False}
    )
    unplanned = plan_cycle(off, _cluster(THREE, CLIENTS), _even_calls(), PlannerState(), now=1e6)
    for outcome in (kept, unplanned):
        assert outcome.today is None and outcome.plan is not None
        assert outcome.plan.before.crossing["zone"] == pytest.approx(6000.0)
        assert outcome.routing[0].recommended == "PreferSameZone"  # still said


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            {"service.kubernetes.io/topology-mode": "Auto"},
            "service.kubernetes.io/topology-mode=Auto",
        ),
        ({"service.kubernetes.io/topology-mode": "AUTO"}, None),
        (
            {
                "service.kubernetes.io/topology-aware-hints": "Disabled",
                "service.kubernetes.io/topology-mode": "Auto",
            },
            None,  # the deprecated key, where set, is the one read
        ),
    ],
)
def test_the_topology_annotation_is_read_as_the_endpointslice_controller_reads_it(
    annotations: dict[str, str], expected: str | None
) -> None:
    def annotate(service: b.Obj) -> None:
        service["metadata"]["annotations"] = annotations

    [service] = _cluster(THREE, CLIENTS, mutate=annotate).services.values()
    assert topology_mode(service) == expected


def test_local_calls_use_the_nodes_terminating_endpoints_when_it_has_no_ready_one() -> None:
    leaving = Endpoint("default/a0", "n1", "a", False, True, True)
    elsewhere = _endpoint("a1", "n2", "a")
    assert chosen([leaving, elsewhere], "n1", "a", True) == [leaving]
    assert chosen([leaving, elsewhere], "n2", "a", True) == [elsewhere]


def test_replies_are_rerouted_with_their_calls() -> None:
    """Flow counts name each pair both ways; the replies follow the calls they answer."""
    traffic = PodTraffic.of(
        {
            **{(f"default/{c}", f"default/{s}"): 600.0 for c, _ in CLIENTS for s, _ in THREE},
            **{(f"default/{s}", f"default/{c}"): 400.0 for c, _ in CLIENTS for s, _ in THREE},
        }
    )
    calls = ServiceCalls.of(traffic, _cluster(THREE, CLIENTS))
    routed = calls.rerouted({"default/api": "PreferSameZone"})
    assert routed.rates == {
        ("default/api-0", "default/web-a"): 3000.0,
        ("default/api-1", "default/web-b"): 3000.0,
        ("default/api-2", "default/web-c"): 3000.0,
    }


def _random_cluster(seed: int) -> tuple[Snapshot, PodTraffic]:
    """Services of every kind the advice tells apart, in zones a-c (and endpoints in a zone no
    node is in), some endpoints not ready, pods behind two Services, clients without a zone."""
    rng = random.Random(seed)
    zones = ["a", "b", "c"]
    nodes = [(f"n-{zone}{i}", zone) for zone in zones for i in range(2)] + [("n-none", None)]
    objects: list[b.Obj] = [b.node(name, zone) for name, zone in nodes]
    pods: list[str] = []
    for number in range(12):
        name = f"s{number}"
        placed = [(f"{name}-{i}", *rng.choice(nodes)) for i in range(rng.randint(1, 5))]
        objects += [b.pod(pod, node, None, labels={"app": name}) for pod, node, _z in placed]
        pods += [f"default/{pod}" for pod, _node, _zone in placed]
        objects += routed_service(
            rng, name, rng.choice(SERVICE_KINDS), placed, second=number % 5 == 4
        )
    clients = [(f"c{i}", *rng.choice(nodes)) for i in range(10)]
    objects += [b.pod(pod, node, None) for pod, node, _zone in clients]
    callers = [f"default/{pod}" for pod, _node, _zone in clients] + pods
    rates = {(rng.choice(callers), rng.choice(pods)): rng.uniform(1, 100) for _ in range(150)}
    return snapshot_of(objects), PodTraffic.of(
        {pair: r for pair, r in rates.items() if pair[0] != pair[1]}
    )


@pytest.mark.parametrize("seed", range(25))
def test_plain_services_worked_out_in_arrays_get_the_advice_of_the_one_by_one_path(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshot, traffic = _random_cluster(seed)
    price = Price(0.02, 1.0, 0)
    calls = ServiceCalls.of(traffic, snapshot)
    fast = advise(calls, 1.5, price)
    assert routing._plain(calls.routes).any()
    monkeypatch.setattr(routing, "_plain", lambda routes: np.zeros(len(routes.services), bool))
    slow = advise(calls, 1.5, price)
    assert_same_advice(fast, slow)
