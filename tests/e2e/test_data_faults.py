"""Every way Prometheus can fail the controller, injected in front of a real Prometheus while a
controller in evict mode faces a split pair it would move: each fault ends the cycle with zero
evictions, and the reason is in the cycle result, the metrics and the log."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from harness.cluster import LocalCluster
from harness.faults import FaultyPrometheus, PrometheusFault, faulty_prometheus
from rebalancer.clients.stores import FixedPolicy
from rebalancer.controller.loop import Controller
from tests.e2e.setups import Setup, split_pair_setup

pytestmark = pytest.mark.e2e

NAMESPACE = "faults"
TIMEOUT_SECONDS = 1.0

EXPECTED: dict[PrometheusFault, tuple[str, str]] = {
    "down": ("skipped-no-data", "unreachable"),
    "slow": ("skipped-no-data", "timeout"),
    "http-500": ("skipped-no-data", "unreachable"),
    "http-503": ("skipped-no-data", "unreachable"),
    "bad-query": ("error", "bad-query"),
    "not-json": ("skipped-no-data", "bad-response"),
    "no-result": ("skipped-no-data", "bad-response"),
    "empty": ("skipped-no-data", "empty"),
    "nan": ("skipped-no-data", "invalid-value"),
    "inf": ("skipped-no-data", "invalid-value"),
    "negative": ("skipped-no-data", "invalid-value"),
    "duplicate": ("skipped-no-data", "bad-response"),
    "gone-pods": ("skipped-no-data", "empty"),
    "odd-labels": ("skipped-no-data", "empty"),
    "stale": ("skipped-stale", "stale"),
}


@pytest.fixture(scope="module")
def setup(cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with split_pair_setup(cluster, NAMESPACE, tmp_path_factory.mktemp("prometheus-faults")) as made:
        yield made


@pytest.fixture(scope="module")
def proxy(setup: Setup) -> Iterator[FaultyPrometheus]:
    with faulty_prometheus(setup.prometheus.url, slow_seconds=3 * TIMEOUT_SECONDS) as running:
        yield running


def controller_behind(setup: Setup, proxy: FaultyPrometheus, mode: str) -> Controller:
    controller = setup.controller(mode, prometheus_url=proxy.url)
    policies = controller.policies
    assert isinstance(policies, FixedPolicy)
    traffic = policies.policy.traffic.model_copy(update={"timeout_seconds": TIMEOUT_SECONDS})
    policies.policy = policies.policy.model_copy(update={"traffic": traffic})
    return controller


def test_without_a_fault_the_same_controller_would_move_pods(
    setup: Setup, proxy: FaultyPrometheus
) -> None:
    """The control: every test below would see evictions if the fault were not stopping them."""
    proxy.fault = "none"
    report = controller_behind(setup, proxy, "dry-run").run_cycle()
    assert report.result == "ok", report.detail
    assert report.outcomes and {o.result for o in report.outcomes} == {"would-evict"}


@pytest.mark.parametrize("fault", list(EXPECTED))
def test_a_prometheus_fault_evicts_nothing_and_says_why(
    setup: Setup,
    proxy: FaultyPrometheus,
    fault: PrometheusFault,
    caplog: pytest.LogCaptureFixture,
) -> None:
    result, reason = EXPECTED[fault]
    before = setup.pair_pods()
    controller = controller_behind(setup, proxy, "evict")
    proxy.fault = fault
    try:
        with caplog.at_level(logging.WARNING, logger="rebalancer.controller.loop"):
            report = controller.run_cycle()
    finally:
        proxy.fault = "none"
    assert (report.result, report.outcomes) == (result, ())
    assert report.detail.startswith(f"{reason}: ")
    assert "\n" not in report.detail
    assert controller.metrics.traffic_failures.labels(reason)._value.get() == 1
    assert controller.metrics.cycles.labels(result)._value.get() == 1
    logged = [r.getMessage() for r in caplog.records if r.name == "rebalancer.controller.loop"]
    assert logged == [f"cycle {result}: no evictions: {report.detail}"]
    assert setup.pair_pods() == before
    assert not setup.events("EvictedForLocality")
