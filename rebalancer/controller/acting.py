"""What a cycle does to the pods: a replacement stuck Pending released, the plan's moves
evicted and surged with the state saved around them, and the surges under way advanced.

Apart from the loop (controller/loop.py), which holds the order of a cycle's stages, the
scheduling and what the controller remembers between cycles.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from rebalancer.clients.events import EventRecorder
from rebalancer.clients.eviction import EvictionExecutor, Outcome, Steering
from rebalancer.clients.hints import HintStore
from rebalancer.clients.kube_api import ApiClient
from rebalancer.clients.surge import SurgeClient
from rebalancer.cluster.model import Snapshot
from rebalancer.config.policy import Policy
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.controller.surges import StateSaver, Surges
from rebalancer.planning.cycle import Acted, CycleOutcome, judge_landings, remember
from rebalancer.planning.state import PlannerState

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Actor:
    """The controller's clients, state store, metrics and clock, as it holds them when a cycle
    acts."""

    api: ApiClient
    recorder: EventRecorder
    hints: HintStore | None
    store: StateSaver
    metrics: ControllerMetrics
    clock: Callable[[], float]
    process: str
    """The controller's `process`, in the surges it records."""
    may_act: Callable[[], bool]
    """Whether this replica may act now (`Controller._may_act`)."""

    def act(
        self, outcome: CycleOutcome, state: PlannerState, policy: Policy, now: float
    ) -> list[Outcome]:
        """The plan's moves: evictions first, then surges; the state after them saved."""
        assert outcome.plan is not None
        steering = None
        if policy.mode == "migrate" and self.hints is not None:
            steering = Steering(self.hints, policy.migrate, self.clock)
            self._withdraw_orphaned_hints(self.hints, state, now)
        dry_run = policy.mode == "dry-run"
        if not dry_run and outcome.plan.moves:
            # Cooldowns first: if the process dies mid-cycle, a restart must still see every
            # workload it may have moved as recently moved. A cooldown too many is harmless.
            self.store.save(outcome.state.record_moves(outcome.plan.moves, now, policy.cooldown))
        evictions = tuple(move for move in outcome.plan.moves if move.method == "evict")
        surged = [move for move in outcome.plan.moves if move.method == "surge"]
        executor = EvictionExecutor(self.api, self.recorder, dry_run=dry_run, steering=steering)
        outcomes = executor.execute(evictions, still_allowed=self.may_act)
        # Each surge's steps are saved as they are made, on a state that keeps every move's
        # cooldown as the first save did (a dry run saves none).
        started = outcome.state
        if not dry_run:
            started = started.record_moves(outcome.plan.moves, now, policy.cooldown)
        started, surge_outcomes = self._surges(policy, dry_run=dry_run).start(surged, started)
        outcomes += surge_outcomes
        for done in outcomes:
            self.metrics.evictions.labels(done.result, done.move.strategy).inc()
            _log.info(
                "%s %s -> %s (%s)",
                done.result,
                done.move.pod,
                " ".join(f"{level}={value}" for level, value in done.move.destination.items()),
                done.detail or done.move.reason,
                extra={
                    "fields": {
                        "result": done.result,
                        "pod": done.move.pod,
                        "target": done.move.destination,
                        "strategy": done.move.strategy,
                    }
                },
            )
        acted = [Acted(done.move, done.hint) for done in outcomes if done.result == "evicted"]
        surges = [done.move for done in outcomes if done.result == "surged"]
        after = remember(outcome.state, acted, policy, now).record_moves(
            surges, now, policy.cooldown
        )
        # The surges as they stand once started, and the misses and back-off of those that
        # could not start.
        backed_off = {m.workload for m in surged if m.workload in started.last_moved}
        last_moved = {**after.last_moved, **{w: started.last_moved[w] for w in backed_off}}
        update = {"surges": started.surges, "misses": started.misses, "last_moved": last_moved}
        self.store.save(after.model_copy(update=update))
        return outcomes

    def advance_surges(self, policy: Policy, state: PlannerState) -> PlannerState:
        if not state.surges or not self.may_act():
            return state
        # Surges are real whatever the mode is now: a dry run must still finish or undo them.
        return self._surges(policy, dry_run=False).advance(state)

    def _surges(self, policy: Policy, *, dry_run: bool) -> Surges:
        client = SurgeClient(self.api, self.recorder, self.hints, dry_run=dry_run)
        return Surges(
            client,
            self.store,
            policy.migrate.surge,
            self.process,
            self.clock,
            lambda result: self.metrics.surges.labels(result).inc(),
            self.may_act,
            finishing=policy.mode == "migrate" and policy.migrate.method == "surge",
        )

    def judge_landings(
        self, state: PlannerState, snapshot: Snapshot, now: float, policy: Policy
    ) -> PlannerState:
        state, judged = judge_landings(state, snapshot, now)
        for item in judged:
            self.metrics.landings.labels(item.result).inc()
            _log.info(
                "%s: replacement %s of %s",
                item.result,
                item.pod or "-",
                item.landing.evicted_pod,
                extra={
                    "fields": {
                        "result": item.result,
                        "pod": item.pod,
                        "evicted": item.landing.evicted_pod,
                        "target": item.landing.hint.domain,
                    }
                },
            )
            stuck = item.result == "not-scheduled" and item.landing.hint.required and item.pod
            if stuck and self.may_act():
                pending = snapshot.pods.get(item.pod)
                executor = EvictionExecutor(self.api, self.recorder, policy.mode == "dry-run")
                released = executor.release(item.pod, pending.uid if pending else "")
                if released is not None:
                    _log.warning(
                        "%s, Pending past its required hint's expiry: %s", item.pod, released
                    )
        return state

    @staticmethod
    def _withdraw_orphaned_hints(hints: HintStore, state: PlannerState, now: float) -> None:
        """A hint is recorded before its eviction and its landing after it, so a controller
        killed in between leaves a hint that no eviction made a replacement for. Left alone it
        would steer whichever pod that controller creates next (a scale-up, say), so the first
        migrate cycle after takes it back."""
        awaited = [landing.hint for landing in state.landings]
        surging = {record.hint_owner for record in state.surges}
        withdrawn = hints.withdraw_unless(
            lambda hint: hint in awaited or hint.owner in surging, now
        )
        for hint in withdrawn:
            _log.warning(
                "withdrew a hint for %s/%s %s: its eviction was never recorded",
                hint.namespace,
                hint.owner_kind,
                hint.owner_name,
            )
