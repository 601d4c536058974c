"""The snapshot reads what kubectl prints: owners, requests, rules and PDB status."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import builders as b
from rebalancer.clients.inputs import load_snapshot
from rebalancer.cluster.model import Resources, WorkloadRef
from rebalancer.cluster.parse import (
    PodsRead,
    decode_snapshot,
    parse_items,
    parse_snapshot,
    prepared,
)
from rebalancer.config.resolved import PlanningRules
from rebalancer.errors import InputError
from rebalancer.planning.cycle import plan_cycle
from rebalancer.planning.protections import protection_reason
from rebalancer.planning.report import outcome_json, outcome_table, stray_warnings
from rebalancer.planning.state import PlannerState
from tests.conftest import chatty_rates, grid_nodes, make_policy, snapshot_of, traffic_of


def test_pods_resolve_through_replicasets_to_their_deployment() -> None:
    snapshot = snapshot_of([b.node("n1", "a"), *b.deployment_pods("web", ["n1", "n1"])])
    workloads = {pod.workload for pod in snapshot.pods.values()}
    assert workloads == {WorkloadRef("Deployment", "default", "web")}
    assert snapshot.workloads[WorkloadRef("Deployment", "default", "web")].replicas == 2


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        (("StatefulSet", "db"), WorkloadRef("StatefulSet", "default", "db")),
        (("Job", "train"), WorkloadRef("Job", "default", "train")),
        (("ReplicaSet", "orphan-rs"), WorkloadRef("ReplicaSet", "default", "orphan-rs")),
        (None, None),
    ],
    ids=["statefulset", "job", "replicaset-without-deployment", "bare"],
)
def test_owner_kinds(owner: tuple[str, str] | None, expected: WorkloadRef | None) -> None:
    snapshot = snapshot_of([b.pod("p", "n1", owner)])
    assert snapshot.pods["default/p"].workload == expected


def test_requests_sum_containers_and_take_the_largest_init_container() -> None:
    def two_containers_and_init(pod: b.Obj) -> None:
        pod["spec"]["containers"].append(
            {"name": "sidecar", "resources": {"requests": {"cpu": "0.25", "memory": "1Gi"}}}
        )
        pod["spec"]["initContainers"] = [
            {"name": "warm", "resources": {"requests": {"cpu": "2", "memory": "1Mi"}}}
        ]

    snapshot = snapshot_of([b.pod("p", "n1", None, mutate=two_containers_and_init)])
    assert snapshot.pods["default/p"].requests == Resources(
        cpu_millis=2000, memory_bytes=512 * 2**20 + 2**30, pods=1
    )


@pytest.mark.parametrize(
    ("cpu", "memory", "millis", "bytes_"),
    [
        ("500u", "1.5", 1, 2),
        ("1001u", "0.1k", 2, 100),
        (0.0015, 2.5, 2, 3),
        ("250m", "1Ki", 250, 1024),
    ],
    ids=["sub-millicore", "just-over", "numbers", "exact"],
)
def test_quantities_round_up_as_the_scheduler_counts_them(
    cpu: str | float, memory: str | float, millis: int, bytes_: int
) -> None:
    """The scheduler counts `MilliValue()` and `Value()`, both ceil: a pod rounded down would
    look like it fits where the scheduler refuses it."""

    def requests(pod: b.Obj) -> None:
        pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": memory}}

    def allocatable(node: b.Obj) -> None:
        node["status"]["allocatable"].update(cpu=cpu, memory=memory)

    snapshot = snapshot_of(
        [b.node("n1", "a", mutate=allocatable), b.pod("p", "n1", None, mutate=requests)]
    )
    assert snapshot.pods["default/p"].requests == Resources(millis, bytes_, 1)
    assert snapshot.nodes["n1"].allocatable == Resources(millis, bytes_, 110)


def test_rules_and_volumes_are_read() -> None:
    def rules(pod: b.Obj) -> None:
        pod["spec"].update(
            nodeSelector={"disk": "ssd"},
            tolerations=[{"key": "gpu", "operator": "Exists"}],
            priority=1000,
            priorityClassName="system-node-critical",
            volumes=[
                {"name": "cache", "emptyDir": {}},
                {"name": "d", "persistentVolumeClaim": {"claimName": "data-p"}},
                {"name": "e", "ephemeral": {"volumeClaimTemplate": {}}},
            ],
            affinity={
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
                    ]
                }
            },
            topologySpreadConstraints=[
                {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
            ],
        )

    pod = snapshot_of([b.pod("p", "n1", None, mutate=rules)]).pods["default/p"]
    assert pod.node_selector == {"disk": "ssd"}
    assert pod.priority == 1000 and pod.priority_class_name == "system-node-critical"
    assert pod.local_volumes == ("cache",) and pod.has_pvc
    assert pod.claims == ("data-p",)  # the ephemeral one is made afresh with each pod
    assert pod.required_anti_affinity[0].topology_key == "zone"
    assert pod.required_anti_affinity[0].namespaces == ("default",)
    assert pod.spread_constraints[0].max_skew == 2 and not pod.spread_constraints[0].hard


def test_nodes_and_pdbs() -> None:
    def cordoned(node: b.Obj) -> None:
        node["spec"]["unschedulable"] = True
        node["spec"]["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]

    snapshot = snapshot_of(
        [
            b.node("n1", "a", cpu="3500m", memory="1Gi", mutate=cordoned),
            b.pdb("web", {"app": "web"}, 1),
            b.pdb("stale", {"app": "db"}, 1, observed=False),
        ]
    )
    node = snapshot.nodes["n1"]
    assert node.allocatable == Resources(3500, 2**30, 110)
    assert node.unschedulable and node.taints[0].effect == "NoSchedule"
    assert [(p.name, p.status_observed) for p in snapshot.pdbs] == [("web", True), ("stale", False)]


def test_typed_lists_without_item_kinds_are_read() -> None:
    node = b.node("n1", "a")
    del node["kind"]
    snapshot = parse_snapshot({"kind": "NodeList", "items": [node]}, "nodes.json")
    assert list(snapshot.nodes) == ["n1"]


def _second_init_container_asks(memory: str) -> Callable[[dict[str, Any]], None]:
    def mutate(pod: dict[str, Any]) -> None:
        pod["spec"]["initContainers"] = [
            {"name": "first", "resources": {"requests": {"memory": "1Mi"}}},
            {"name": "second", "resources": {"requests": {"memory": memory}}},
        ]

    return mutate


def _asks_gpus(count: str) -> Callable[[dict[str, Any]], None]:
    def mutate(pod: dict[str, Any]) -> None:
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = count

    return mutate


def _offers_gpus(count: str) -> Callable[[dict[str, Any]], None]:
    def mutate(node: dict[str, Any]) -> None:
        node["status"]["allocatable"]["nvidia.com/gpu"] = count

    return mutate


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"kind": "Pod"}, "s.json: not a Kubernetes List (expected an object with 'items')"),
        ({"items": ["x"]}, "s.json: items[0]: expected `object`, got `str`"),
        (
            b.k8s_list([b.pod("p", "n1", None, cpu="lots")]),
            "s.json: items[0] (Pod p): spec.containers[0].resources.requests.cpu: "
            "invalid quantity 'lots'",
        ),
        (
            b.k8s_list([b.pod("p", "n1", None, mutate=_second_init_container_asks("2 GB"))]),
            "s.json: items[0] (Pod p): spec.initContainers[1].resources.requests.memory: "
            "invalid quantity '2 GB'",
        ),
        (
            b.k8s_list([b.pod("p", "n1", None, cpu="Infinity")]),
            "s.json: items[0] (Pod p): spec.containers[0].resources.requests.cpu: "
            "invalid quantity 'Infinity'",
        ),
        (
            b.k8s_list([b.pod("p", "n1", None, cpu="1e999999")]),
            "s.json: items[0] (Pod p): spec.containers[0].resources.requests.cpu: "
            "invalid quantity '1e999999'",
        ),
        (
            b.k8s_list([b.pod("p", "n1", None, cpu="1e400")]),
            "s.json: items[0] (Pod p): spec.containers[0].resources.requests.cpu: "
            "invalid quantity '1e400'",
        ),
        (
            b.k8s_list([b.pod("p", "n1", None, mutate=_asks_gpus("two"))]),
            "s.json: items[0] (Pod p): spec.containers[0].resources.requests.nvidia.com/gpu: "
            "invalid quantity 'two'",
        ),
        (
            b.k8s_list([b.node("n1", "a", mutate=_offers_gpus("-8"))]),
            "s.json: items[0] (Node n1): status.allocatable.nvidia.com/gpu: invalid quantity '-8'",
        ),
        (
            b.k8s_list([{"kind": "Pod", "metadata": {"name": "p", "labels": ["x"]}}]),
            "s.json: items[0] (Pod p): metadata.labels: expected `object | null`, got `array`",
        ),
        (
            b.k8s_list([b.node("n1", "a"), {"kind": "Pod", "spec": {"priority": "high"}}]),
            "s.json: items[1] (Pod): spec.priority: expected `int | null`, got `str`",
        ),
        (
            b.k8s_list([b.pod("p", "n1", None, cpu=" 5")]),
            "s.json: items[0] (Pod p): spec.containers[0].resources.requests.cpu: "
            "invalid quantity ' 5'",
        ),
        (
            b.k8s_list([b.pod("p", "n1", None, cpu="1_000")]),
            "s.json: items[0] (Pod p): spec.containers[0].resources.requests.cpu: "
            "invalid quantity '1_000'",
        ),
        (
            b.k8s_list([b.node("n1", "a"), {"kind": "Pod", "spec": {"nodeName": "n1"}}]),
            "s.json: items[1] (Pod): metadata.name: missing",
        ),
        (
            b.k8s_list(
                [b.pod("p", "n1", None, mutate=lambda o: o["spec"].update(priority=10**30))]
            ),
            "s.json: items[0] (Pod p): spec.priority: expected `int` <= 2147483647",
        ),
    ],
    ids=[
        "not-a-list",
        "item-not-object",
        "bad-quantity",
        "bad-init-quantity",
        "infinite-quantity",
        "huge-quantity",
        "past-a-float-quantity",
        "bad-extended-request",
        "negative-extended-allocatable",
        "wrong-type",
        "unnamed",
        "quantity-with-a-space",
        "quantity-with-an-underscore",
        "pod-without-metadata",
        "priority-past-int32",
    ],
)
@pytest.mark.parametrize("given_as", ["decoded", "bytes"])
def test_malformed_snapshots_name_the_field(document: object, message: str, given_as: str) -> None:
    assert _refusal(document, given_as) == message


def _refusal(document: object, given_as: str) -> str:
    """The error a List is refused with, read as a decoded document or as its JSON bytes."""
    with pytest.raises(InputError) as raised:
        if given_as == "decoded":
            parse_snapshot(document, "s.json")
        else:
            decode_snapshot(json.dumps(document).encode(), "s.json")
    return str(raised.value)


def test_objects_from_the_api_are_checked_one_by_one() -> None:
    """The watch cache hands over dicts with their kinds; a bad one is named by its place."""
    pod = b.pod("p", "n1", None)
    pod["spec"]["nodeName"] = 3
    with pytest.raises(InputError) as raised:
        parse_items([(b.node("n1", "a"), "Node"), (pod, "Pod")], "Kubernetes API")
    assert str(raised.value) == (
        "Kubernetes API: items[1] (Pod p): spec.nodeName: expected `str | null`, got `int`"
    )


def test_objects_prepared_ahead_read_as_their_dicts_and_a_bad_one_fails_the_snapshot() -> None:
    """The watch cache converts objects as they arrive; one that does not convert stays a dict
    and is named, with its place, when a snapshot is built."""
    objects = [b.node("n1", "a"), *b.deployment_pods("web", ["n1", "n1"])]
    as_given = [(item, item["kind"]) for item in objects]
    ahead = [(prepared(item), item["kind"]) for item in objects]
    assert not any(isinstance(item, dict) for item, _kind in ahead)  # all converted
    assert repr(parse_items(ahead, "cache")) == repr(parse_items(as_given, "cache"))
    bad = b.pod("p", "n1", None)
    bad["spec"]["priority"] = "high"
    assert prepared(bad) is bad
    with pytest.raises(InputError) as raised:
        parse_items([*ahead, (prepared(bad), "Pod")], "cache")
    assert str(raised.value) == (
        "cache: items[5] (Pod p): spec.priority: expected `int | null`, got `str`"
    )


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read snapshot"):
        load_snapshot(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{\n  'items': ")
    with pytest.raises(InputError, match=r"broken.json: not valid JSON \(JSON is malformed"):
        load_snapshot(broken)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(b.k8s_list([b.node("n1", "a")])))
    assert list(load_snapshot(good).nodes) == ["n1"]


def test_pods_read_before_are_kept_while_their_object_and_replicaset_owner_are_the_same() -> None:
    """The watch cache replaces an object on each event: a replaced pod is read again, and so is
    one whose ReplicaSet now has another owner; every other pod is the one read before."""
    objects = [b.node("n1", "a"), *b.deployment_pods("web", ["n1", "n1"])]
    items = [(prepared(item), item["kind"]) for item in objects]
    pods_read = PodsRead()
    first = parse_items(items, "cache", pods_read)
    relabelled, kept = sorted(first.pods)
    again = parse_items(items, "cache", pods_read)
    assert again.pods[relabelled] is first.pods[relabelled]
    changed = objects[-2]  # node, Deployment, ReplicaSet, then the pods in order
    changed["metadata"]["labels"] = {"app": "web", "tier": "front"}
    items[-2] = (prepared(changed), "Pod")
    replaced = parse_items(items, "cache", pods_read)
    assert replaced.pods[relabelled].labels["tier"] == "front"
    assert replaced.pods[kept] is first.pods[kept]
    items[2] = (prepared(b.replicaset("web-5d8c7", "site")), "ReplicaSet")  # adopted by "site"
    adopted = parse_items(items, "cache", pods_read)
    assert {pod.workload for pod in adopted.pods.values()} == {
        WorkloadRef("Deployment", "default", "site")
    }
    assert repr(adopted) == repr(parse_items(items, "cache"))


def _with_uid(uid: str) -> Callable[[b.Obj], None]:
    def mutate(pod: b.Obj) -> None:
        pod["metadata"]["uid"] = uid

    return mutate


def _skew(max_skew: int) -> Callable[[b.Obj], None]:
    def mutate(pod: b.Obj) -> None:
        constraint = {"maxSkew": max_skew, "topologyKey": b.ZONE_LABEL}
        pod["spec"]["topologySpreadConstraints"] = [constraint]

    return mutate


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (
            [b.pod("p", "n1", None, cpu="-100m")],
            "s.json: items[0] (Pod p): spec.containers[0].resources.requests.cpu: "
            "invalid quantity '-100m'",
        ),
        (
            [b.node("n1", "a", cpu="-8")],
            "s.json: items[0] (Node n1): status.allocatable.cpu: invalid quantity '-8'",
        ),
        (
            [b.deployment("web", -3)],
            "s.json: items[0] (Deployment web): spec.replicas: expected `int` >= 0",
        ),
        (
            [b.pdb("web", {"app": "web"}, -1)],
            "s.json: items[0] (PodDisruptionBudget web): status.disruptionsAllowed: "
            "expected `int` >= 0",
        ),
        (
            [b.pod("p", "n1", None, mutate=_skew(0))],
            "s.json: items[0] (Pod p): spec.topologySpreadConstraints[0].maxSkew: "
            "expected `int` >= 1",
        ),
        ([b.node("n1", "a"), b.node("n1", "b")], "s.json: Node n1 is listed twice"),
        ([b.pod("p", "n1", None), b.pod("p", "n1", None)], "s.json: Pod default/p is listed twice"),
        (
            [
                b.pod("p", "n1", None, mutate=_with_uid("u")),
                b.pod("q", "n1", None, mutate=_with_uid("u")),
            ],
            "s.json: Pods default/p and default/q share uid u",
        ),
    ],
    ids=[
        "negative-request",
        "negative-allocatable",
        "negative-replicas",
        "negative-disruptions-allowed",
        "zero-max-skew",
        "node-twice",
        "pod-twice",
        "shared-uid",
    ],
)
@pytest.mark.parametrize("given_as", ["decoded", "bytes"])
def test_data_no_api_server_hands_over_is_refused_naming_the_object(
    items: list[b.Obj], message: str, given_as: str
) -> None:
    assert _refusal(b.k8s_list(items), given_as) == message


STRAY_POLICIES = {
    "dry-run": {},
    "evict": {"mode": "evict"},
    "migrate": {"mode": "migrate"},
    "migrate-routing": {"mode": "migrate", "routing": {"plan_around": True}},
    "surge": {"mode": "migrate", "migrate": {"method": "surge"}},
}
"""Every way a cycle looks a pod's node up: the planner's rules, the target placement, the
landing prediction (steered or not), routing weighed before moving, and surges."""


@pytest.mark.parametrize("overrides", STRAY_POLICIES.values(), ids=STRAY_POLICIES.keys())
def test_pods_on_nodes_the_snapshot_lacks_are_never_moved_and_are_said(
    overrides: dict[str, Any],
) -> None:
    """A node deleted (an autoscaler's scale-down) before its pods are gone: each of its pods is
    named in the warnings of the table, the JSON and the controller's log, its protection reason
    keeps it in place, and it counts nowhere, as a sibling of pods that move, an endpoint of
    their Service or a peer that decides a move."""
    objects = [
        *grid_nodes(),
        *b.deployment_pods("client", ["node-a11", "node-gone", "node-a12", "node-a21"]),
        *b.deployment_pods("server", ["node-b11", "node-gone", "node-b12"]),
    ]
    snapshot = snapshot_of(objects)
    servers = [
        (p.name, p.node_name or "", "a")
        for p in snapshot.pods.values()
        if p.labels["app"] == "server"
    ]
    snapshot = snapshot_of(
        [
            *objects,
            b.service("server", {"app": "server"}),
            b.endpoint_slice("server-1", "server", servers),
        ]
    )
    strays = {
        key: "node-gone" for key, pod in snapshot.pods.items() if pod.node_name == "node-gone"
    }
    assert len(strays) == 2
    policy = make_policy(**overrides)
    rates = traffic_of(chatty_rates(objects))
    outcome = plan_cycle(policy, snapshot, rates, PlannerState(), now=1e6, persistence_required=1)
    assert outcome.stray_pods == strays
    table = outcome_table(outcome, "flows/s", "USD")
    for stray in strays:
        assert f"warning: pod {stray} is on node node-gone, which the snapshot lacks" in table
    assert outcome_json(outcome, "flows/s", "USD")["pods_on_unknown_nodes"] == strays
    rules = PlanningRules.of(policy, outcome.topology)
    for stray in strays:
        reason = protection_reason(snapshot.pods[stray], snapshot, snapshot.indexes(), rules)
        assert reason == "on node node-gone, which the snapshot lacks"
    assert outcome.plan is not None
    assert outcome.plan.moves, outcome.plan.skipped
    assert not strays.keys() & {move.pod for move in outcome.plan.moves}


def test_stray_pod_warnings_name_the_first_five_and_count_the_rest() -> None:
    strays = {f"default/p-{index}": "gone" for index in range(12)}
    lines = stray_warnings(strays)
    assert len(lines) == 6
    assert lines[-1] == "warning: and 7 more pods on nodes the snapshot lacks"


def test_services_read_their_routing_and_every_endpoint_once() -> None:
    """Endpoints from every slice of the Service (a dual-stack one lists each pod twice), with
    conditions read as the API documents unset ones."""
    ipv6 = b.endpoint_slice("api-v6", "api", [("api-0", "n1", "a")], hinted="PreferSameZone")
    ipv6["addressType"] = "IPv6"
    unset = b.endpoint_slice("api-x", "api", [("api-1", "n2", None)])
    del unset["endpoints"][0]["conditions"]
    snapshot = snapshot_of(
        [
            b.node("n1", "a"),
            b.node("n2", "b"),
            b.service(
                "api",
                {"app": "api"},
                traffic_distribution="PreferSameZone",
                mutate=lambda o: o["metadata"].update(resourceVersion="7"),
            ),
            b.endpoint_slice("api-v4", "api", [("api-0", "n1", "a")], hinted="PreferSameZone"),
            ipv6,
            unset,
            b.endpoint_slice("gone-1", "gone", [("x", "n1", "a")]),  # its Service is not listed
        ]
    )
    [service] = snapshot.services.values()
    assert (service.key, service.traffic_distribution, service.internal_traffic_policy) == (
        "default/api",
        "PreferSameZone",
        "Cluster",
    )
    assert (service.selector, service.resource_version) == ({"app": "api"}, "7")
    first, second = service.endpoints
    assert (first.pod, first.node, first.zone, first.zone_hints) == (
        "default/api-0",
        "n1",
        "a",
        ("a",),
    )
    assert (second.pod, second.zone, second.ready, second.serving, second.terminating) == (
        "default/api-1",
        None,
        True,
        True,
        False,
    )


def test_an_older_snapshot_without_services_reads_as_none() -> None:
    assert snapshot_of([b.node("n1", "a")]).services == {}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda s: s["spec"].update(selector={"app": 3}),
            "items[0] (Service api): spec.selector: expected a map of label values",
        ),
        (
            lambda s: s["spec"].update(trafficDistribution=["PreferSameZone"]),
            "spec.trafficDistribution",
        ),
    ],
)
def test_a_bad_service_is_named(mutate: Callable[[b.Obj], None], message: str) -> None:
    with pytest.raises(InputError) as raised:
        snapshot_of([b.service("api", {"app": "api"}, mutate=mutate)])
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_bad_endpoint_condition_is_named() -> None:
    broken = b.endpoint_slice("api-1", "api", [("api-0", "n1", "a")])
    broken["endpoints"][0]["conditions"]["ready"] = "yes"
    with pytest.raises(InputError, match=r"endpoints\[0\]\.conditions\.ready"):
        snapshot_of([b.service("api", {"app": "api"}), broken])


def test_a_pod_listed_twice_in_one_slice_is_one_endpoint() -> None:
    """A slice written by hand (or by a controller gone wrong) may list a pod twice: counted
    twice, its zone's share of the calls and the routing advice were wrong."""
    snapshot = snapshot_of(
        [
            b.node("n1", "a"),
            b.service("api", {"app": "api"}),
            b.endpoint_slice("api-1", "api", [("api-0", "n1", "a"), ("api-0", "n1", "a")]),
        ]
    )
    [service] = snapshot.services.values()
    assert [endpoint.pod for endpoint in service.endpoints] == ["default/api-0"]
