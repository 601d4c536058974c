"""Shared builders of small clusters, so each test states only what it is about."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable
from typing import Any

import pytest

from harness import builders as b
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.parse import parse_snapshot
from rebalancer.cluster.topology import Domain
from rebalancer.config.policy import Policy
from rebalancer.config.resolved import PlanningRules
from rebalancer.cost.pod_pairs import PodCostModel
from rebalancer.cost.routing import RoutingAdvice
from rebalancer.planning.cycle import build_view, propose
from rebalancer.planning.landing import Hint
from rebalancer.planning.planner import plan
from rebalancer.planning.state import PlannerState
from rebalancer.planning.types import Move, Plan
from rebalancer.simulator.scenario import Scenario, parse_scenario
from rebalancer.strategies.framework import ClusterView
from rebalancer.traffic.model import PodTraffic

LIVE_POLICY_YAML = """
topology:
  levels:
    - {name: zone, label: topology.kubernetes.io/zone, weight: 10}
    - {name: rack, label: topology.kubernetes.io/rack, weight: 3}
    - {name: host, label: kubernetes.io/hostname, weight: 1}
traffic: {source: hubble, window: 10s, max_age_seconds: 60}
"""
"""For tests against a real Prometheus scraping every second: a 10 s window fills in 10 s."""


def split_pair_scenario(namespace: str) -> Scenario:
    """A client in zone a that talks to its server in zone b, 3 replicas each, PDBs of 2."""
    return parse_scenario(
        f"""
name: split-pair-{namespace}
workloads:
  - {{name: client, namespace: {namespace}, replicas: 3, pdb: {{min_available: 2}},
     start_in: {{zone: zone-a}}}}
  - {{name: server, namespace: {namespace}, replicas: 3, pdb: {{min_available: 2}},
     start_in: {{zone: zone-b}}}}
traffic:
  - {{source: {namespace}/client, destination: {namespace}/server, routing: even, rate: 90}}
""",
        f"split-pair-{namespace}",
    )


ZONES_RACKS_POLICY: dict[str, Any] = {
    "topology": {
        "levels": [
            {"name": "zone", "label": b.ZONE_LABEL, "weight": 10},
            {"name": "rack", "label": b.RACK_LABEL, "weight": 3},
            {"name": "host", "label": b.HOST_LABEL, "weight": 1},
        ]
    },
    "thresholds": {"min_gain": 0, "min_gain_ratio": 0, "min_pair_rate": 0},
    "limits": {
        "per_cycle": None,
        "per_node": None,
        "per_namespace": None,
        "per_workload": None,
        "per_zone": None,
    },
}


def make_policy(**overrides: Any) -> Policy:
    """The zone/rack/host policy with no limits, updated key by key (one level deep)."""
    document = {key: dict(value) for key, value in ZONES_RACKS_POLICY.items()}
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(document.get(key), dict):
            document[key] = {**document[key], **value}
        else:
            document[key] = value
    return Policy.model_validate(document)


def grid_nodes(zones: str = "ab", racks: int = 2, per_rack: int = 2, **kwargs: Any) -> list[b.Obj]:
    """Nodes named node-<zone><rack><index>, for example node-a12 (zone a, rack 1, second)."""
    return [
        b.node(f"node-{zone}{rack}{index}", zone=zone, rack=f"r{rack}", **kwargs)
        for zone in zones
        for rack in range(1, racks + 1)
        for index in range(1, per_rack + 1)
    ]


def snapshot_of(objects: Iterable[b.Obj]) -> Snapshot:
    return parse_snapshot(b.k8s_list(objects), "test")


def traffic_of(rates: dict[tuple[str, str], float]) -> PodTraffic:
    return PodTraffic.of(rates, series=len(rates))


def pod_pairs_of(view: ClusterView) -> PodCostModel:
    """The view's cost model, which pod traffic holds pair by pair."""
    assert isinstance(view.cost, PodCostModel)
    return view.cost


def all_pairs(
    first: Iterable[str], second: Iterable[str], rate: float
) -> dict[tuple[str, str], float]:
    return {(x, y): rate for x in first for y in second}


def pod_keys(snapshot: Snapshot, prefix: str) -> list[str]:
    return sorted(key for key in snapshot.pods if key.split("/", 1)[1].startswith(prefix))


def plan_once(
    policy: Policy,
    snapshot: Snapshot,
    rates: dict[tuple[str, str], float],
    state: PlannerState | None = None,
    now: float = 1_000_000.0,
) -> tuple[Plan, ClusterView]:
    """Plan one cycle with persistence already satisfied, returning the plan and its view."""
    view = build_view(policy, snapshot, traffic_of(rates))
    candidates = propose(policy, view)
    observed = (state or PlannerState()).observe(candidates)
    result = plan(
        view,
        candidates,
        PlanningRules.of(policy, view.topology),
        observed,
        now=now,
        persistence_required=1,
    )
    return result, view


def chatty_objects(client_nodes: list[str], server_nodes: list[str]) -> list[b.Obj]:
    """A client and a server Deployment on the given nodes of the zone/rack grid."""
    return [
        *grid_nodes(),
        *b.deployment_pods("client", client_nodes),
        *b.deployment_pods("server", server_nodes),
    ]


def chatty_rates(objects: list[b.Obj], rate: float = 10.0) -> dict[tuple[str, str], float]:
    snapshot = snapshot_of(objects)
    return all_pairs(pod_keys(snapshot, "client"), pod_keys(snapshot, "server"), rate)


def zone_hint(owner: tuple[str, str, str], zone: str, now: float, *, required: bool) -> Hint:
    """A placement hint for the owner's next pod, to zone `zone`, live for a minute."""
    namespace, kind, name = owner
    return Hint(
        namespace=namespace,
        owner_kind=kind,
        owner_name=name,
        workload=f"{namespace}/{name}",
        domain={"topology.kubernetes.io/zone": zone},
        required=required,
        expires=now + 60,
    )


def surge_move(app: str = "client") -> Move:
    """A planned surge of the first pod of `app`'s Deployment into zone b."""
    return Move(
        pod=f"default/{app}-5d8c7-00000",
        workload=f"Deployment/default/{app}",
        origin={"zone": "a"},
        target=Domain(0, ("b",)),
        destination={"zone": "b"},
        node="node-b11",
        target_labels={b.ZONE_LABEL: "b"},
        controller=("ReplicaSet", f"{app}-5d8c7"),
        gain=1.0,
        strategy="split-peers",
        reason="test",
        uid="uid-old",
        method="surge",
    )


SERVICE_KINDS = ["plain", "plain", "plain", "zone", "local", "tar", "foreign"]
"""The kinds of Service the routing advice tells apart, plain ones the most common."""


def routed_service(
    rng: random.Random,
    name: str,
    kind: str,
    placed: list[tuple[str, str, str | None]],
    *,
    second: bool = False,
) -> list[b.Obj]:
    """A Service selecting app=`name` with an EndpointSlice of these (pod, node, zone), of a
    kind in SERVICE_KINDS: cluster-wide, PreferSameZone, Local, Topology Aware Routing, or some
    endpoints in a zone no node is in ("x"); some endpoints not ready. `second`: the same pods
    behind a second Service as well."""
    distribution = "PreferSameZone" if kind == "zone" else None

    def mutate(service: b.Obj) -> None:
        if kind == "local":
            service["spec"]["internalTrafficPolicy"] = "Local"
        if kind == "tar":
            service["metadata"]["annotations"] = {"service.kubernetes.io/topology-mode": "Auto"}

    objects = [b.service(name, {"app": name}, traffic_distribution=distribution, mutate=mutate)]
    listed = [
        (pod, node, "x" if kind == "foreign" and rng.random() < 0.5 else zone)
        for pod, node, zone in placed
    ]
    endpoint_slice = b.endpoint_slice(f"{name}-1", name, listed, hinted=distribution)
    for endpoint in endpoint_slice["endpoints"]:
        if rng.random() < 0.15:
            endpoint["conditions"]["ready"] = False
    objects.append(endpoint_slice)
    if second:
        objects.append(b.service(f"{name}-alt", {"app": name}))
        objects.append(b.endpoint_slice(f"{name}-alt-1", f"{name}-alt", listed))
    return objects


def assert_same_advice(advice: list[RoutingAdvice], expected: list[RoutingAdvice]) -> None:
    """The same Services, recommendations and notes; the same figures up to rounding."""
    assert [a.service for a in advice] == [a.service for a in expected]
    figures = ("calls", "crossing_today", "crossing_recommended", "monthly_saved")
    for one, other in zip(advice, expected, strict=True):
        exact = {name: getattr(other, name) for name in figures}
        assert dataclasses.replace(one, **exact) == other
        assert [getattr(one, name) for name in figures] == pytest.approx(list(exact.values()))
