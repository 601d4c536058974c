"""A scenario running for real: loaded into the local cluster, its traffic served by the exporter
and scraped by Prometheus, ready once rate() over the window tells the truth."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from harness.cluster import LocalCluster
from harness.exporter import HUBBLE_FLOWS, ClusterTraffic, FlowCounters, FlowMetric, serve
from harness.prometheus import PrometheusServer, ScrapeJob
from rebalancer.simulator.scenario import Scenario


@contextmanager
def live_scenario(
    cluster: LocalCluster,
    scenario: Scenario,
    workdir: Path,
    window_seconds: int = 10,
    *,
    extra_jobs: Mapping[str, ScrapeJob] | None = None,
    rule_files: Sequence[Path] = (),
) -> Iterator[tuple[ClusterTraffic, PrometheusServer]]:
    """Yields the ground truth and the Prometheus that watches it, and stops Prometheus after.

    rate() divides by the whole window, so it reads low until the window holds a full set of
    one-second scrapes; this waits for that before yielding.
    """
    cluster.load_scenario(scenario)
    traffic = ClusterTraffic(scenario, cluster.api_client())
    namespaces = sorted({w.namespace for w in scenario.workloads})
    with served_traffic(
        traffic.rates,
        namespaces,
        workdir,
        window_seconds,
        extra_jobs=extra_jobs,
        rule_files=rule_files,
    ) as prometheus:
        yield traffic, prometheus


@contextmanager
def served_traffic(
    rates: Callable[[], Mapping[tuple[str, str], float]],
    namespaces: Sequence[str],
    workdir: Path,
    window_seconds: int = 10,
    *,
    extra_jobs: Mapping[str, ScrapeJob] | None = None,
    rule_files: Sequence[Path] = (),
    metric: FlowMetric = HUBBLE_FLOWS,
) -> Iterator[PrometheusServer]:
    """`rates` (pod pair -> flows/s, read at every scrape) served as Hubble's counters, or as
    `metric` says, and scraped by a Prometheus, yielded once rate() over the window tells the
    truth for every pair of these namespaces; Prometheus is stopped after."""
    with serve(FlowCounters(rates, metric)) as target:
        prometheus = PrometheusServer(
            workdir, [target], extra_jobs=extra_jobs, rule_files=rule_files
        )
        try:
            prometheus.wait_ready()
            prometheus.wait_for(
                f"count_over_time({metric.name}_total"
                f'{{{metric.source_namespace}=~"{"|".join(namespaces)}"}}'
                f"[{window_seconds}s]) >= {window_seconds}",
                series=len(rates()),
                timeout=6 * window_seconds,
            )
            yield prometheus
        finally:
            prometheus.stop()
