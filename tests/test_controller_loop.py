"""The loop: cycles never overlap, an overrun is counted, and stopping lets the cycle finish."""

from __future__ import annotations

import gc
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import ClassVar

import pytest
from prometheus_client import CollectorRegistry

from rebalancer.clients.routing import Changed
from rebalancer.clients.stores import FixedPolicy
from rebalancer.cluster.model import Service, Snapshot
from rebalancer.config.policy import Policy
from rebalancer.controller import loop
from rebalancer.controller.loop import Controller, CycleReport
from rebalancer.controller.metrics import ControllerMetrics, serve
from rebalancer.cost.routing import ROUTING_ANNOTATION, RoutingAdvice
from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.cycle import collector_paused
from rebalancer.planning.routing import Announcement, RoutingChange
from rebalancer.planning.state import PlannerState


class SlowController(Controller):
    """Each cycle takes longer than the interval, and records how many ran at once."""

    running = 0
    most_at_once = 0
    finished = 0

    def run_cycle(self) -> CycleReport:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(0.5)
        self.running -= 1
        self.finished += 1
        return CycleReport("ok")


def test_slow_cycles_never_overlap_and_overruns_are_counted() -> None:
    metrics = ControllerMetrics(CollectorRegistry())
    controller = SlowController(
        api=None,  # type: ignore[arg-type]  # run_cycle is replaced; nothing calls the API
        snapshots=Snapshot,
        prometheus_url="http://127.0.0.1:1",
        # Below what a policy may say (a second), to overrun fast: the loop takes it as given.
        policies=FixedPolicy(Policy().model_copy(update={"interval_seconds": 0.2})),
        state=None,  # type: ignore[arg-type]
        metrics=metrics,
        recorder=None,  # type: ignore[arg-type]
    )
    stop = threading.Event()
    loop = threading.Thread(target=controller.run_until, args=(stop,))
    loop.start()
    time.sleep(1.6)
    stop.set()
    loop.join(timeout=5)
    assert not loop.is_alive()
    assert controller.most_at_once == 1
    assert controller.finished >= 2
    assert controller.running == 0  # the cycle under way when stop came was allowed to end
    assert metrics.overruns._value.get() >= 1
    assert metrics.leader._value.get() == 0


class EmptyState:
    """A state store with nothing saved, which keeps nothing."""

    def load(self) -> PlannerState:
        return PlannerState()

    def save(self, state: PlannerState) -> None:
        pass


def test_a_cycle_runs_with_the_collector_paused_and_restores_it_when_it_fails() -> None:
    seen: list[bool] = []

    def snapshots() -> Snapshot:
        seen.append(gc.isenabled())
        raise SourceUnavailableError("Kubernetes API: watch cache not synced")

    controller = Controller(
        api=None,  # type: ignore[arg-type]  # the cycle ends at the snapshot
        snapshots=snapshots,
        prometheus_url="http://127.0.0.1:1",
        policies=FixedPolicy(Policy()),
        state=EmptyState(),
        metrics=ControllerMetrics(CollectorRegistry()),
        recorder=None,  # type: ignore[arg-type]
    )
    assert gc.isenabled()
    assert controller.run_cycle().result == "error"
    assert seen == [False]
    assert gc.isenabled()


def test_a_nested_pause_keeps_the_outer_one() -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


class ScriptedController(Controller):
    """Each cycle raises, or returns, the next item of `script`."""

    script: list[CycleReport | Exception]

    def _cycle(self) -> CycleReport:
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step


def scripted(*script: CycleReport | Exception, unready_after: int) -> ScriptedController:
    controller = ScriptedController(
        api=None,  # type: ignore[arg-type]  # _cycle is scripted; nothing calls the API
        snapshots=Snapshot,
        prometheus_url="http://127.0.0.1:1",
        policies=FixedPolicy(Policy()),
        state=None,  # type: ignore[arg-type]
        metrics=ControllerMetrics(CollectorRegistry()),
        recorder=None,  # type: ignore[arg-type]
        unready_after=unready_after,
    )
    controller.script = list(script)
    controller.leading.set()
    return controller


def test_an_unexpected_error_ends_the_cycle_as_error_counted_with_its_kind() -> None:
    controller = scripted(OverflowError("int too large\nto convert"), unready_after=1)
    report = controller.run_cycle()
    assert report.result == "error"
    assert report.detail == "unexpected OverflowError: int too large to convert"
    assert controller.metrics.cycles.labels("error")._value.get() == 1
    assert not controller.ready()


def test_readyz_turns_unready_only_after_errors_in_a_row() -> None:
    ok, error = CycleReport("ok"), SourceUnavailableError("Kubernetes API: HTTP 500")
    controller = scripted(error, ok, error, ValueError("bad"), error, unready_after=3)
    server = serve(CollectorRegistry(), 0, controller.ready, "127.0.0.1")
    url = f"http://127.0.0.1:{server.server_port}/readyz"

    def readyz() -> int:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return refused.code

    try:
        statuses = []
        for _cycle in range(5):
            controller.run_cycle()
            statuses.append(readyz())
    finally:
        server.shutdown()
    assert statuses == [200, 200, 200, 200, 503]


def test_the_metrics_server_lets_a_silent_client_go() -> None:
    server = serve(CollectorRegistry(), 0, lambda: True, "127.0.0.1", read_seconds=0.2)
    try:
        with socket.create_connection(("127.0.0.1", server.server_port)) as silent:
            silent.settimeout(10)
            assert silent.recv(1) == b""  # closed by the server, not by this client's timeout
    finally:
        server.shutdown()


class FakeRouting:
    """Stands in for RoutingClient: each change gets the next result; None raises."""

    results: ClassVar[list[str | None]] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def announce(self, announcement: Announcement) -> None:
        """No Event is due: every Service here opted in."""

    def change(self, change: RoutingChange) -> Changed:
        result = self.results.pop(0)
        if result is None:
            raise OverflowError("a bug")
        return Changed(result)  # type: ignore[arg-type]


def test_routing_remembers_what_it_made_and_what_was_refused_and_survives_a_bug(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(loop, "RoutingClient", FakeRouting)
    services = {
        f"shop/{name}": Service(
            "shop",
            name,
            {"app": name},
            None,
            "Cluster",
            {ROUTING_ANNOTATION: "apply"},
            False,
            (),
            "7",
        )
        for name in ("a", "b", "c")
    }
    advice = tuple(
        RoutingAdvice(key, "Cluster", "PreferSameZone", 100, 60 - i, 0, ())
        for i, key in enumerate(services)
    )
    controller = scripted(unready_after=1)
    policy = Policy.model_validate({"mode": "evict", "routing": {"apply": True}})
    FakeRouting.results = ["set", "refused", None]
    with caplog.at_level(logging.ERROR):
        controller._route(advice, Snapshot(services=services), policy, now=0.0)
    assert "routing: unexpected OverflowError: a bug" in caplog.text
    memory = controller.routing_memory
    assert list(memory.changed) == ["shop/a"]
    assert list(memory.said) == ["shop/b"]
    assert controller.metrics.routing_changes.labels("set")._value.get() == 1
    assert controller.metrics.routing_kept_local._value.get() == 60 + 59 + 58
