"""The Grafana dashboard, built with grafana-foundation-sdk so its panels are typed code, not
hand-edited JSON. `python -m dashboards.build` writes topology-rebalancer.json beside this file;
a test fails when the JSON is stale, and an e2e test runs every panel's query against a real
Prometheus scraping a running controller.

Every query filters on the controller's namespace (the label a ServiceMonitor scrape adds) and
takes max() over replicas where a gauge is involved, because the standby reports nothing useful.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.common import BigValueTextMode
from grafana_foundation_sdk.models.dashboard import DataSourceRef, VariableRefresh

OUTPUT = Path(__file__).with_name("topology-rebalancer.json")
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
NS = 'namespace="$namespace"'
"""The matcher every query carries."""


def _query(expr: str, legend: str = "") -> prometheus.Dataquery:
    query = prometheus.Dataquery().expr(expr)
    return query.legend_format(legend) if legend else query


def _timeseries(
    title: str, description: str, unit: str, *queries: prometheus.Dataquery
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .span(12)
        .height(8)
    )
    for ref_id, query in zip("ABCDEFGH", queries, strict=False):
        panel = panel.with_target(query.ref_id(ref_id))
    return panel


def _stat(title: str, description: str, unit: str, query: prometheus.Dataquery) -> stat.Panel:
    return (
        stat.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .span(6)
        .height(4)
        .with_target(query.ref_id("A"))
    )


def panels() -> list[timeseries.Panel | stat.Panel]:
    return [
        _stat(
            "Mode in force",
            "The mode of the policy the controller acts on: dry-run, evict or migrate.",
            "none",
            _query(f"max by (mode) (topology_rebalancer_mode{{{NS}}}) == 1", "{{mode}}"),
        ).text_mode(BigValueTextMode.NAME),
        _stat(
            "Locality (zone)",
            "Share of all pod-to-pod traffic that stays inside its zone.",
            "percentunit",
            _query(
                f"1 - max(topology_rebalancer_traffic_crossing"
                f'{{{NS}, level="zone", when="current"}})'
                f" / max(topology_rebalancer_traffic{{{NS}}})"
            ),
        ),
        _stat(
            "Cross-zone cost per month",
            "Estimated transfer bill of the traffic crossing zones now (needs bytes, or "
            "traffic.bytes_per_unit).",
            "currencyUSD",
            _query(f'max(topology_rebalancer_cross_zone_cost_per_month{{{NS}, when="current"}})'),
        ),
        _stat(
            "Time since the last cycle that could act",
            "Cycles are skipped on missing or stale traffic data; see data-source errors.",
            "s",
            _query(f"time() - max(topology_rebalancer_last_success_timestamp_seconds{{{NS}}})"),
        ),
        _timeseries(
            "Traffic crossing each level",
            "Now (current) and after the planned moves (predicted), in the source's unit.",
            "short",
            _query(
                f"max by (level, when) (topology_rebalancer_traffic_crossing{{{NS}}})",
                "{{level}} {{when}}",
            ),
        ),
        _timeseries(
            "Cross-zone cost per month",
            "Estimated, now and after the planned moves.",
            "currencyUSD",
            _query(
                f"max by (when) (topology_rebalancer_cross_zone_cost_per_month{{{NS}}})",
                "{{when}}",
            ),
        ),
        _timeseries(
            "Service routing",
            "Cross-zone traffic that trafficDistribution: PreferSameZone would keep in its zone, "
            "at zero moves (each such Service has a TrafficDistributionRecommended Event), the "
            "Services concerned, and the routing changes made (policy routing.apply, on Services "
            "annotated topology-rebalancer.io/routing=apply).",
            "short",
            _query(f"max(topology_rebalancer_routing_kept_local{{{NS}}})", "would keep local"),
            _query(f"max(topology_rebalancer_routing_recommendations{{{NS}}})", "Services"),
            _query(
                f"sum by (result) (increase(topology_rebalancer_routing_changes_total{{{NS}}}"
                "[$__rate_interval]))",
                "changes {{result}}",
            ),
        ),
        _timeseries(
            "Cross-zone cost routing would save",
            "Per month, if every recommended Service routing were set (needs bytes, or "
            "traffic.bytes_per_unit).",
            "currencyUSD",
            _query(f"max(topology_rebalancer_routing_saving_per_month{{{NS}}})", "saved"),
        ),
        _timeseries(
            "Gangs left to their owner",
            "Gangs placed by Kueue, Volcano, KAI-Scheduler, JobSet, ... that span more domains "
            "than they need. The rebalancer never moves their members; `rebalancer plan` and the "
            "controller's log say how to ask the owner to keep each one together.",
            "short",
            _query(f"max by (owner) (topology_rebalancer_owned_gangs_spread{{{NS}}})", "{{owner}}"),
        ),
        _timeseries(
            "Moves planned against moves done",
            "Planned by the last cycle, and evictions that went through.",
            "short",
            _query(f"max(topology_rebalancer_moves_planned{{{NS}}})", "planned"),
            _query(
                f'sum(increase(topology_rebalancer_evictions_total{{{NS}, result="evicted"}}'
                "[$__rate_interval]))",
                "evicted",
            ),
        ),
        _timeseries(
            "Evictions by result and strategy",
            "refused-by-pdb is normal: the PDB said no and the move waits for a later cycle. "
            "cancelled: the pod or its target node changed after planning; the next cycle plans "
            "again.",
            "short",
            _query(
                f"sum by (result, strategy) (increase(topology_rebalancer_evictions_total{{{NS}}}"
                "[$__rate_interval]))",
                "{{result}} {{strategy}}",
            ),
        ),
        _timeseries(
            "Would evict (dry-run)",
            "What dry-run would have moved; each also has a WouldEvict Event on its pod.",
            "short",
            _query(
                f"sum by (strategy) (increase(topology_rebalancer_evictions_total{{{NS}, "
                'result="would-evict"}[$__rate_interval]))',
                "{{strategy}}",
            ),
        ),
        _timeseries(
            "Where migrate-mode replacements landed",
            "landed-elsewhere or not-scheduled in a row doubles the workload's cooldown.",
            "short",
            _query(
                f"sum by (result) (increase(topology_rebalancer_landings_total{{{NS}}}"
                "[$__rate_interval]))",
                "{{result}}",
            ),
        ),
        _timeseries(
            "Cycle duration",
            "From reading the cluster to the last eviction; p50 and p90.",
            "s",
            *(
                _query(
                    f"histogram_quantile({q}, sum by (le) (rate("
                    f"topology_rebalancer_cycle_duration_seconds_bucket{{{NS}}}"
                    "[$__rate_interval])))",
                    f"p{int(q * 100)}",
                )
                for q in (0.5, 0.9)
            ),
        ),
        _timeseries(
            "Data-source errors",
            "Cycles that moved nothing because the traffic data could not be trusted, by reason; "
            "and cycles by result.",
            "short",
            _query(
                f"sum by (reason) (increase(topology_rebalancer_traffic_failures_total{{{NS}}}"
                "[$__rate_interval]))",
                "{{reason}}",
            ),
            _query(
                f"sum by (result) (increase(topology_rebalancer_cycles_total{{{NS}}}"
                "[$__rate_interval]))",
                "cycle {{result}}",
            ),
        ),
        _timeseries(
            "Policy status",
            "Policy reads by result (rejected: the ConfigMap holds an invalid policy and the "
            "last good one is in force), and policies accepted since start.",
            "short",
            _query(
                f"sum by (result) (increase(topology_rebalancer_policy_reloads_total{{{NS}}}"
                "[$__rate_interval]))",
                "{{result}}",
            ),
            _query(f"max(topology_rebalancer_policy_generation{{{NS}}})", "generation"),
        ),
    ]


def build() -> dashboard.Dashboard:
    board = (
        dashboard.Dashboard("topology-rebalancer")
        .uid("topology-rebalancer")
        .description("What the rebalancer sees, plans and moves, and whether it can act.")
        .tags(["kubernetes", "topology-rebalancer"])
        .refresh("1m")
        .time("now-6h", "now")
        .with_variable(
            dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
        )
        .with_variable(
            dashboard.QueryVariable("namespace")
            .label("Controller namespace")
            .datasource(DATASOURCE)
            .query("label_values(topology_rebalancer_cycles_total, namespace)")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        )
    )
    for panel in panels():
        board = board.with_panel(panel)
    return board


def dashboard_json() -> str:
    return JSONEncoder(sort_keys=True, indent=2).encode(build().build()) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    OUTPUT.write_text(dashboard_json())
    print(f"wrote {OUTPUT.name}")


if __name__ == "__main__":
    main()
