"""Gangs another scheduler places: recognised by their owners' own keys, never moved, reported."""

from __future__ import annotations

from typing import Any

import pytest

from harness import builders as b
from rebalancer.cluster import gang_owners
from rebalancer.cluster.gang_owners import gang_membership
from rebalancer.planning.cycle import gang_level, plan_cycle, topology_of
from rebalancer.planning.report import outcome_json, outcome_table
from rebalancer.planning.state import PlannerState
from tests.conftest import grid_nodes, make_policy, pod_keys, snapshot_of, traffic_of

Marks = dict[str, Any]


def _marked(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    scheduler: str | None = None,
    pod_group: str | None = None,
) -> Marks:
    return {
        "labels": labels or {},
        "annotations": annotations or {},
        "scheduler": scheduler,
        "pod_group": pod_group,
    }


def _pod(name: str, node: str, marks: Marks, owner: tuple[str, str] = ("Job", "train")) -> b.Obj:
    def mark(obj: b.Obj) -> None:
        obj["metadata"]["annotations"] = dict(marks["annotations"])
        if marks["scheduler"]:
            obj["spec"]["schedulerName"] = marks["scheduler"]
        if marks["pod_group"]:
            obj["spec"]["schedulingGroup"] = {"podGroupName": marks["pod_group"]}

    labels = {"job-name": "train", **marks["labels"]}
    return b.pod(name, node, owner, labels=labels, mutate=mark)


# Each as the project writes it on the pods it places (see rebalancer/cluster/gang_owners.py).
OWNED = {
    "podgroup-api": (_marked(pod_group="train-0"), "PodGroup API", "default/train-0"),
    "kueue-job": (
        _marked(
            labels={"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/podset": "main"},
            annotations={"kueue.x-k8s.io/workload": "job-train-3c1f2"},
        ),
        "Kueue",
        "default/job-train-3c1f2",
    ),
    "kueue-queue-label-only": (
        _marked(labels={"kueue.x-k8s.io/queue-name": "team-a"}),
        "Kueue",
        "default/train",
    ),
    "kueue-pod-group": (
        _marked(
            labels={"kueue.x-k8s.io/pod-group-name": "grp", "kueue.x-k8s.io/managed": "true"},
            annotations={"kueue.x-k8s.io/pod-group-total-count": "4"},
        ),
        "Kueue",
        "default/grp",
    ),
    "volcano-job": (
        _marked(
            labels={"volcano.sh/job-name": "train", "volcano.sh/queue-name": "default"},
            annotations={"scheduling.k8s.io/group-name": "train-8d1e"},
            scheduler="volcano",
        ),
        "Volcano",
        "default/train-8d1e",
    ),
    "volcano-scheduler-only": (_marked(scheduler="volcano"), "Volcano", "default/train"),
    "kai": (
        _marked(
            labels={"kai.scheduler/queue": "team-a"},
            annotations={"pod-group-name": "pg-train-77aa"},
            scheduler="kai-scheduler",
        ),
        "KAI-Scheduler",
        "default/pg-train-77aa",
    ),
    "kai-queue-label-only": (
        _marked(labels={"kai.scheduler/queue": "team-a"}),
        "KAI-Scheduler",
        "default/train",
    ),
    "koordinator": (
        _marked(
            annotations={
                "gang.scheduling.koordinator.sh/name": "gang-a",
                "gang.scheduling.koordinator.sh/min-available": "4",
            },
            scheduler="koord-scheduler",
        ),
        "Koordinator",
        "default/gang-a",
    ),
    "koordinator-old-label": (
        _marked(labels={"pod-group.scheduling.sigs.k8s.io": "pg"}, scheduler="koord-scheduler"),
        "Koordinator",
        "default/pg",
    ),
    "coscheduling": (
        _marked(labels={"scheduling.x-k8s.io/pod-group": "pg"}),
        "Coscheduling",
        "default/pg",
    ),
    "coscheduling-before-v0.25": (
        _marked(labels={"pod-group.scheduling.sigs.k8s.io": "pg"}),
        "Coscheduling",
        "default/pg",
    ),
    "jobset": (
        _marked(
            labels={"jobset.sigs.k8s.io/jobset-name": "trainer"},
            annotations={"jobset.sigs.k8s.io/jobset-name": "trainer"},
        ),
        "JobSet",
        "default/trainer",
    ),
    "leaderworkerset": (
        _marked(
            labels={
                "leaderworkerset.sigs.k8s.io/name": "vllm",
                "leaderworkerset.sigs.k8s.io/group-index": "1",
            }
        ),
        "LeaderWorkerSet",
        "default/vllm-1",
    ),
}

NOT_OWNED = {
    "plain-job": _marked(),
    "kai-annotation-without-kai": _marked(annotations={"pod-group-name": "pg"}),
    "other-scheduler": _marked(scheduler="my-scheduler"),
    "empty-values": _marked(
        labels={"kueue.x-k8s.io/queue-name": "", "scheduling.x-k8s.io/pod-group": ""}
    ),
}


@pytest.mark.parametrize("case", sorted(OWNED))
def test_each_owner_is_recognised_by_its_own_keys(case: str) -> None:
    marks, owner, gang = OWNED[case]
    snapshot = snapshot_of([*grid_nodes(), _pod("w0", "node-a11", marks)])
    membership = gang_membership(snapshot.pods["default/w0"])
    assert membership is not None
    assert (membership.owner, membership.gang) == (owner, gang)
    assert owner in gang_owners.OWNERS


@pytest.mark.parametrize("case", sorted(NOT_OWNED))
def test_pods_without_an_owners_keys_have_none(case: str) -> None:
    snapshot = snapshot_of([*grid_nodes(), _pod("w0", "node-a11", NOT_OWNED[case])])
    assert gang_membership(snapshot.pods["default/w0"]) is None


@pytest.mark.parametrize(
    ("key", "where"),
    [(key, "labels") for key in sorted(gang_owners._LABELS)]
    + [(key, "annotations") for key in sorted(gang_owners._ANNOTATIONS)],
)
def test_every_key_looked_for_marks_a_pod_on_its_own(key: str, where: str) -> None:
    """The quick look that clears most pods must not hide a key a rule reads, nor list a key no
    rule reads."""
    marks = _marked(labels={key: "x"}) if where == "labels" else _marked(annotations={key: "x"})
    snapshot = snapshot_of([*grid_nodes(), _pod("w0", "node-a11", marks)])
    assert gang_membership(snapshot.pods["default/w0"]) is not None


GANG_POLICY: dict[str, Any] = {
    "strategies": [
        {"name": "split-peers", "args": {"level": "zone"}},
        {"name": "gang-consolidation", "args": {"level": "zone"}},
    ],
    "protections": {"min_spread": {"domains": 1}},
}


def _spread_gang(marks: Marks) -> tuple[Any, dict[tuple[str, str], float]]:
    """Four workers talking all-to-all, two in each zone, with room in either for all."""
    nodes = ["node-a11", "node-a12", "node-b11", "node-b12"]
    snapshot = snapshot_of([*grid_nodes(), *(_pod(f"w{i}", n, marks) for i, n in enumerate(nodes))])
    workers = pod_keys(snapshot, "w")
    return snapshot, {(x, y): 10.0 for x in workers for y in workers if x < y}


def _cycle(marks: Marks, **policy: Any) -> Any:
    snapshot, rates = _spread_gang(marks)
    return plan_cycle(
        make_policy(**{**GANG_POLICY, **policy}),
        snapshot,
        traffic_of(rates),
        PlannerState(),
        now=1_000_000.0,
        persistence_required=0,
    )


@pytest.mark.parametrize("case", sorted(OWNED))
def test_no_member_of_an_owned_gang_moves_and_the_gang_is_reported(case: str) -> None:
    marks, owner, gang = OWNED[case]
    outcome = _cycle(marks)
    assert outcome.plan.moves == ()
    assert outcome.plan.skipped
    for skip in outcome.plan.skipped:
        assert skip.category == "protected"
        assert skip.reason.startswith(f"member of {owner} gang {gang} (")
    [reported] = outcome.owned_gangs
    assert (reported.owner, reported.gang, reported.pods) == (owner, gang, 4)
    assert (reported.level, reported.spans, reported.fits_in) == ("zone", 2, 1)
    assert reported.crossing == pytest.approx(4 * 10.0)  # 2 x 2 pairs across the zones
    assert b.ZONE_LABEL in reported.fix
    document = outcome_json(outcome, "flows/s", "USD")
    assert document["owned_gangs"][0]["fix"] == reported.fix
    table = outcome_table(outcome, "flows/s", "USD")
    assert f"{gang}  {owner}" in table and "2 zones, fits in 1" in table


def test_a_gang_without_an_owner_is_still_consolidated() -> None:
    outcome = _cycle(_marked())
    assert len(outcome.plan.moves) == 2
    assert outcome.plan.after.crossing["zone"] == 0
    assert outcome.owned_gangs == ()


@pytest.mark.parametrize(("cpu", "reported"), [("1", False), ("2", True)])
def test_an_owned_gang_is_reported_only_if_fewer_domains_can_hold_it(
    cpu: str, reported: bool
) -> None:
    """One node per zone, two workers on each: with 1 CPU (two workers) a node is full."""
    marks = OWNED["volcano-job"][0]
    nodes = grid_nodes(racks=1, per_rack=1, cpu=cpu)
    pods = [_pod(f"w{i}", n, marks) for i, n in enumerate(["node-a11", "node-b11"] * 2)]
    snapshot = snapshot_of([*nodes, *pods])
    workers = pod_keys(snapshot, "w")
    rates = {(x, y): 10.0 for x in workers for y in workers if x < y}
    outcome = plan_cycle(
        make_policy(**GANG_POLICY), snapshot, traffic_of(rates), PlannerState(), now=1.0
    )
    assert bool(outcome.owned_gangs) == reported
    assert outcome.plan is not None and outcome.plan.moves == ()


def test_an_owned_gang_that_does_not_talk_is_not_reported() -> None:
    snapshot, _rates = _spread_gang(OWNED["volcano-job"][0])
    outcome = plan_cycle(
        make_policy(**GANG_POLICY), snapshot, traffic_of({}), PlannerState(), now=1.0
    )
    assert outcome.owned_gangs == ()


def test_gangs_are_judged_at_the_narrowest_level_with_shared_domains() -> None:
    policy = make_policy()
    snapshot = snapshot_of(grid_nodes())
    topology = topology_of(policy, snapshot)
    assert topology.levels[gang_level(policy, topology)].name == "rack"  # not the host
    one_per_rack = snapshot_of(grid_nodes(per_rack=1))
    topology = topology_of(policy, one_per_rack)
    assert topology.levels[gang_level(policy, topology)].name == "zone"
    assert gang_level(make_policy(**GANG_POLICY), topology) == topology.level_index("zone")


SERVING_BY_ITS_SCHEDULER = {
    "kai-serving": _marked(
        labels={"kai.scheduler/queue": "inference"},
        annotations={"pod-group-name": "pg-web-5d8c7-0a1b"},
        scheduler="kai-scheduler",
    ),
    "volcano-made-group": _marked(
        annotations={"scheduling.k8s.io/group-name": "podgroup-0a1b2c3d"}, scheduler="volcano"
    ),
    "kueue-pod-integration": _marked(
        labels={"kueue.x-k8s.io/queue-name": "team-a", "kueue.x-k8s.io/managed": "true"}
    ),
}


@pytest.mark.parametrize("case", sorted(SERVING_BY_ITS_SCHEDULER))
def test_a_service_its_scheduler_places_pod_by_pod_is_no_gang(case: str) -> None:
    """The same keys on a Job's pods make it a gang; on a Deployment's, a service that the
    scheduler places in groups of one, which may move as any service."""
    marks = SERVING_BY_ITS_SCHEDULER[case]
    deployment = _pod("w0", "node-a11", marks, owner=("ReplicaSet", "web-5d8c7"))
    job = _pod("w1", "node-a11", marks)
    snapshot = snapshot_of([*grid_nodes(), b.replicaset("web-5d8c7", "web"), deployment, job])
    assert gang_membership(snapshot.pods["default/w0"]) is None
    assert gang_membership(snapshot.pods["default/w1"]) is not None


def test_a_kubernetes_1_35_workload_reference_is_a_pod_group() -> None:
    def referenced(obj: b.Obj) -> None:
        obj["spec"]["workloadRef"] = {"name": "train", "podGroup": "workers"}

    pod = b.pod("w0", "node-a11", ("Job", "train"), mutate=referenced)
    membership = gang_membership(snapshot_of([*grid_nodes(), pod]).pods["default/w0"])
    assert membership is not None
    assert (membership.owner, membership.gang) == ("PodGroup API", "default/train/workers")


def test_members_known_by_different_keys_are_one_gang() -> None:
    """A Volcano Job's pods carry both its group annotation and its job label; one member
    missing the annotation is still of the same gang when the names agree."""
    both = _marked(
        labels={"volcano.sh/job-name": "train"},
        annotations={"scheduling.k8s.io/group-name": "train"},
    )
    label_only = _marked(labels={"volcano.sh/job-name": "train"})
    nodes = ["node-a11", "node-a12", "node-b11", "node-b12"]
    pods = [_pod(f"w{i}", n, both if i % 2 else label_only) for i, n in enumerate(nodes)]
    snapshot = snapshot_of([*grid_nodes(), *pods])
    workers = pod_keys(snapshot, "w")
    rates = {(x, y): 10.0 for x in workers for y in workers if x < y}
    outcome = plan_cycle(
        make_policy(**GANG_POLICY), snapshot, traffic_of(rates), PlannerState(), now=1.0
    )
    assert [(g.gang, g.pods) for g in outcome.owned_gangs] == [("default/train", 4)]


def test_a_leaderworkerset_group_placed_by_a_gang_scheduler_is_still_its_gang() -> None:
    """The scheduler's own key names no gang on a StatefulSet's pods; LWS's labels do."""
    marks = _marked(
        labels={
            "leaderworkerset.sigs.k8s.io/name": "vllm",
            "leaderworkerset.sigs.k8s.io/group-index": "0",
            "kai.scheduler/queue": "inference",
        },
        scheduler="kai-scheduler",
    )
    pod = _pod("vllm-0-1", "node-a11", marks, owner=("StatefulSet", "vllm-0"))
    membership = gang_membership(snapshot_of([*grid_nodes(), pod]).pods["default/vllm-0-1"])
    assert membership is not None
    assert (membership.owner, membership.gang) == ("LeaderWorkerSet", "default/vllm-0")
