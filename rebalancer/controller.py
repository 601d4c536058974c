"""`rebalancer run`: the engine every interval, acting as the policy's mode says, never harming.

One cycle reads the policy, the cluster and the traffic, plans, and hands the moves to the
executor. Anything in doubt (a source down, stale data, unreadable state, an unknown mode) ends the
cycle without a single eviction, with the reason in the log, the metrics and the cycle result.
APScheduler runs the cycles: never two at once, and an overrun is counted, not queued.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, get_args

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from kubernetes import client

from rebalancer.engine import CycleResult, collector_paused, plan_cycle
from rebalancer.errors import InputError, SourceUnavailableError
from rebalancer.executor import EventRecorder, EvictionExecutor, Outcome, Steering
from rebalancer.hints import HintStore
from rebalancer.landing import Landing, expected_landing, judge
from rebalancer.metrics import ControllerMetrics
from rebalancer.planner import PlannerState
from rebalancer.policy import Mode, Policy
from rebalancer.snapshot import Snapshot
from rebalancer.sources import ReloadResult
from rebalancer.traffic import PrometheusReader, build_queries, read_traffic

_log = logging.getLogger(__name__)


class PolicySource(Protocol):
    generation: int
    """How many policies have been accepted since start."""

    def current(self) -> tuple[Policy, ReloadResult]: ...


class StateStore(Protocol):
    def load(self) -> PlannerState: ...

    def save(self, state: PlannerState) -> None: ...


@dataclass(frozen=True)
class CycleReport:
    result: CycleResult
    detail: str = ""
    outcomes: tuple[Outcome, ...] = ()


@dataclass
class Controller:
    api: client.ApiClient
    snapshots: Callable[[], Snapshot]
    """Where each cycle's picture of the cluster comes from: a watch cache, or a fresh LIST."""
    prometheus_url: str
    policies: PolicySource
    state: StateStore
    metrics: ControllerMetrics
    recorder: EventRecorder
    hints: HintStore | None = None
    """Where migrate mode records placement hints for the webhook; None: migrate cannot run."""
    clock: Callable[[], float] = time.time
    last_report: CycleReport | None = field(default=None, init=False)
    scheduled: bool = field(default=False, init=False)
    leading: threading.Event = field(default_factory=threading.Event, init=False)
    """Set while this replica may act; cleared the moment it must stop, even mid-cycle."""
    interval_seconds: float = field(default=Policy().interval_seconds, init=False)
    """The interval of the policy the last cycle read, for the scheduler to follow."""

    def run_cycle(self) -> CycleReport:
        started = time.monotonic()
        try:
            report = self._cycle()
        except (SourceUnavailableError, InputError) as error:
            report = CycleReport("error", str(error))
        self.metrics.cycle_duration.observe(time.monotonic() - started)
        self.metrics.cycles.labels(report.result).inc()
        if report.result == "ok":
            self.metrics.last_success.set(self.clock())
            _log.info("cycle ok: %d moves acted on", len(report.outcomes))
        else:
            _log.warning("cycle %s: no evictions: %s", report.result, report.detail)
        self.last_report = report
        return report

    def _may_act(self) -> bool:
        """A bare run_cycle (rebalancer run --once) acts; under the scheduler only a leader does."""
        return self.leading.is_set() or not self.scheduled

    def _cycle(self) -> CycleReport:
        policy, reload = self.policies.current()
        if reload != "unchanged":
            self.metrics.policy_reloads.labels(reload).inc()
        self.metrics.policy_generation.set(self.policies.generation)
        self.interval_seconds = policy.interval_seconds
        self.metrics.interval.set(policy.interval_seconds)
        for mode in get_args(Mode):
            self.metrics.mode.labels(mode).set(1 if mode == policy.mode else 0)
        if policy.mode == "migrate" and self.hints is None:
            return CycleReport("error", "migrate mode needs the webhook (--webhook-port)")
        with collector_paused():  # reading and planning; evicting allocates little
            snapshot = self.snapshots()
            queries = build_queries(policy.traffic)
            reader = PrometheusReader(self.prometheus_url, policy.traffic.timeout_seconds)
            answer, freshness = reader.read(queries)
            traffic = read_traffic(
                answer, freshness, queries, snapshot, policy.traffic.max_age_seconds
            )
            now = self.clock()
            state = self._judge_landings(self.state.load(), snapshot, now)
            outcome = plan_cycle(policy, snapshot, traffic, state, now=now)
        if outcome.failure is not None:
            self.metrics.traffic_failures.labels(outcome.failure.reason).inc()
            self.state.save(outcome.state)
            result: CycleResult = (
                "skipped-stale" if outcome.failure.reason == "stale" else "skipped-no-data"
            )
            if outcome.failure.reason == "bad-query":
                result = "error"
            return CycleReport(result, f"{outcome.failure.reason}: {outcome.failure.detail}")
        assert outcome.plan is not None
        self.metrics.observe_plan(outcome.plan, policy.price.currency)
        steering = None
        if policy.mode == "migrate" and self.hints is not None:
            steering = Steering(self.hints, policy.migrate, self.clock)
            self._withdraw_orphaned_hints(self.hints, state, now)
        dry_run = policy.mode == "dry-run"
        if not dry_run and outcome.plan.moves:
            # Cooldowns first: if the process dies mid-cycle, a restart must still see every
            # workload it may have moved as recently moved. A cooldown too many is harmless.
            self.state.save(
                outcome.state.record_moves(
                    outcome.plan.moves, now, policy.cooldown.per_workload_seconds
                )
            )
        executor = EvictionExecutor(self.api, self.recorder, dry_run=dry_run, steering=steering)
        outcomes = executor.execute(outcome.plan.moves, still_allowed=self._may_act)
        for done in outcomes:
            self.metrics.evictions.labels(done.result, done.move.strategy).inc()
            _log.info(
                "%s %s -> %s (%s)",
                done.result,
                done.move.pod,
                done.move.destination,
                done.detail or done.move.reason,
            )
        evicted = [done.move for done in outcomes if done.result == "evicted"]
        state = outcome.state.record_moves(evicted, now, policy.cooldown.per_workload_seconds)
        expected = (self._expected(done, policy, now) for done in outcomes)
        state = state.awaiting(landing for landing in expected if landing is not None)
        self.state.save(state)
        return CycleReport("ok", outcomes=tuple(outcomes))

    @staticmethod
    def _expected(done: Outcome, policy: Policy, now: float) -> Landing | None:
        """The landing to judge an eviction by. Evict mode is judged too, without steering, so a
        workload whose replacements the scheduler keeps putting elsewhere backs off there too."""
        if done.result != "evicted":
            return None
        hint = done.hint or expected_landing(
            done.move,
            required=False,
            weight=policy.migrate.weight,
            expires=now + policy.migrate.hint_ttl_seconds,
        )
        return (
            None if hint is None else Landing(hint=hint, evicted_pod=done.move.pod, evicted_at=now)
        )

    def _judge_landings(self, state: PlannerState, snapshot: Snapshot, now: float) -> PlannerState:
        judged, pending = judge(state.landings, snapshot, now)
        for item in judged:
            self.metrics.landings.labels(item.result).inc()
            _log.info(
                "%s: replacement %s of %s (target %s)",
                item.result,
                item.pod or "-",
                item.landing.evicted_pod,
                item.landing.hint.domain,
            )
            if item.result == "not-scheduled" and item.landing.hint.required and item.pod:
                self._release(item.pod)
        return state.with_landings(judged, pending)

    @staticmethod
    def _withdraw_orphaned_hints(hints: HintStore, state: PlannerState, now: float) -> None:
        """A hint is recorded before its eviction and its landing after it, so a controller
        killed in between leaves a hint that no eviction made a replacement for. Left alone it
        would steer whichever pod that controller creates next (a scale-up, say), so the first
        migrate cycle after takes it back."""
        awaited = [landing.hint for landing in state.landings]
        withdrawn = hints.withdraw_unless(lambda hint: hint in awaited, now)
        for hint in withdrawn:
            _log.warning(
                "withdrew a hint for %s/%s %s: its eviction was never recorded",
                hint.namespace,
                hint.owner_kind,
                hint.owner_name,
            )

    def _release(self, pod_key: str) -> None:
        """Evict a replacement left Pending by a required hint; its controller makes a new one,
        with no hint left to bind it. The API server lets a Pending pod be evicted whatever its
        PDB says (it serves nothing), so the controller needs no right to delete pods."""
        namespace, name = pod_key.split("/", 1)
        core = client.CoreV1Api(self.api)
        try:
            pod = core.read_namespaced_pod(name, namespace)
            if pod.spec is not None and pod.spec.node_name:
                return  # it was bound in the meantime: leave it
            eviction = client.V1Eviction(
                metadata=client.V1ObjectMeta(name=name, namespace=namespace)
            )
            core.create_namespaced_pod_eviction(name, namespace, eviction)
            _log.warning("evicted %s, Pending past its required hint's expiry", pod_key)
        except client.ApiException as error:
            if error.status != 404:
                _log.warning("could not release %s: HTTP %s", pod_key, error.status)

    def ready(self) -> bool:
        """A standby replica is ready; a leader once a cycle has ended without error."""
        if not self.leading.is_set():
            return True
        return self.last_report is not None and self.last_report.result != "error"

    def run_until(self, stop: threading.Event) -> None:
        """Cycle every policy interval until `stop` is set; the running cycle may finish."""
        scheduler = BackgroundScheduler()
        self.scheduled = True

        def cycle() -> None:
            self.run_cycle()
            if self.interval_seconds != job.trigger.interval.total_seconds():
                job.reschedule(IntervalTrigger(seconds=self.interval_seconds))
                _log.info("interval changed to %gs", self.interval_seconds)

        try:
            self.interval_seconds = self.policies.current()[0].interval_seconds
        except SourceUnavailableError as error:
            _log.warning("policy not readable yet (%s): first interval is the default", error)
        job = scheduler.add_job(
            cycle,
            IntervalTrigger(seconds=self.interval_seconds),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=datetime.datetime.now(datetime.UTC),
        )

        def overran(event: JobExecutionEvent) -> None:
            self.metrics.overruns.inc()
            _log.warning("cycle overran its interval; the next start is skipped")

        def crashed(event: JobExecutionEvent) -> None:
            _log.error("cycle crashed: %r", event.exception)

        scheduler.add_listener(overran, EVENT_JOB_MAX_INSTANCES)
        scheduler.add_listener(crashed, EVENT_JOB_ERROR)
        self.leading.set()
        self.metrics.leader.set(1)
        scheduler.start()
        try:
            stop.wait()
        finally:
            self.leading.clear()  # evictions still queued in this cycle are not sent
            self.metrics.leader.set(0)
            scheduler.shutdown(wait=True)
            _log.info("stopped acting")
