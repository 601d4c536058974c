"""Surge migrations, step by step, with each step recorded in the state before it is made.

`start` begins the surges a cycle planned; `advance`, at the start of every cycle, takes each
surge under way one step further (see rebalancer/planning/surge.py for the steps). The state is
saved before every change to the cluster, so a controller killed between any two calls leaves a
record from which the next leader finishes the surge or undoes it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from rebalancer.clients.eviction import Outcome
from rebalancer.clients.surge import NotMadeError, SurgeClient, SurgeError
from rebalancer.config.modes import Surge
from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.state import PlannerState
from rebalancer.planning.surge import (
    SCALED_DOWN_GRACE_SECONDS,
    SurgeRecord,
    next_step,
    surge_record,
)
from rebalancer.planning.types import Move

SurgeResult = Literal["started", "would-surge", "completed", "reverted", "abandoned", "failed"]
STARTED, COMPLETED, REVERTED, WOULD = (
    "SurgeStarted",
    "SurgeCompleted",
    "SurgeReverted",
    "WouldSurge",
)
"""Event reasons on the moved pod."""
_log = logging.getLogger(__name__)


class StateSaver(Protocol):
    def save(self, state: PlannerState) -> None: ...


@dataclass
class Surges:
    client: SurgeClient
    store: StateSaver
    settings: Surge
    process: str
    """This process's identity: a surge recorded by another one is inherited."""
    clock: Callable[[], float]
    count: Callable[[SurgeResult], None]
    may_act: Callable[[], bool]
    finishing: bool = True
    """False once the policy no longer surges (another mode or method): a surge under way is
    then undone rather than finished."""
    _saved: PlannerState | None = field(default=None, init=False)
    """The state last saved while a surge starts: what a failure part way leaves."""

    def _save(self, state: PlannerState) -> PlannerState:
        self.store.save(state)
        self._saved = state
        return state

    def start(self, moves: list[Move], state: PlannerState) -> tuple[PlannerState, list[Outcome]]:
        outcomes = []
        for move in moves:
            if not self.may_act():
                break
            self._saved = None
            try:
                state, outcome = self._start(move, state)
            except (SurgeError, SourceUnavailableError) as error:
                # What was saved last stays, record and all: the next cycle reads the cluster
                # and finishes or undoes what this one began.
                state = self._saved or state
                _log.warning("surge of %s: %s", move.pod, error)
                self.count("failed")
                outcome = Outcome(move, "failed", str(error))
            outcomes.append(outcome)
        return state, outcomes

    def _start(self, move: Move, state: PlannerState) -> tuple[PlannerState, Outcome]:
        assert move.workload is not None
        if any(record.workload == move.workload for record in state.surges):
            return state, Outcome(move, "cancelled", "a surge of its Deployment is under way")
        now = self.clock()
        try:
            prepared = self.client.prepare(move, move.workload.rsplit("/", 1)[-1])
        except NotMadeError as error:
            self.count("failed")
            return state, Outcome(move, "cancelled", str(error))
        record = surge_record(
            move,
            prepared.replicas,
            prepared.pods_before,
            now=now,
            timeout=self.settings.ready_timeout_seconds,
            leader=self.process,
            previous_cost=prepared.previous_cost,
        )
        why = f"{move.strategy}: {move.reason}; target {_domain(record)}"
        if self.client.dry_run:
            self.client.scale_up(record, now)
            self.client.event(record, WOULD, f"would scale up by one, then remove it ({why})")
            self.count("would-surge")
            return state, Outcome(move, "would-surge")
        state = self._save(state.with_surge(record))  # recorded before anything is changed
        try:
            self.client.scale_up(record, now)
        except NotMadeError as error:
            state = self._undo(record, state, "abandon", str(error))
            return state, Outcome(move, "failed", str(error))
        # Any other failure leaves the record at `started`: whether the scale was made is not
        # known, and the next cycle reads it and undoes what was made.
        state = self._save(state.with_surge(record.at("scaled-up")))
        self.client.event(
            record,
            STARTED,
            f"scaled {record.workload} up to {record.replicas + 1}; this pod is removed once "
            f"the new one is Ready in the target ({why})",
        )
        self.count("started")
        return state, Outcome(move, "surged")

    def advance(self, state: PlannerState) -> PlannerState:
        """Each surge under way one step further; one that cannot be observed or changed now
        waits for the next cycle."""
        for record in list(state.surges):
            if not self.may_act():
                break
            try:
                state = self._advance(record, state)
            except (SurgeError, SourceUnavailableError) as error:
                _log.warning("surge of %s: %s; tried again next cycle", record.pod, error)
        return state

    def _advance(self, record: SurgeRecord, state: PlannerState) -> PlannerState:
        now = self.clock()
        seen = self.client.observe(record)
        step, why = next_step(record, seen, now, inherited=record.leader != self.process)
        if step == "switch" and not self.finishing:
            step, why = "revert", "the policy no longer moves Deployments by surge"
        if step == "switch" and now > record.deadline + SCALED_DOWN_GRACE_SECONDS:
            step, why = "revert", "not finished in time"  # a call that kept failing
        if step == "wait":
            return state
        if step == "switch":
            self.client.mark_old_pod(record)
            try:
                self.client.scale_back(record)
            except NotMadeError as error:  # the scale is someone else's now
                return self._undo(record, state, "abandon", str(error))
            step = "scaled-back"
        if step == "scaled-back":
            state = state.with_surge(record.at("scaled-down"))
            self.store.save(state)
            return state
        if step == "done":
            if now <= record.deadline:  # had the webhook missed the new pod; after, it expired
                self.client.withdraw_hint(record, now)
            state = state.surge_ended(record, landed=True, now=now)
            self.store.save(state)
            self.client.event(record, COMPLETED, f"{why} ({_domain(record)})")
            self.count("completed")
            return state
        return self._undo(record, state, step, why)

    def _undo(
        self,
        record: SurgeRecord,
        state: PlannerState,
        step: Literal["revert", "abandon"],
        why: str,
    ) -> PlannerState:
        """Back to where the surge began: the old pod's own deletion cost back first, then (for
        `revert`) the scale back, then the hint withdrawn; the workload backs off. A call that
        fails leaves the record for the next cycle, except a scale that is someone else's now,
        which is left alone. Long past its deadline, the old pod's cost no longer holds up the
        scale back (the scale is what must not stay), and the hint, expired, is left."""
        now = self.clock()
        overdue = now > record.deadline + SCALED_DOWN_GRACE_SECONDS
        with contextlib.suppress(NotMadeError):  # the old pod is gone: nothing to put back
            self._best_effort(overdue, lambda: self.client.unmark_old_pod(record))
        if step == "revert":
            try:
                self.client.scale_back(record)
            except NotMadeError as error:
                step, why = "abandon", f"{why}; {error}"
        if now <= record.deadline:  # after it, the hint has expired anyway
            self.client.withdraw_hint(record, now)
        state = state.surge_ended(record, landed=False, now=now)
        self.store.save(state)
        self.client.event(record, REVERTED, f"undone: {why}", warning=True)
        self.count("reverted" if step == "revert" else "abandoned")
        return state

    @staticmethod
    def _best_effort(overdue: bool, call: Callable[[], None]) -> None:
        try:
            call()
        except NotMadeError:
            raise
        except SurgeError as error:
            if not overdue:
                raise
            _log.warning("undoing an overdue surge regardless: %s", error)


def _domain(record: SurgeRecord) -> str:
    return ", ".join(f"{level}={value}" for level, value in record.destination.items())
