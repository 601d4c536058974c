"""The surge runner's bookkeeping against a fake cluster: what is saved before each change, and
what a failed or uncertain call leaves for the next cycle."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from harness import builders as b
from rebalancer.clients.surge import NotMadeError, Prepared, SurgeClient, SurgeError
from rebalancer.config.modes import Surge
from rebalancer.controller.surges import SurgeResult, Surges
from rebalancer.planning.state import PlannerState
from rebalancer.planning.surge import NewPod, OldPod, SurgeRecord, SurgeSeen
from rebalancer.planning.types import Move
from tests.conftest import surge_move

MOVE = surge_move("cache")


@dataclass
class FakeCluster:
    """The Deployment's scale, the old pod's mark and cost, the new pod, and hints, with a
    failure to raise on a named call."""

    replicas: int = 1
    cost: str | None = "7"
    marked: bool = False
    old: OldPod = "running"
    new: tuple[NewPod, ...] = ()
    hints: int = 0
    fail: dict[str, Exception] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    dry_run: bool = False

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name in self.fail:
            raise self.fail.pop(name)

    def prepare(self, move: Move, deployment: str) -> Prepared:
        self._call("prepare")
        return Prepared(self.replicas, ["uid-old"], self.cost)

    def scale_up(self, record: SurgeRecord, now: float) -> None:
        self.hints += 1
        self._call("scale_up")
        self.replicas += 1

    def scale_back(self, record: SurgeRecord) -> None:
        self._call("scale_back")
        if self.replicas != record.replicas + 1:
            raise NotMadeError("not ours")
        self.replicas -= 1

    def mark_old_pod(self, record: SurgeRecord) -> None:
        self._call("mark_old_pod")
        self.marked = True

    def unmark_old_pod(self, record: SurgeRecord) -> None:
        self._call("unmark_old_pod")
        self.marked = False
        self.cost = record.previous_cost

    def withdraw_hint(self, record: SurgeRecord, now: float) -> None:
        self._call("withdraw_hint")
        self.hints = 0

    def observe(self, record: SurgeRecord) -> SurgeSeen:
        self._call("observe")
        return SurgeSeen(self.replicas, self.old, self.marked, self.new)

    def event(self, record: SurgeRecord, reason: str, message: str, warning: bool = False) -> None:
        self.calls.append(reason)


@dataclass
class Saved:
    states: list[PlannerState] = field(default_factory=list)

    def save(self, state: PlannerState) -> None:
        self.states.append(state)


def _surges(
    cluster: FakeCluster, saved: Saved, results: list[SurgeResult], **kwargs: Any
) -> Surges:
    return Surges(
        cast(SurgeClient, cluster),
        saved,
        Surge(ready_timeout_seconds=60),
        kwargs.get("process", "me"),
        lambda: kwargs.get("now", 10.0),
        results.append,
        lambda: True,
        finishing=kwargs.get("finishing", True),
    )


def test_a_surge_is_saved_before_it_scales_and_again_once_scaled() -> None:
    cluster, saved = FakeCluster(), Saved()
    results: list[SurgeResult] = []
    state, [outcome] = _surges(cluster, saved, results).start([MOVE], PlannerState())
    assert outcome.result == "surged" and results == ["started"]
    assert [s.surges[0].phase for s in saved.states] == ["started", "scaled-up"]
    assert cluster.calls[:2] == ["prepare", "scale_up"] and cluster.replicas == 2
    assert state.surges[0].previous_cost == "7"


def test_an_uncertain_scale_up_leaves_the_record_for_the_next_cycle() -> None:
    cluster = FakeCluster(fail={"scale_up": SurgeError("timed out")})
    cluster.replicas = 1
    saved = Saved()
    results: list[SurgeResult] = []
    state, [outcome] = _surges(cluster, saved, results).start([MOVE], PlannerState())
    assert outcome.result == "failed" and results == ["failed"]
    [record] = state.surges  # what was saved: the final save of the cycle keeps it
    assert record.phase == "started" and saved.states[-1] == state
    # The next cycle reads the scale: the lost answer had made it, so it is undone.
    cluster.replicas = 2
    after = _surges(cluster, saved, results).advance(saved.states[-1])
    assert after.surges == [] and cluster.replicas == 1 and results[-1] == "reverted"
    assert cluster.cost == "7" and cluster.hints == 0


def test_a_scale_that_is_someone_elses_is_left_alone() -> None:
    cluster = FakeCluster(fail={"scale_up": NotMadeError("no longer has 1 replicas")})
    saved = Saved()
    results: list[SurgeResult] = []
    state, [outcome] = _surges(cluster, saved, results).start([MOVE], PlannerState())
    assert outcome.result == "failed" and state.surges == [] and results == ["abandoned"]
    assert "scale_back" not in cluster.calls and state.misses == {MOVE.workload: 1}
    assert state.last_moved == {MOVE.workload: 10.0}  # backs off from now


def _scaled_up(cluster: FakeCluster, saved: Saved) -> PlannerState:
    state, _outcomes = _surges(cluster, saved, []).start([MOVE], PlannerState())
    return state


def test_a_failed_scale_back_keeps_the_record_and_is_tried_again() -> None:
    cluster, saved = FakeCluster(), Saved()
    state = _scaled_up(cluster, saved)
    cluster.new = (NewPod("new", "uid-new", True, {b.ZONE_LABEL: "b"}),)
    cluster.fail["scale_back"] = SurgeError("HTTP 503")
    results: list[SurgeResult] = []
    state = _surges(cluster, saved, results).advance(state)
    assert [r.phase for r in state.surges] == ["scaled-up"] and cluster.replicas == 2
    state = _surges(cluster, saved, results).advance(state)
    assert [r.phase for r in state.surges] == ["scaled-down"] and cluster.replicas == 1
    cluster.old = "terminating"
    state = _surges(cluster, saved, results).advance(state)
    assert state.surges == [] and results == ["completed"] and state.misses == {}


def test_an_undo_puts_the_old_pods_cost_back_before_it_scales() -> None:
    cluster, saved = FakeCluster(), Saved()
    state = _scaled_up(cluster, saved)
    cluster.marked = True  # killed after the mark
    cluster.new = (NewPod("new", "uid-new", True, {b.ZONE_LABEL: "a"}),)  # Ready elsewhere
    calls_before = len(cluster.calls)
    state = _surges(cluster, saved, [], process="next-leader").advance(state)
    undo = cluster.calls[calls_before:]
    assert undo.index("unmark_old_pod") < undo.index("scale_back")
    assert state.surges == [] and cluster.replicas == 1 and not cluster.marked
    assert cluster.cost == "7"


def test_an_overdue_undo_scales_back_even_if_the_pod_cannot_be_unmarked() -> None:
    cluster, saved = FakeCluster(), Saved()
    state = _scaled_up(cluster, saved)
    cluster.fail["unmark_old_pod"] = SurgeError("HTTP 403")
    state = _surges(cluster, saved, [], now=1000.0).advance(state)  # far past its deadline
    assert state.surges == [] and cluster.replicas == 1
    assert "withdraw_hint" not in cluster.calls  # expired with the deadline


def test_a_policy_that_no_longer_surges_undoes_a_surge_it_could_finish() -> None:
    cluster, saved = FakeCluster(), Saved()
    state = _scaled_up(cluster, saved)
    cluster.new = (NewPod("new", "uid-new", True, {b.ZONE_LABEL: "b"}),)
    results: list[SurgeResult] = []
    state = _surges(cluster, saved, results, finishing=False).advance(state)
    assert results == ["reverted"] and "mark_old_pod" not in cluster.calls
    assert cluster.replicas == 1


def test_a_second_surge_of_a_deployment_under_way_is_not_started() -> None:
    cluster, saved = FakeCluster(), Saved()
    state = _scaled_up(cluster, saved)
    other = Move(**{**MOVE.__dict__, "pod": "default/cache-5d8c7-00001", "uid": "uid-2"})
    state, [outcome] = _surges(cluster, saved, []).start([other], state)
    assert outcome.result == "cancelled" and len(state.surges) == 1 and cluster.replicas == 2


@pytest.mark.parametrize("failing", ["observe", "unmark_old_pod"])
def test_a_failing_call_while_advancing_leaves_the_surge_for_the_next_cycle(
    failing: str,
) -> None:
    cluster, saved = FakeCluster(), Saved()
    state = _scaled_up(cluster, saved)
    cluster.fail[failing] = SurgeError("HTTP 503")
    after = _surges(cluster, saved, [], now=100.0).advance(state)  # timed out, not overdue
    assert after.surges == state.surges and cluster.replicas == 2
    after = _surges(cluster, saved, [], now=100.0).advance(after)
    assert after.surges == [] and cluster.replicas == 1
