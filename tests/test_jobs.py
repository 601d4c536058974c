"""Non-elastic jobs: recognised from their pods, moved whole in one cycle or not at all, counted as
one disruption, and restarted only when it pays."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness import builders as b
from rebalancer.clients.eviction import EvictionExecutor
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Domain
from rebalancer.config.resolved import PlanningRules
from rebalancer.planning.cycle import build_view, plan_cycle, propose
from rebalancer.planning.jobs import EXPECTED_END_ANNOTATION, job_key, whole_jobs
from rebalancer.planning.state import PlannerState
from rebalancer.planning.types import Move, Plan
from tests.conftest import grid_nodes, make_policy, pod_keys, snapshot_of, traffic_of
from tests.test_dry_run import Quiet, Recording

NOW = 1_000_000.0
RING_NODES = ("node-a11", "node-a21", "node-a12", "node-a22")
"""Rank i on RING_NODES[i]: ranks alternate between racks r1 and r2, so every ring link
crosses a rack. Each node holds one rank and no more: only a reordering helps."""
POLICY: dict[str, Any] = {
    "strategies": [{"name": "split-peers", "args": {"level": "zone", "down_to": "rack"}}],
    "limits": {"per_cycle": 10, "per_node": 2, "per_namespace": 5, "per_workload": 1},
}


def _rank(
    index: int,
    node: str,
    owner: tuple[str, str] = ("Job", "train"),
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    cpu: str = "1",
) -> b.Obj:
    def mark(obj: b.Obj) -> None:
        obj["metadata"]["annotations"] = {
            "batch.kubernetes.io/job-completion-index": str(index),
            **(annotations or {}),
        }

    name = f"{owner[1]}-{index}"
    return b.pod(name, node, owner, labels=labels, cpu=cpu, mutate=mark)


def _ring(pods: list[str], rate: float = 10.0) -> dict[tuple[str, str], float]:
    return {(pods[i], pods[(i + 1) % len(pods)]): rate for i in range(len(pods))}


def _ring_cycle(
    annotations: dict[str, str] | None = None,
    state: PlannerState | None = None,
    ranks: frozenset[int] = frozenset(range(4)),
    **policy: Any,
) -> Plan:
    """The ring's cycle, with `annotations` on the ranks named."""
    objects = [
        *grid_nodes(cpu="1"),
        *(
            _rank(i, node, annotations=annotations if i in ranks else None)
            for i, node in enumerate(RING_NODES)
        ),
    ]
    snapshot = snapshot_of(objects)
    return _plan(snapshot, _ring(pod_keys(snapshot, "train-")), state, **policy)


def _plan(
    snapshot: Snapshot,
    rates: dict[tuple[str, str], float],
    state: PlannerState | None = None,
    **policy: Any,
) -> Plan:
    """One cycle's plan, persistence met, under the test policy updated by `policy`."""
    outcome = plan_cycle(
        make_policy(**{**POLICY, **policy}),
        snapshot,
        traffic_of(rates),
        state or PlannerState(),
        now=NOW,
        persistence_required=0,
    )
    assert outcome.plan is not None
    return outcome.plan


def test_a_ring_split_rank_by_rank_is_reordered_whole_in_one_cycle() -> None:
    plan = _ring_cycle()
    # Two ranks swap racks, which needs no free room, in one cycle although the per-workload
    # limit is 1: the job's restart is one disruption.
    assert len(plan.moves) == 2
    assert {move.job for move in plan.moves} == {"default/train"}
    assert {move.rank for move in plan.moves} in ({"1", "2"}, {"0", "3"}, {"0", "1"}, {"2", "3"})
    assert plan.before.crossing["rack"] == 40.0
    assert plan.after.crossing["rack"] == 20.0  # two runs of two ranks: two links cross


def test_moved_one_by_one_the_same_ring_cannot_be_fixed() -> None:
    """What moving a job pod by pod gets on the same ring: no rank alone can move, as every
    node is full, so nothing is done."""
    plan = _ring_cycle(jobs={"whole": False})
    assert plan.moves == ()


def test_a_job_restarted_lately_waits_and_says_so() -> None:
    state = PlannerState(last_moved={"Job/default/train": NOW - 60})
    plan = _ring_cycle(state=state)
    assert plan.moves == ()
    [skip] = plan.skipped
    assert skip.category == "cooldown"
    assert skip.reason.startswith("job default/train restarted 60s ago")


def test_a_job_about_to_end_is_not_restarted() -> None:
    soon = datetime.datetime.fromtimestamp(NOW + 300, datetime.UTC).isoformat()
    plan = _ring_cycle(annotations={EXPECTED_END_ANNOTATION: soon})
    assert plan.moves == ()
    [skip] = plan.skipped
    assert (skip.category, skip.reason) == (
        "below-threshold",
        "job default/train ends in 300s, before a restart would pay",
    )


def test_a_restart_must_save_the_share_of_the_run_it_loses() -> None:
    # Halving the crossing saves 2 x 10 x (3 - 1) = 40 of a cost of 4 x 10 x 3 = 120: a third.
    # A restart that loses 2 of the 5 hours left costs 40% of the run: not worth it.
    plan = _ring_cycle(jobs={"restart_seconds": 7200, "remaining_seconds": 18000})
    assert plan.moves == ()
    [skip] = plan.skipped
    assert skip.category == "below-threshold"
    assert "saves 33.3% of its traffic, below the 40.0% a restart costs" in skip.reason
    assert len(_ring_cycle(jobs={"restart_seconds": 3600, "remaining_seconds": 18000}).moves) == 2


EXCLUDED = {"topology-rebalancer.io/exclude": "true"}


def test_the_ranks_that_may_move_are_reordered_around_one_that_may_not() -> None:
    plan = _ring_cycle(annotations=EXCLUDED, ranks=frozenset({1}))
    assert len(plan.moves) == 2 and "default/train-1" not in {m.pod for m in plan.moves}
    assert plan.after.crossing["rack"] == 20.0


def test_a_job_none_of_whose_ranks_may_move_stays_and_the_plan_says_why() -> None:
    plan = _ring_cycle(annotations=EXCLUDED)
    assert plan.moves == ()
    assert plan.skipped and all(s.category == "protected" for s in plan.skipped)


def test_shards_that_do_not_talk_to_each_other_keep_their_own_moves() -> None:
    """A Job of independent shards reading one server loses only the shard moved."""
    objects = [
        *grid_nodes(),
        b.pod("db", "node-b11", ("StatefulSet", "db")),
        *(_rank(i, "node-a11", cpu="500m") for i in range(3)),
    ]
    snapshot = snapshot_of(objects)
    rates = {(shard, "default/db"): 10.0 for shard in pod_keys(snapshot, "train-")}
    view = build_view(make_policy(**POLICY), snapshot, traffic_of(rates))
    candidates = propose(make_policy(**POLICY), view)
    rules = PlanningRules.of(make_policy(**POLICY), view.topology)
    kept, jobs = whole_jobs(view, candidates, rules, {}, NOW)
    assert jobs == {}
    assert kept == candidates


@pytest.mark.parametrize(
    ("owner", "labels", "annotations", "expected"),
    [
        (("Job", "train"), {}, {}, "default/train"),
        (("PyTorchJob", "llm"), {"training.kubeflow.org/job-name": "llm"}, {}, "default/llm"),
        (("Job", "bps-worker"), {"app.kubernetes.io/part-of": "bps"}, {}, "default/bps"),
        (("StatefulSet", "mpi"), {}, {"topology-rebalancer.io/job": "mpi"}, "default/mpi"),
        (("Job", "train"), {}, {"topology-rebalancer.io/elastic": "true"}, None),
        (("StatefulSet", "db"), {}, {}, None),
        (("Deployment", "web"), {"app.kubernetes.io/part-of": "shop"}, {}, None),
    ],
)
def test_which_pods_are_ranks_of_which_job(
    owner: tuple[str, str],
    labels: dict[str, str],
    annotations: dict[str, str],
    expected: str | None,
) -> None:
    snapshot = snapshot_of(
        [*grid_nodes(), _rank(0, "node-a11", owner, labels=labels, annotations=annotations)]
    )
    [pod] = snapshot.pods.values()
    assert job_key(pod, make_policy().jobs) == expected


def test_a_parameter_server_job_of_three_owners_moves_as_one() -> None:
    """BytePS: workers and servers as two Jobs of one application; the workers never talk to
    each other, the servers neither, but each talks to the other Job: one job, moved whole."""
    part_of = {"app.kubernetes.io/part-of": "bps"}
    objects = [
        *grid_nodes(cpu="4"),
        *(
            _rank(i, f"node-a{1 + i // 2}{1 + i % 2}", ("Job", "worker"), labels=part_of)
            for i in range(4)
        ),
        *(_rank(i, "node-b11", ("Job", "server"), labels=part_of) for i in range(2)),
    ]
    snapshot = snapshot_of(objects)
    workers, servers = pod_keys(snapshot, "worker-"), pod_keys(snapshot, "server-")
    rates = {(w, s): 10.0 for w in workers for s in servers}
    plan = _plan(snapshot, rates)
    assert {m.job for m in plan.moves} == {"default/bps"}
    assert set(servers) <= {m.pod for m in plan.moves}  # the servers join the workers' zone
    assert plan.after.crossing["zone"] == 0


def _job_move(pod: str, zone: str) -> Move:
    return Move(
        pod=f"ml/{pod}",
        workload="Job/ml/train",
        origin={"zone": "a"},
        target=Domain(0, (zone,)),
        destination={"zone": zone},
        node=f"n-{zone}",
        target_labels={"zone": zone},
        controller=("Job", "train"),
        gain=1.0,
        strategy="split-peers",
        reason="test",
        uid=f"uid-{pod}",
        job="ml/train",
    )


def test_no_pod_of_a_job_is_evicted_when_one_of_its_moves_no_longer_holds() -> None:
    """The second rank's planned node has left its target zone since the plan: the first rank
    is not evicted either, as the job would restart for half its move."""
    executor = EvictionExecutor(client.ApiClient(), Quiet(), dry_run=False)  # type: ignore[arg-type]
    recording = Recording()  # every node it reads is in zone b
    executor.core = recording  # type: ignore[assignment]
    outcomes = executor.execute((_job_move("train-0", "b"), _job_move("train-1", "c")))
    assert [o.result for o in outcomes] == ["cancelled", "cancelled"]
    assert all("job ml/train not moved: ml/train-1: node n-c" in o.detail for o in outcomes)
    assert recording.evictions == []
    whole = executor.execute((_job_move("train-0", "b"), _job_move("train-1", "b")))
    assert [o.result for o in whole] == ["evicted", "evicted"]


def test_a_rank_is_never_moved_as_another_pod_s_companion() -> None:
    """A web pod boxed in with a rank as its heaviest peer: split-peers proposes the two as a
    pair into a third zone. The rank is the job's, restarted a minute ago: the pair waits."""
    objects = [
        *grid_nodes(zones="abc", racks=1, per_rack=2, cpu="1"),
        *b.deployment_pods("web", ["node-a11", "node-a12"], cpu="1"),
        _rank(0, "node-b11"),
        _rank(1, "node-b12"),
    ]
    snapshot = snapshot_of(objects)
    web, ranks = pod_keys(snapshot, "web-"), pod_keys(snapshot, "train-")
    rates = {(web[0], ranks[0]): 100.0, (ranks[0], ranks[1]): 1.0}
    plan = _plan(snapshot, rates, PlannerState(last_moved={"Job/default/train": NOW - 60}))
    assert not {m.pod for m in plan.moves} & set(ranks)
    # Not held back: the job's own search finds no move of its ranks that pays, and the pair
    # is not made as the job's move either.
    assert not {m.pod for m in _plan(snapshot, rates).moves} & set(ranks)


def test_the_room_a_job_leaves_is_not_given_to_other_moves_in_the_cycle() -> None:
    """The evicted rank holds its node until it has terminated: only its own job's
    replacements wait for that room, so no other move is planned onto it."""
    nodes = ["node-a11", "node-a12", "node-a13", "node-b11", "node-b12", "node-b13", "node-b14"]
    objects = [
        *(b.node(n, zone=n[5], rack="r1", cpu="1") for n in nodes),
        _rank(0, "node-a11"),
        _rank(1, "node-b11"),
        *b.deployment_pods("api", ["node-a12", "node-a13"], cpu="1"),
        *b.deployment_pods("web", ["node-b12", "node-b13"], cpu="1"),
    ]
    snapshot = snapshot_of(objects)
    ranks, api, web = (pod_keys(snapshot, p) for p in ("train-", "api-", "web-"))
    rates = {(ranks[0], ranks[1]): 10.0, (web[0], api[0]): 5.0}
    moves = _plan(snapshot, rates).moves
    assert [m.job for m in moves] == ["default/train"]  # the web pod finds no free node
    assert all(m.node != "node-a11" for m in moves)


def test_a_deployment_declared_a_job_is_evicted_whole_even_under_surge() -> None:
    """A surge waits for each new pod to be Ready, one Deployment pod at a time: a job's
    ranks all go at once, so they are evicted, whatever the method."""

    def declared(obj: b.Obj) -> None:
        obj["metadata"]["annotations"] = {"topology-rebalancer.io/job": "mpi"}

    objects = [
        *grid_nodes(cpu="1"),
        *b.deployment_pods("mpi", RING_NODES, cpu="1", mutate_pod=declared),
    ]
    snapshot = snapshot_of(objects)
    rates = _ring(pod_keys(snapshot, "mpi-"))
    moves = _plan(snapshot, rates, mode="migrate", migrate={"method": "surge"}).moves
    assert len(moves) == 2
    assert {(m.method, m.job) for m in moves} == {("evict", "default/mpi")}


class RefusingFirst(Recording):
    """The first eviction is refused by its PDB."""

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body: Any) -> None:
        if not self.evictions and not getattr(self, "refused", False):
            self.refused = True
            raise ApiException(status=429, reason="Too Many Requests")
        super().create_namespaced_pod_eviction(name, namespace, body)


def test_when_a_job_s_first_eviction_fails_the_rest_of_it_stays() -> None:
    executor = EvictionExecutor(client.ApiClient(), Quiet(), dry_run=False)  # type: ignore[arg-type]
    recording = RefusingFirst()
    executor.core = recording  # type: ignore[assignment]
    outcomes = executor.execute((_job_move("train-0", "b"), _job_move("train-1", "b")))
    assert [o.result for o in outcomes] == ["refused-by-pdb", "cancelled"]
    assert outcomes[1].detail.startswith("job ml/train not moved: its first eviction failed")
    assert recording.evictions == []


def _job_object(spec: dict[str, Any], failed: int = 0, **status: Any) -> b.Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": spec,
        "status": {"failed": failed, **status},
    }


def _rule(action: str, **on: Any) -> dict[str, Any]:
    return {"action": action, **on}


DISRUPTED = {"onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


@pytest.mark.parametrize(
    ("spec", "failed", "left", "per_index"),
    [
        ({}, 0, 6, None),  # the API's default backoffLimit
        ({"backoffLimit": 3}, 1, 2, None),
        ({"backoffLimit": 1}, 4, 0, None),
        ({"backoffLimitPerIndex": 2}, 0, None, 2),
        (
            {
                "backoffLimit": 0,
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "Ignore",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        }
                    ]
                },
            },
            0,
            0,
            None,
        ),
    ],
    ids=["default", "some-failed", "spent", "per-index", "evictions-ignored"],
)
def test_a_job_s_failure_budget_is_read_from_its_spec_and_status(
    spec: dict[str, Any], failed: int, left: int | None, per_index: int | None
) -> None:
    _budget_is(_job_object(spec, failed), left, per_index, "podFailurePolicy" not in spec)


def _budget_is(
    job: b.Obj, left: int | None, per_index: int | None, evictions_fail: bool = True
) -> None:
    snapshot = snapshot_of([*grid_nodes(), job, _rank(0, "node-a11")])
    [pod] = snapshot.pods.values()
    assert pod.workload is not None
    read = snapshot.workloads[pod.workload]
    assert (read.failures_left, read.failures_per_index, read.evictions_fail) == (
        left,
        per_index,
        evictions_fail,
    )


FAIL_ON_SIGTERM = _rule("FailJob", onExitCodes={"operator": "In", "values": [143]})
FAIL_ON_ANY_EXIT = _rule("FailJob", onExitCodes={"operator": "NotIn", "values": [0]})
IGNORE_OTHER_CODES = _rule("Ignore", onExitCodes={"operator": "In", "values": [42]})
NOT_DISRUPTED = {"onPodConditions": [{"type": "DisruptionTarget", "status": "False"}]}


@pytest.mark.parametrize(
    ("rules", "left", "per_index", "evictions_fail"),
    [
        ([FAIL_ON_SIGTERM, _rule("Ignore", **DISRUPTED)], 0, None, True),
        ([FAIL_ON_ANY_EXIT, _rule("Ignore", **DISRUPTED)], 0, None, True),
        ([IGNORE_OTHER_CODES, _rule("Ignore", **DISRUPTED)], 6, None, False),
        ([_rule("FailIndex", **DISRUPTED)], 6, 0, True),
        ([_rule("Ignore", **NOT_DISRUPTED)], 6, None, True),
        ([_rule("Count", **DISRUPTED), _rule("Ignore", **DISRUPTED)], 6, None, True),
    ],
    ids=[
        "fail-on-sigterm-first",
        "fail-on-any-exit-first",
        "other-codes-then-ignore",
        "fail-index",
        "condition-false",
        "count-first",
    ],
)
def test_the_first_pod_failure_policy_rule_an_evicted_pod_may_match_decides(
    rules: list[dict[str, Any]], left: int | None, per_index: int | None, evictions_fail: bool
) -> None:
    """`Ignore` spares the evicted pods only: the ranks a restart makes abort count still."""
    job = _job_object({"podFailurePolicy": {"rules": rules}})
    _budget_is(job, left, per_index, evictions_fail)


def test_pods_terminating_or_failed_but_not_yet_counted_are_failures_already() -> None:
    job = _job_object(
        {"backoffLimit": 6, "backoffLimitPerIndex": 2},
        failed=1,
        terminating=2,
        uncountedTerminatedPods={"failed": ["uid-1"]},
    )
    _budget_is(job, 2, 2)


@pytest.mark.parametrize(
    ("spec", "moves"),
    [({"backoffLimit": 3}, 0), ({"backoffLimit": 4}, 2), ({"backoffLimitPerIndex": 1}, 2)],
)
def test_no_job_is_moved_into_failing_by_its_own_evictions(
    spec: dict[str, Any], moves: int
) -> None:
    """The ring's reordering evicts two ranks, and the two left behind abort when their peers
    go: four failed pods, which a Job with a backoffLimit of 3 does not survive."""
    objects = [
        *grid_nodes(cpu="1"),
        _job_object(spec),
        *(_rank(i, node) for i, node in enumerate(RING_NODES)),
    ]
    snapshot = snapshot_of(objects)
    plan = _plan(snapshot, _ring(pod_keys(snapshot, "train-")))
    assert len(plan.moves) == moves
    if not moves:
        assert any("its restart fails all 4 pods of Job train" in s.reason for s in plan.skipped)


def test_an_index_that_has_failed_its_limit_is_not_evicted_again() -> None:
    def failed_once(obj: b.Obj) -> None:
        obj["metadata"]["annotations"]["batch.kubernetes.io/job-index-failure-count"] = "1"

    objects = [
        *grid_nodes(cpu="1"),
        _job_object({"backoffLimitPerIndex": 1}),
        *(_rank(i, node) for i, node in enumerate(RING_NODES)),
    ]
    for index, obj in enumerate(objects):
        if obj["kind"] == "Pod" and obj["metadata"]["name"] in ("train-1", "train-2"):
            failed_once(obj)
            objects[index] = obj
    snapshot = snapshot_of(objects)
    plan = _plan(snapshot, _ring(pod_keys(snapshot, "train-")))
    assert plan.moves == ()  # a restart fails every index once more, the spent ones too
    assert any("would fail an index of Job train for good" in s.reason for s in plan.skipped)


def test_a_job_missing_from_the_snapshot_allows_the_api_s_default_failures() -> None:
    snapshot = snapshot_of([*grid_nodes(), _rank(0, "node-a11")])
    [pod] = snapshot.pods.values()
    assert pod.workload is not None
    assert snapshot.workloads[pod.workload].failures_left == 6


def test_in_evict_mode_a_job_is_not_restarted_for_a_placement_it_cannot_be_steered_to() -> None:
    plan = _ring_cycle(mode="evict")
    assert plan.moves == ()
    [skip] = plan.skipped
    assert skip.category == "protected"
    assert "restarted only where its pods are steered (migrate mode)" in skip.reason


def _on_failure(rank: b.Obj, restarts: int) -> b.Obj:
    """The rank under restartPolicy OnFailure, its container restarted `restarts` times."""
    rank["spec"]["restartPolicy"] = "OnFailure"
    rank["status"]["containerStatuses"] = [{"name": "worker", "restartCount": restarts}]
    return rank


@pytest.mark.parametrize(
    ("limit", "restarts", "moves"),
    [(3, 0, 2), (6, 1, 2), (6, 2, 0), (0, 0, 0)],
    ids=["evicted-only-fail", "restarts-below-limit", "restarts-reach-limit", "no-restart-at-0"],
)
def test_under_on_failure_a_restart_is_charged_the_container_restarts_it_causes(
    limit: int, restarts: int, moves: int
) -> None:
    """The ring's reordering evicts two ranks; the two it leaves restart their containers in
    place, one restart each, which the Job controller adds to their restarts so far and fails
    the Job at backoffLimit. Only the evicted pods count as failed."""
    ranks = [_on_failure(_rank(i, node), restarts) for i, node in enumerate(RING_NODES)]
    snapshot = snapshot_of([*grid_nodes(cpu="1"), _job_object({"backoffLimit": limit}), *ranks])
    plan = _plan(snapshot, _ring(pod_keys(snapshot, "train-")))
    assert len(plan.moves) == moves
    if not moves:
        assert any(
            f"the Job fails at backoffLimit {limit} (restartPolicy OnFailure)" in s.reason
            for s in plan.skipped
        )


def test_a_pod_s_container_restarts_are_read_from_its_status() -> None:
    rank = _on_failure(_rank(0, "node-a11"), 2)
    rank["status"]["containerStatuses"].append({"name": "sidecar", "restartCount": 1})
    rank["status"]["initContainerStatuses"] = [{"restartCount": 1}]
    snapshot = snapshot_of([*grid_nodes(), _job_object({"backoffLimit": 4}), rank])
    [pod] = snapshot.pods.values()
    assert (pod.restart_policy, pod.restarts) == ("OnFailure", 4)
    assert pod.workload is not None and snapshot.workloads[pod.workload].backoff_limit == 4
