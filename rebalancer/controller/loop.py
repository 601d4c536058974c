"""`rebalancer run`: one cycle every interval, acting as the policy's mode says, never harming.

One cycle reads the policy, the cluster and the traffic, judges where earlier replacements
landed, plans (`planning/cycle.py`) and hands the moves to the one eviction path
(`clients/eviction.py`). Anything in doubt (a source down, stale data, unreadable state, an
unknown mode) ends the cycle without a single eviction, with the reason in the log, the metrics
and the cycle result.
APScheduler runs the cycles: never two at once, and an overrun is counted, not queued.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, get_args

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, JobExecutionEvent
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from rebalancer.clients.events import EventRecorder
from rebalancer.clients.eviction import Outcome
from rebalancer.clients.hints import HintStore
from rebalancer.clients.inputs import TrafficInput
from rebalancer.clients.kube_api import ApiClient
from rebalancer.clients.prometheus import PrometheusAccess, PrometheusReader
from rebalancer.clients.routing import RoutingClient
from rebalancer.clients.stores import ReloadResult
from rebalancer.cluster.model import Snapshot
from rebalancer.config.policy import Mode, Policy
from rebalancer.controller.acting import Actor
from rebalancer.controller.metrics import ControllerMetrics
from rebalancer.cost.routing import RoutingAdvice
from rebalancer.errors import InputError, SourceUnavailableError, one_line
from rebalancer.planning.cycle import CycleResult, collector_paused, plan_cycle
from rebalancer.planning.owned_gangs import OwnedGang
from rebalancer.planning.report import stray_warnings
from rebalancer.planning.routing import RoutingMemory, routing_actions
from rebalancer.planning.state import PlannerState
from rebalancer.traffic.model import TrafficFailure
from rebalancer.waiting import wait_set

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
    api: ApiClient
    snapshots: Callable[[], Snapshot]
    """Where each cycle's picture of the cluster comes from: a watch cache, or a fresh LIST."""
    prometheus_url: str
    policies: PolicySource
    state: StateStore
    metrics: ControllerMetrics
    recorder: EventRecorder
    hints: HintStore | None = None
    """Where migrate mode records placement hints for the webhook; None: migrate cannot run."""
    prometheus_access: PrometheusAccess = field(default_factory=PrometheusAccess)
    """Credentials, TLS and headers for a secured Prometheus."""
    clock: Callable[[], float] = time.time
    last_report: CycleReport | None = field(default=None, init=False)
    scheduled: bool = field(default=False, init=False)
    leading: threading.Event = field(default_factory=threading.Event, init=False)
    """Set while this replica may act; cleared the moment it must stop, even mid-cycle."""
    interval_seconds: float = field(default=Policy().interval_seconds, init=False)
    """The interval of the policy the last cycle read, for the scheduler to follow."""
    unready_after: int = 1
    """Cycles in a row ending in `error` after which a leader reports unready."""
    errors_in_a_row: int = field(default=0, init=False)
    routing_memory: RoutingMemory = field(default_factory=RoutingMemory, init=False)
    """The routing Events said and changes made, so neither is repeated every cycle."""
    process: str = field(default_factory=lambda: uuid.uuid4().hex, init=False)
    """This process, in the surges it records: a surge another process recorded is inherited."""
    owned_gangs_seen: dict[str, tuple[int, int]] = field(default_factory=dict, init=False)
    """Each owned gang last reported spread, with its spread, so it is logged once."""

    def run_cycle(self) -> CycleReport:
        started = time.monotonic()
        try:
            report = self._cycle()
        except (SourceUnavailableError, InputError) as error:
            report = CycleReport("error", str(error))
            _log.warning("cycle error: no evictions: %s", report.detail)
        except Exception as error:  # a cycle ends in a result, whatever went wrong in it
            detail = f"unexpected {type(error).__name__}: {one_line(error, 300)}"
            report = CycleReport("error", detail)
            _log.error("cycle error: %s", report.detail)
        else:
            if report.result == "ok":
                _log.info(
                    "cycle ok: %d moves acted on",
                    len(report.outcomes),
                    extra={"fields": {"result": "ok", "moves": len(report.outcomes)}},
                )
            else:
                _log.warning("cycle %s: no evictions: %s", report.result, report.detail)
        self.metrics.cycle_duration.observe(time.monotonic() - started)
        self.metrics.cycles.labels(report.result).inc()
        if report.result == "ok":
            self.metrics.last_success.set(self.clock())
        self.errors_in_a_row = self.errors_in_a_row + 1 if report.result == "error" else 0
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
        # First, whatever else fails this cycle: a surge must not be left scaled up.
        state = self._actor().advance_surges(policy, self.state.load())
        if policy.mode == "migrate" and self.hints is None:
            return CycleReport("error", "migrate mode needs the webhook (--webhook-port)")
        with collector_paused():  # reading and planning; evicting allocates little
            snapshot = self.snapshots()
            reader = PrometheusReader(
                self.prometheus_url, policy.traffic.timeout_seconds, self.prometheus_access
            )
            traffic = TrafficInput(policy.traffic, reader).read(snapshot)
            now = self.clock()
            if not isinstance(traffic, TrafficFailure):
                # A skipped cycle acts on nothing, releases included: the landings wait for
                # the next cycle that may act.
                state = self._actor().judge_landings(state, snapshot, now, policy)
            outcome = plan_cycle(policy, snapshot, traffic, state, now=now)
        for line in stray_warnings(outcome.stray_pods):
            _log.warning(line.removeprefix("warning: "))
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
        self.metrics.observe_plan(
            outcome.plan, outcome.today or outcome.plan.before, policy.price.currency
        )
        self._report_owned_gangs(outcome.owned_gangs)
        outcomes = self._actor().act(outcome, state, policy, now)
        self._route(outcome.routing, snapshot, policy, now)
        return CycleReport("ok", outcomes=tuple(outcomes))

    def settle_surges(self, timeout: float, poll_seconds: float) -> int:
        """Take the surges under way step by step, between cycles and planning nothing more,
        until none remain or `timeout` has passed; how many remain. For `run --once`, which
        must not leave a Deployment scaled up, and for a benchmark that waits on them."""
        policy, _reload = self.policies.current()
        deadline = time.monotonic() + timeout
        while True:
            left = len(self._actor().advance_surges(policy, self.state.load()).surges)
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(poll_seconds)

    def _actor(self) -> Actor:
        """What the cycle acts with, as the controller holds it now."""
        return Actor(
            self.api,
            self.recorder,
            self.hints,
            self.state,
            self.metrics,
            self.clock,
            self.process,
            self._may_act,
        )

    def _report_owned_gangs(self, gangs: tuple[OwnedGang, ...]) -> None:
        """The metric every cycle; a log line for a gang when it is first seen spread, not each
        cycle it stays so."""
        self.metrics.observe_owned_gangs(gangs)
        seen = {gang.gang: (gang.spans, gang.fits_in) for gang in gangs}
        for gang in gangs:
            if self.owned_gangs_seen.get(gang.gang) != seen[gang.gang]:
                _log.info(
                    "%s gang %s spans %d %ss but fits in %d; not moved: %s",
                    gang.owner,
                    gang.gang,
                    gang.spans,
                    gang.level,
                    gang.fits_in,
                    gang.fix,
                    extra={"fields": {"owner": gang.owner, "gang": gang.gang}},
                )
        self.owned_gangs_seen = seen

    def _route(
        self, advice: tuple[RoutingAdvice, ...], snapshot: Snapshot, policy: Policy, now: float
    ) -> None:
        """After the evictions, which the plan's freshness matters more to: the routing Events
        due and the routing changes the policy and each Service's annotation allow. A failure
        here is logged, and leaves the cycle's result alone: its evictions are done."""
        self.metrics.observe_routing(advice, policy.price.currency)
        routing = RoutingClient(self.api, self.recorder, dry_run=policy.mode == "dry-run")
        memory = self.routing_memory
        try:
            actions = routing_actions(advice, snapshot, policy, now, memory)
            memory = actions.memory
            for announcement in actions.announcements:
                if self._may_act():
                    routing.announce(announcement)
            for change in actions.changes:
                if not self._may_act():
                    break
                done = routing.change(change)
                if done.result == "set":
                    memory = memory.made(change)
                elif done.result != "conflict":
                    memory = memory.tried(change, now)
                self.metrics.routing_changes.labels(done.result).inc()
                _log.info(
                    "routing %s: %s %s%s",
                    done.result,
                    change.service,
                    done.distribution or change.distribution,
                    f" ({done.detail})" if done.detail else "",
                    extra={"fields": {"result": done.result, "service": change.service}},
                )
        except Exception as error:  # the evictions are done: say it, and go on
            _log.error("routing: unexpected %s: %s", type(error).__name__, one_line(error, 300))
        self.routing_memory = memory

    def ready(self) -> bool:
        """A standby replica is ready; a leader once a cycle has ended, until `unready_after`
        cycles in a row have ended in error."""
        if not self.leading.is_set():
            return True
        return self.last_report is not None and self.errors_in_a_row < self.unready_after

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
            wait_set(stop)  # in the main thread when not electing: its SIGTERM handler sets it
        finally:
            self.leading.clear()  # evictions still queued in this cycle are not sent
            self.metrics.leader.set(0)
            scheduler.shutdown(wait=True)
            _log.info("stopped acting")
