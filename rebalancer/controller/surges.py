"""Surge migrations, step by step, with each step recorded in the state before it is made.

`start` begins the surges a cycle planned; `advance`, at the start of every cycle, takes each
surge under way one step further (see rebalancer/planning/surge.py for the steps). The state is
saved before every change to the cluster, so a controller killed between any two calls leaves a
record from which the next leader finishes the surge or undoes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from rebalancer.clients.eviction import Outcome
from rebalancer.clients.surge import SurgeClient, SurgeError
from rebalancer.config.sections import Surge
from rebalancer.planning.state import PlannerState
from rebalancer.planning.surge import SurgeRecord, next_step, surge_record
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

    def start(self, moves: list[Move], state: PlannerState) -> tuple[PlannerState, list[Outcome]]:
        outcomes = []
        for move in moves:
            if not self.may_act():
                break
            state, outcome = self._start(move, state)
            outcomes.append(outcome)
        return state, outcomes

    def _start(self, move: Move, state: PlannerState) -> tuple[PlannerState, Outcome]:
        assert move.workload is not None
        deployment = move.workload.rsplit("/", 1)[-1]
        now = self.clock()
        try:
            prepared = self.client.prepare(move, deployment)
        except SurgeError as error:
            self.count("failed")
            return state, Outcome(move, "failed", str(error))
        record = surge_record(
            move,
            prepared.replicas,
            prepared.pods_before,
            now=now,
            timeout=self.settings.ready_timeout_seconds,
            leader=self.process,
        )
        why = f"{move.strategy}: {move.reason}; target {_domain(record)}"
        if self.client.dry_run:
            try:
                self.client.scale_up(record, now)
            except SurgeError as error:
                self.count("failed")
                return state, Outcome(move, "failed", str(error))
            self.client.event(record, WOULD, f"would scale up by one, then remove it ({why})")
            self.count("would-surge")
            return state, Outcome(move, "would-surge")
        state = state.with_surge(record)
        self.store.save(state)  # recorded before anything is changed
        try:
            self.client.scale_up(record, now)
        except SurgeError as error:
            # A patch whose answer was lost may have been made all the same.
            try:
                made = self.client.replicas(record.namespace, record.deployment)
            except SurgeError:
                made = None
            step: Literal["revert", "abandon"] = (
                "revert" if made == record.replicas + 1 else "abandon"
            )
            state = self._undo(record, state, step, str(error))
            return state, Outcome(move, "failed", str(error))
        state = state.with_surge(record.at("scaled-up"))
        self.store.save(state)
        self.client.event(
            record,
            STARTED,
            f"scaled {record.workload} up to {record.replicas + 1}; this pod is removed once "
            f"the new one is Ready in the target ({why})",
        )
        self.count("started")
        return state, Outcome(move, "surged")

    def advance(self, state: PlannerState) -> PlannerState:
        """Each surge under way one step further; one that cannot be observed waits."""
        for record in list(state.surges):
            if not self.may_act():
                break
            try:
                state = self._advance(record, state)
            except SurgeError as error:
                _log.warning("surge of %s: %s; tried again next cycle", record.pod, error)
        return state

    def _advance(self, record: SurgeRecord, state: PlannerState) -> PlannerState:
        now = self.clock()
        seen = self.client.observe(record)
        step, why = next_step(record, seen, now, inherited=record.leader != self.process)
        if step == "wait":
            return state
        if step == "switch":
            self.client.mark_old_pod(record)
            try:
                self.client.scale_back(record)
            except SurgeError as error:
                return self._undo(record, state, "abandon", str(error))
            step = "scaled-back"
        if step == "scaled-back":
            state = state.with_surge(record.at("scaled-down"))
            self.store.save(state)
            return state
        if step == "done":
            self.client.withdraw_hint(record, now)  # had the webhook missed the new pod
            state = state.surge_ended(record, landed=True)
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
        """Back to where the surge began: scaled back if this surge scaled up (`revert`), the
        old pod's deletion cost and the hint taken away; the workload backs off."""
        now = self.clock()
        if step == "revert":
            try:
                self.client.scale_back(record)
            except SurgeError as error:
                why = f"{why}; not scaled back: {error}"
        self.client.unmark_old_pod(record)
        self.client.withdraw_hint(record, now)
        state = state.surge_ended(record, landed=False)
        self.store.save(state)
        self.client.event(record, REVERTED, f"undone: {why}", warning=True)
        self.count("reverted" if step == "revert" else "abandoned")
        return state


def _domain(record: SurgeRecord) -> str:
    return ", ".join(f"{level}={value}" for level, value in record.destination.items())
