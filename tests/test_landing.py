"""Where replacements landed is judged from snapshots; misses back a workload off."""

from __future__ import annotations

import pytest

from harness import builders as b
from rebalancer.cluster.model import Snapshot
from rebalancer.planning.landing import Hint, Landing, hint_for, judge, rank_of
from rebalancer.planning.state import PlannerState
from tests.conftest import chatty_objects, chatty_rates, make_policy, plan_once, snapshot_of

EVICTED_AT = 1_800_000_000.0
CREATED_AFTER = "2027-01-15T08:00:05Z"  # five seconds after EVICTED_AT
CREATED_BEFORE = "2027-01-15T07:59:00Z"


def landing(expires: float = EVICTED_AT + 300) -> Landing:
    hint = Hint(
        namespace="default",
        owner_kind="ReplicaSet",
        owner_name="web-rs",
        workload="Deployment/default/web",
        domain={b.ZONE_LABEL: "b"},
        expires=expires,
    )
    return Landing(hint=hint, evicted_pod="default/web-rs-old", evicted_at=EVICTED_AT)


def cluster(*pods: tuple[str, str | None, str]) -> Snapshot:
    """Pods of web-rs as (name, node, creationTimestamp), on nodes n-a (zone a) and n-b (zone b)."""
    objects = [b.node("n-a", "a"), b.node("n-b", "b")]
    for name, node, created in pods:

        def stamp(pod: b.Obj, created: str = created) -> None:
            pod["metadata"]["creationTimestamp"] = created

        objects.append(b.pod(name, node, ("ReplicaSet", "web-rs"), mutate=stamp))
    return snapshot_of(objects)


@pytest.mark.parametrize(
    ("pods", "now", "result"),
    [
        ((("web-rs-new", "n-b", CREATED_AFTER),), EVICTED_AT + 10, "landed-in-target"),
        ((("web-rs-new", "n-a", CREATED_AFTER),), EVICTED_AT + 10, "landed-elsewhere"),
        ((("web-rs-new", None, CREATED_AFTER),), EVICTED_AT + 301, "not-scheduled"),
        ((("web-rs-keep", "n-b", CREATED_BEFORE),), EVICTED_AT + 301, "not-scheduled"),
        ((("web-rs-old", "n-b", CREATED_AFTER),), EVICTED_AT + 10, "landed-in-target"),
        ((("web-rs-new", "n-gone", CREATED_AFTER),), EVICTED_AT + 301, "not-scheduled"),
    ],
    ids=[
        "in-target",
        "elsewhere",
        "pending-past-expiry",
        "only-older-pods",
        "statefulset-reuses-the-name",
        "on-a-node-the-snapshot-lacks",
    ],
)
def test_judged_results(
    pods: tuple[tuple[str, str | None, str], ...], now: float, result: str
) -> None:
    judged, pending = judge([landing()], cluster(*pods), now)
    assert [item.result for item in judged] == [result] and pending == []


def test_an_unbound_replacement_before_expiry_is_still_pending() -> None:
    judged, pending = judge(
        [landing()], cluster(("web-rs-new", None, CREATED_AFTER)), EVICTED_AT + 10
    )
    assert judged == [] and pending == [landing()]


def test_each_replacement_answers_one_landing() -> None:
    snapshot = cluster(("web-rs-new", "n-b", CREATED_AFTER))
    judged, pending = judge([landing(), landing()], snapshot, EVICTED_AT + 10)
    assert [item.pod for item in judged] == ["default/web-rs-new"]
    assert len(pending) == 1


def test_a_statefulset_replacement_answers_the_landing_of_its_own_name() -> None:
    """Two pods of one controller evicted and made again in the same second: each landing is
    judged by the pod of its own name, not by whichever sorts first."""
    snapshot = cluster(("web-1", "n-a", CREATED_AFTER), ("web-3", "n-b", CREATED_AFTER))
    to_a = landing().hint.model_copy(update={"domain": {b.ZONE_LABEL: "a"}})
    landings = [
        Landing(hint=landing().hint, evicted_pod="default/web-3", evicted_at=EVICTED_AT),
        Landing(hint=to_a, evicted_pod="default/web-1", evicted_at=EVICTED_AT),
    ]
    judged, pending = judge(landings, snapshot, EVICTED_AT + 10)
    assert [(item.pod, item.result) for item in judged] == [
        ("default/web-3", "landed-in-target"),
        ("default/web-1", "landed-in-target"),
    ]
    assert pending == []


def test_misses_back_a_workload_off_doubling_each_time() -> None:
    objects = chatty_objects(["node-a11", "node-a12"], ["node-b11", "node-b12"])
    policy = make_policy(cooldown={"per_workload_seconds": 100})
    now = 1_000_000.0
    last = {"Deployment/default/client": now - 150, "Deployment/default/server": now - 150}
    both = ("Deployment/default/client", "Deployment/default/server")
    for misses, moves, reasons in [
        (0, True, set()),  # no miss: the same move may go on at once
        (1, True, set()),  # one miss waits one cooldown: 100 s, and 150 s have passed
        (2, False, {"backing off 50s more after 2 replacement(s) missed their target"}),
    ]:
        state = PlannerState(last_moved=last, misses=dict.fromkeys(both, misses) if misses else {})
        plan, _view = plan_once(policy, snapshot_of(objects), chatty_rates(objects), state, now)
        assert bool(plan.moves) is moves, misses
        assert {s.reason for s in plan.skipped if s.category == "cooldown"} == reasons


def _ranked(rank: str | None, zone: str = "b") -> Hint:
    return landing().hint.model_copy(update={"rank": rank, "domain": {b.ZONE_LABEL: zone}})


def test_a_ranked_hint_steers_only_the_replacement_of_its_rank() -> None:
    owner = ("default", "ReplicaSet", "web-rs")
    for_1, for_2, any_pod = _ranked("1"), _ranked("2"), _ranked(None)
    assert hint_for([for_1, for_2], owner, "2") is for_2
    assert hint_for([for_1, for_2], owner, None) is None  # an unranked pod takes no rank's
    assert hint_for([for_1, any_pod], owner, "3") is any_pod
    assert hint_for([for_1], ("default", "ReplicaSet", "other"), "1") is None


@pytest.mark.parametrize(
    ("labels", "annotations", "rank"),
    [
        ({}, {"batch.kubernetes.io/job-completion-index": "3"}, "3"),
        ({"batch.kubernetes.io/job-completion-index": "3"}, {}, "3"),
        (
            {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "2",
            },
            {},
            "worker/2",
        ),
        ({"training.kubeflow.org/replica-index": "2"}, {}, None),
        ({"apps.kubernetes.io/pod-index": "4"}, {}, "4"),
        ({}, {}, None),
    ],
)
def test_the_rank_a_replacement_inherits(
    labels: dict[str, str], annotations: dict[str, str], rank: str | None
) -> None:
    assert rank_of(labels, annotations) == rank


def test_each_rank_s_landing_is_judged_by_the_replacement_of_that_rank() -> None:
    """Two ranks of one Job evicted in one cycle to two zones: each landing is judged by the
    new pod of its own rank, though the other was made first."""

    def ranked_pod(name: str, node: str, rank: str) -> b.Obj:
        def stamp(pod: b.Obj) -> None:
            pod["metadata"]["creationTimestamp"] = CREATED_AFTER
            pod["metadata"]["annotations"] = {"batch.kubernetes.io/job-completion-index": rank}

        return b.pod(name, node, ("ReplicaSet", "web-rs"), mutate=stamp)

    snapshot = snapshot_of(
        [
            b.node("n-a", "a"),
            b.node("n-b", "b"),
            ranked_pod("aa", "n-b", "2"),
            ranked_pod("bb", "n-a", "1"),
        ]
    )
    landings = [
        Landing(hint=_ranked("1", zone="a"), evicted_pod="default/old-1", evicted_at=EVICTED_AT),
        Landing(hint=_ranked("2", zone="b"), evicted_pod="default/old-2", evicted_at=EVICTED_AT),
    ]
    judged, pending = judge(landings, snapshot, EVICTED_AT + 10)
    assert [(item.pod, item.result) for item in judged] == [
        ("default/bb", "landed-in-target"),
        ("default/aa", "landed-in-target"),
    ]
    assert pending == []


def test_state_is_stored_without_unset_fields_so_an_older_controller_reads_it() -> None:
    """Before ranks, a Hint had no `rank`, and the state models forbid unknown keys: a landing
    without a rank must be stored without the key, and still read back the same."""
    ranked = landing().model_copy(update={"hint": landing().hint.model_copy(update={"rank": "3"})})
    for landings, keys in (([landing()], set()), ([ranked], {"rank"})):
        state = PlannerState(landings=landings)
        stored = state.stored()
        assert ('"rank"' in stored) == ("rank" in keys)
        assert "null" not in stored
        assert PlannerState.model_validate_json(stored) == state
