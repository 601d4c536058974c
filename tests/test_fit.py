"""The fit check refuses exactly what kube-scheduler's filters would refuse."""

from __future__ import annotations

import pytest

from harness import builders as b
from rebalancer.cluster.fit import Occupancy, rejection
from rebalancer.cluster.scoring import scores, spread_by_default
from tests.conftest import snapshot_of


def _check(objects: list[b.Obj], pod: str, node: str, honor_soft_spread: bool = True) -> str | None:
    snapshot = snapshot_of(objects)
    return rejection(
        snapshot.pods[pod],
        snapshot.nodes[node],
        Occupancy.from_snapshot(snapshot),
        honor_soft_spread,
    )


def _taint(node: b.Obj) -> None:
    node["spec"]["taints"] = [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]


def _tolerate(pod: b.Obj) -> None:
    pod["spec"]["tolerations"] = [{"key": "gpu", "operator": "Equal", "value": "yes"}]


def _select_ssd(pod: b.Obj) -> None:
    pod["spec"]["nodeSelector"] = {"disk": "ssd"}


def _ssd(node: b.Obj) -> None:
    node["metadata"]["labels"]["disk"] = "ssd"


def test_resources_count_every_pod_on_the_node() -> None:
    objects = [
        b.node("n1", "a"),
        b.node("n2", "b", cpu="1"),
        b.pod("p", "n1", cpu="600m"),
        b.pod("q", "n2", cpu="500m"),
    ]
    assert _check(objects, "default/p", "n2") == "insufficient resources"
    assert _check(objects[:3], "default/p", "n2") is None


def _gpus(count: str) -> b.Mutator:
    def give(obj: b.Obj) -> None:
        if obj["kind"] == "Node":
            obj["status"]["allocatable"]["nvidia.com/gpu"] = count
        else:
            obj["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = count

    return give


def test_a_gpu_node_is_full_when_its_gpus_are_taken_whatever_cpu_is_left() -> None:
    objects = [
        b.node("n1", "a", mutate=_gpus("8")),
        b.node("n2", "b", cpu="96", mutate=_gpus("8")),
        b.node("cpu-only", "b", cpu="96"),
        b.pod("worker", "n1", mutate=_gpus("8")),
        b.pod("tenant", "n2", mutate=_gpus("4")),
    ]
    assert _check(objects, "default/worker", "n2") == "insufficient resources"
    assert _check(objects, "default/worker", "cpu-only") == "insufficient resources"
    assert _check(objects[:4], "default/worker", "n2") is None
    assert _check(objects, "default/tenant", "n1") == "insufficient resources"


def test_init_containers_count_their_largest_extended_request() -> None:
    def init_gpus(pod: b.Obj) -> None:
        resources = {"requests": {"nvidia.com/gpu": "4", "ephemeral-storage": "1Gi"}}
        pod["spec"]["initContainers"] = [{"name": "warm", "resources": resources}]
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "2"

    snapshot = snapshot_of([b.node("n1", "a"), b.pod("p", "n1", mutate=init_gpus)])
    requests = snapshot.pods["default/p"].requests
    assert requests.scalars == (("ephemeral-storage", 2**30), ("nvidia.com/gpu", 4))


@pytest.mark.parametrize(
    ("node_mutate", "pod_mutate", "refused"),
    [
        (_taint, None, "untolerated taint gpu"),
        (_taint, _tolerate, None),
        (None, _select_ssd, "node selector or affinity"),
        (_ssd, _select_ssd, None),
    ],
    ids=["taint", "tolerated", "selector", "selector-met"],
)
def test_taints_and_selectors(
    node_mutate: b.Mutator, pod_mutate: b.Mutator, refused: str | None
) -> None:
    objects = [
        b.node("n1", "a"),
        b.node("n2", "b", mutate=node_mutate),
        b.pod("p", "n1", mutate=pod_mutate),
    ]
    assert _check(objects, "default/p", "n2") == refused


def test_required_node_affinity_terms_are_ored() -> None:
    def affinity(pod: b.Obj) -> None:
        pod["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": b.ZONE_LABEL, "operator": "In", "values": ["c"]}
                            ]
                        },
                        {
                            "matchExpressions": [
                                {"key": b.ZONE_LABEL, "operator": "NotIn", "values": ["a"]}
                            ]
                        },
                    ]
                }
            }
        }

    objects = [b.node("n1", "a"), b.node("n2", "b"), b.pod("p", "n2", mutate=affinity)]
    assert _check(objects, "default/p", "n1") == "node selector or affinity"
    assert _check(objects, "default/p", "n2") is None


def test_cordoned_node_is_refused() -> None:
    def cordon(node: b.Obj) -> None:
        node["spec"]["unschedulable"] = True

    objects = [b.node("n1", "a"), b.node("n2", "b", mutate=cordon), b.pod("p", "n1")]
    assert _check(objects, "default/p", "n2") == "node unschedulable or not ready"


def _anti_zone(pod: b.Obj) -> None:
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": b.ZONE_LABEL}
            ]
        }
    }


def test_required_anti_affinity_both_ways() -> None:
    objects = [
        b.node("n1", "a"),
        b.node("n2", "b"),
        b.pod("db-0", "n1", labels={"app": "db"}, mutate=_anti_zone),
        b.pod("db-1", "n2", labels={"app": "db"}, mutate=_anti_zone),
        b.pod("web", "n1", labels={"app": "db"}),
    ]
    assert _check(objects, "default/db-0", "n2") == "pod affinity or anti-affinity"
    # web has no rule of its own, but db-1's rule keeps pods labelled app=db out of zone b
    assert _check(objects, "default/web", "n2") == "pod affinity or anti-affinity"


def _spread(hard: bool):  # type: ignore[no-untyped-def]
    def mutate(pod: b.Obj) -> None:
        pod["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": b.ZONE_LABEL,
                "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "ha"}},
            }
        ]

    return mutate


@pytest.mark.parametrize(
    ("hard", "honor_soft", "refused"),
    [
        (True, False, "topology spread on topology.kubernetes.io/zone"),
        (False, True, "topology spread on topology.kubernetes.io/zone"),
        (False, False, None),
    ],
    ids=["hard", "soft-honored", "soft-ignored"],
)
def test_topology_spread(hard: bool, honor_soft: bool, refused: str | None) -> None:
    objects = [b.node("n1", "a"), b.node("n2", "b"), b.node("n3", "c")]
    objects += [
        b.pod(f"ha-{i}", n, labels={"app": "ha"}, mutate=_spread(hard))
        for i, n in enumerate(["n1", "n2", "n3", "n2"])
    ]
    # moving ha-0 out of zone a leaves a at 0 and puts 3 in b: skew 3 > 1
    assert _check(objects, "default/ha-0", "n2", honor_soft) == refused
    # moving ha-3 from b to c keeps skew at 1
    assert _check(objects, "default/ha-3", "n3", honor_soft) is None


def test_the_occupancy_indexes_follow_reservations_releases_and_copies() -> None:
    """Affinity and spread read the namespace and anti-affinity indexes instead of every pod, so
    the indexes must say what the placements say after each change."""
    objects = [
        b.node("n1", zone="a"),
        b.node("n2", zone="b"),
        b.pod("db-0", "n1", labels={"app": "db"}, mutate=_anti_zone),
        b.pod("web", "n1", labels={"app": "web"}, namespace="shop"),
    ]
    snapshot = snapshot_of(objects)
    occupancy = Occupancy.from_snapshot(snapshot)
    assert occupancy.anti_affine == {"default/db-0"}
    assert [(p.key, n) for p, n in occupancy.placed_in(["shop"])] == [("shop/web", "n1")]
    copy = occupancy.copy()
    copy.reserve(snapshot.pods["shop/web"], "n2")
    copy.release(snapshot.pods["default/db-0"])
    assert copy.anti_affine == set() and occupancy.anti_affine == {"default/db-0"}
    assert [(p.key, n) for p, n in copy.placed_in(["shop", "default"])] == [("shop/web", "n2")]
    assert [(p.key, n) for p, n in occupancy.placed_in(["shop"])] == [("shop/web", "n1")]


@pytest.mark.parametrize(
    ("owner", "service", "spreads"),
    [
        (("ReplicaSet", "web-rs"), False, True),
        (("StatefulSet", "db"), False, True),
        (("Job", "train"), False, False),
        (("Pod", "driver"), False, False),
        (("Pod", "driver"), True, True),
        (None, False, False),
    ],
    ids=["replicaset", "statefulset", "job", "owned-by-a-pod", "owned-but-served", "bare"],
)
def test_default_spreading_holds_for_the_pods_kube_scheduler_gives_it(
    owner: tuple[str, str] | None, service: bool, spreads: bool
) -> None:
    """kube-scheduler's default spread constraints select the pods of the pod's ReplicaSet,
    StatefulSet or ReplicationController and of the Services selecting it; a Job's pod, or a
    Spark executor owned by its driver pod, with no Service, has none. Without them, the
    sibling-crowded node is not scored down: only least allocated and the hint decide."""
    nodes = [b.node("crowded", "a", cpu="64"), b.node("empty", "b", cpu="2")]
    siblings = [b.pod(f"w-{i}", "crowded", owner, labels={"app": "w"}) for i in range(6)]
    objects = [*nodes, *siblings, b.pod("w-new", None, owner, labels={"app": "w"})]
    if service:
        objects.append(b.service("w", {"app": "w"}))
    snapshot = snapshot_of(objects)
    occupancy = Occupancy.from_snapshot(snapshot)
    pod = snapshot.pods["default/w-new"]
    assert spread_by_default(pod, snapshot) is spreads
    scored = scores(pod, snapshot, occupancy, within={}, steering=None)
    assert (scored["crowded"] < scored["empty"]) is spreads
