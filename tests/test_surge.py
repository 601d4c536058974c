"""Surge migration: which moves are surges, what stops one, and each step decided from the record
and what the cluster shows."""

from __future__ import annotations

from typing import Any

import pytest

from harness import builders as b
from rebalancer.planning.state import PlannerState
from rebalancer.planning.surge import (
    NewPod,
    OldPod,
    SurgeRecord,
    SurgeSeen,
    next_step,
    surge_record,
)
from rebalancer.planning.types import Move
from tests.conftest import (
    chatty_objects,
    chatty_rates,
    grid_nodes,
    make_policy,
    plan_once,
    snapshot_of,
    surge_move,
)

SURGE: dict[str, Any] = {"mode": "migrate", "migrate": {"method": "surge"}}


def _single_replica_pair(**deployment: Any) -> list[b.Obj]:
    """A one-replica client in zone a whose PDB allows no disruption, and its server in b."""

    def spec(obj: b.Obj) -> None:
        obj["metadata"]["generation"] = 2
        obj["spec"].update(deployment.get("spec", {}))
        obj["status"] = {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1}
        obj["status"].update(deployment.get("status", {}))

    objects = [
        b.deployment("client", 1, mutate=spec)
        if o["kind"] == "Deployment" and o["metadata"]["name"] == "client"
        else o
        for o in chatty_objects(["node-a11"], ["node-b11", "node-b12"])
    ]
    return [*objects, b.pdb("client", {"app": "client"}, 0), b.pdb("server", {"app": "server"}, 0)]


def _plan(objects: list[b.Obj], **policy: Any) -> Any:
    plan, _view = plan_once(make_policy(**policy), snapshot_of(objects), chatty_rates(objects))
    return plan


def _client(moves: Any) -> list[Move]:
    """The client's moves (the server, two replicas behind a PDB of 0, may be surged too)."""
    return [move for move in moves if move.pod.startswith("default/client")]


def test_surge_moves_a_single_replica_deployment_behind_a_zero_pdb() -> None:
    objects = _single_replica_pair()
    assert _plan(objects).moves == ()  # evict: single replica, and the PDB says no
    [move] = _client(_plan(objects, **SURGE).moves)
    assert (move.method, move.destination["zone"]) == ("surge", "b")


@pytest.mark.parametrize(
    ("switch", "reason"),
    [
        ({"single_replica": False}, "single-replica workload"),
        ({"zero_disruption_pdb": False}, "PDB client allows no more disruptions"),
    ],
)
def test_each_surge_switch_can_be_turned_off(switch: dict[str, bool], reason: str) -> None:
    surge = {"mode": "migrate", "migrate": {"method": "surge", "surge": switch}}
    plan = _plan(_single_replica_pair(), **surge)
    assert _client(plan.moves) == []
    assert reason in {s.reason for s in plan.skipped if s.pod.startswith("default/client")}


@pytest.mark.parametrize(
    ("deployment", "reason"),
    [
        ({"spec": {"paused": True}}, "its Deployment is paused"),
        (
            {"status": {"observedGeneration": 1}},
            "its Deployment is rolling out: its controller has not yet seen its latest spec",
        ),
        (
            {"status": {"updatedReplicas": 0}},
            "its Deployment is rolling out: 0 of 1 pods on the latest template",
        ),
    ],
)
def test_a_paused_or_rolling_deployment_is_not_surged(
    deployment: dict[str, Any], reason: str
) -> None:
    plan = _plan(_single_replica_pair(**deployment), **SURGE)
    assert _client(plan.moves) == []
    skipped = {s.reason: s.category for s in plan.skipped if s.pod.startswith("default/client")}
    assert skipped == {reason: "surge"}


def test_an_autoscaled_deployment_is_surged_only_if_the_policy_allows() -> None:
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "client-hpa", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "client"}
        },
    }
    objects = [*_single_replica_pair(), hpa]
    plan = _plan(objects, **SURGE)
    assert _client(plan.moves) == []
    assert any("HorizontalPodAutoscaler client-hpa" in s.reason for s in plan.skipped)
    allowed = {"mode": "migrate", "migrate": {"method": "surge", "surge": {"autoscaled": True}}}
    assert [m.method for m in _client(_plan(objects, **allowed).moves)] == ["surge"]


def test_a_workload_with_a_surge_under_way_is_not_moved_again() -> None:
    objects = _single_replica_pair()
    snapshot = snapshot_of(objects)
    [move] = _client(_plan(objects, **SURGE).moves)
    state = PlannerState().with_surge(
        surge_record(move, 1, ["uid-old"], now=0.0, timeout=300, leader="me")
    )
    plan, _view = plan_once(make_policy(**SURGE), snapshot, chatty_rates(objects), state=state)
    assert _client(plan.moves) == []
    assert "a surge of its Deployment is under way" in {s.reason for s in plan.skipped}


def test_dry_run_previews_surges_and_evict_mode_never_surges() -> None:
    objects = _single_replica_pair()
    dry = {"mode": "dry-run", "migrate": {"method": "surge"}}
    assert [m.method for m in _client(_plan(objects, **dry).moves)] == ["surge"]
    assert _plan(objects, mode="evict", migrate={"method": "surge"}).moves == ()


def test_statefulset_pods_keep_the_evict_path() -> None:
    objects = [
        *grid_nodes(),
        *b.deployment_pods("server", ["node-b11", "node-b12"]),
        *(
            b.pod(f"client-{i}", node, ("StatefulSet", "client"), labels={"app": "client"})
            for i, node in enumerate(["node-a11", "node-a12"])
        ),
    ]
    moves = _client(_plan(objects, **SURGE).moves)
    assert moves and {m.method for m in moves} == {"evict"}


def _record(phase: str = "scaled-up", deadline: float = 100.0) -> SurgeRecord:
    move = surge_move()
    record = surge_record(move, 1, ["uid-old"], now=0.0, timeout=deadline, leader="me")
    return record.at(phase)  # type: ignore[arg-type]


def _seen(
    replicas: int | None = 2,
    old: OldPod = "running",
    marked: bool = False,
    new: tuple[NewPod, ...] = (),
) -> SurgeSeen:
    return SurgeSeen(replicas, old, marked, new)


IN_B = {b.ZONE_LABEL: "b"}
IN_A = {b.ZONE_LABEL: "a"}


@pytest.mark.parametrize(
    ("phase", "seen", "now", "inherited", "step"),
    [
        ("scaled-up", _seen(new=(NewPod("n", "uid-new", False, None),)), 10, False, "wait"),
        ("scaled-up", _seen(new=(NewPod("n", "uid-new", True, IN_B),)), 10, False, "switch"),
        ("scaled-up", _seen(new=(NewPod("n", "uid-new", True, IN_A),)), 10, False, "revert"),
        ("scaled-up", _seen(new=(NewPod("n", "uid-new", False, IN_B),)), 101, False, "revert"),
        ("scaled-up", _seen(new=(NewPod("n", "uid-new", False, IN_B),)), 10, True, "revert"),
        ("scaled-up", _seen(new=(NewPod("n", "uid-new", True, IN_B),)), 10, True, "switch"),
        ("scaled-up", _seen(old="gone"), 10, False, "revert"),
        ("scaled-up", _seen(replicas=3), 10, False, "abandon"),
        ("scaled-up", _seen(replicas=1, marked=True), 10, True, "scaled-back"),
        ("scaled-up", _seen(replicas=1), 10, True, "abandon"),
        # killed after the scale back, the old pod already gone: it landed
        (
            "scaled-up",
            _seen(replicas=1, old="gone", new=(NewPod("n", "u", True, IN_B),)),
            10,
            True,
            "done",
        ),
        ("scaled-up", _seen(replicas=None), 10, False, "abandon"),
        ("started", _seen(replicas=1), 10, True, "abandon"),
        ("started", _seen(replicas=2), 10, True, "revert"),
        ("scaled-down", _seen(replicas=1, old="terminating", marked=True), 10, True, "done"),
        ("scaled-down", _seen(replicas=1, old="gone"), 10, False, "done"),
        ("scaled-down", _seen(replicas=1, marked=True), 10, False, "wait"),
        ("scaled-down", _seen(replicas=1, marked=True), 200, False, "abandon"),
    ],
)
def test_each_step_follows_from_the_record_and_the_cluster(
    phase: str, seen: SurgeSeen, now: float, inherited: bool, step: str
) -> None:
    assert next_step(_record(phase), seen, now, inherited)[0] == step


def test_a_surge_ending_counts_as_a_landing_or_a_miss() -> None:
    record = _record()
    state = PlannerState().with_surge(record)
    missed = state.surge_ended(record, landed=False, now=7.0)
    assert (missed.misses, missed.last_moved) == ({record.workload: 1}, {record.workload: 7.0})
    assert state.surge_ended(record, landed=True, now=7.0).misses == {}
    assert state.surge_ended(record, landed=True, now=7.0).surges == []
    hint = record.hint()
    assert hint.required and hint.owner == ("default", "ReplicaSet", "client-5d8c7")
    assert hint == record.hint()  # made alike every time: withdrawn by what it is


@pytest.mark.parametrize(
    ("strategy", "reason"),
    [
        ({"type": "Recreate"}, "strategy Recreate"),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}, "maxSurge 0"),
        ({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "0%"}}, "maxSurge 0"),
    ],
)
def test_a_deployment_that_never_runs_an_extra_pod_is_not_surged(
    strategy: dict[str, Any], reason: str
) -> None:
    plan = _plan(_single_replica_pair(spec={"strategy": strategy}), **SURGE)
    assert _client(plan.moves) == []
    skipped = {s.reason for s in plan.skipped if s.pod.startswith("default/client")}
    assert skipped == {f"its Deployment runs one pod at a time ({reason})"}


def test_two_pods_of_one_deployment_are_never_surged_in_one_cycle() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = {**SURGE, "limits": {"per_workload": 5}}
    moves = _plan(objects, **policy).moves
    by_workload = [m.workload for m in moves if m.method == "surge"]
    assert by_workload and len(by_workload) == len(set(by_workload))
    skipped = _plan(objects, **policy).skipped
    assert "another pod of its Deployment is surged this cycle" in {s.reason for s in skipped}


def test_a_surge_under_way_holds_its_deployment_whatever_the_method() -> None:
    objects = _single_replica_pair()
    [move] = _client(_plan(objects, **SURGE).moves)
    state = PlannerState().with_surge(
        surge_record(move, 1, ["uid-old"], now=0.0, timeout=300, leader="me")
    )
    evicting = {"mode": "migrate", "protections": {"evict_single_replica": True}}
    plan, _view = plan_once(
        make_policy(**evicting), snapshot_of(objects), chatty_rates(objects), state=state
    )
    assert "a surge of its Deployment is under way" in {
        s.reason for s in plan.skipped if s.pod.startswith("default/client")
    }
