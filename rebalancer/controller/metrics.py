"""The controller's metrics, on an injected registry, and the HTTP endpoint that serves them.

Label values come from small fixed sets (results, strategies, skip categories, levels): per-pod
detail goes to Events, so the series count stays bounded however large the cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from socketserver import ThreadingMixIn
from typing import Any, get_args
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from rebalancer.clients.eviction import EvictionResult
from rebalancer.clients.routing import ChangeResult
from rebalancer.clients.stores import ReloadResult
from rebalancer.cluster.gang_owners import OWNERS
from rebalancer.controller.surges import SurgeResult
from rebalancer.cost.figures import Figures
from rebalancer.cost.routing import RoutingAdvice
from rebalancer.identity import running_version
from rebalancer.planning.cycle import CycleResult
from rebalancer.planning.landing import LandingResult
from rebalancer.planning.owned_gangs import OwnedGang
from rebalancer.planning.types import Plan, SkipCategory
from rebalancer.strategies.registry import STRATEGIES
from rebalancer.traffic.model import FailureReason

PREFIX = "topology_rebalancer"


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, doc: str, labels: Iterable[str] = ()) -> Counter:
            return Counter(f"{PREFIX}_{name}", doc, list(labels), registry=registry)

        def gauge(name: str, doc: str, labels: Iterable[str] = ()) -> Gauge:
            return Gauge(f"{PREFIX}_{name}", doc, list(labels), registry=registry)

        self.cycle_duration = Histogram(
            f"{PREFIX}_cycle_duration_seconds",
            "Time one cycle took, from reading the cluster to the last eviction.",
            buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300),
            registry=registry,
        )
        self.cycles = counter("cycles", "Cycles by result.", ["result"])
        self.overruns = counter("cycle_overruns", "Cycles skipped because the last one overran.")
        self.crossing = gauge(
            "traffic_crossing",
            "Traffic crossing each level, in the source's unit.",
            ["level", "when"],
        )
        self.weighted_cost = gauge("weighted_cost", "Traffic x level weight.", ["when"])
        self.monthly_cost = gauge(
            "cross_zone_cost_per_month", "Estimated cross-zone transfer bill.", ["currency", "when"]
        )
        # Not traffic_total: that suffix is for counters, and promtool refuses it on a gauge.
        self.total_traffic = gauge("traffic", "All pod-to-pod traffic seen, in the source's unit.")
        self.build_info = gauge("build_info", "1, labelled with the running version.", ["version"])
        self.build_info.labels(running_version()).set(1)
        self.candidates = gauge("candidates", "Moves the strategies proposed last cycle.")
        self.moves_planned = gauge("moves_planned", "Moves the planner chose last cycle.")
        self.evictions = counter(
            "evictions", "Evictions by result and strategy.", ["result", "strategy"]
        )
        self.landings = counter(
            "landings", "Migrate-mode replacements by where they landed.", ["result"]
        )
        self.skips = counter("skipped_candidates", "Candidates skipped, by category.", ["category"])
        self.policy_reloads = counter(
            "policy_reloads", "Policy reads that changed something.", ["result"]
        )
        self.policy_generation = gauge("policy_generation", "Policies accepted since start.")
        self.mode = gauge(
            "mode", "1 for the mode of the policy in force, 0 for the others.", ["mode"]
        )
        self.interval = gauge(
            "interval_seconds", "The policy's cycle interval, for alerts counted in cycles."
        )
        self.traffic_failures = counter(
            "traffic_failures",
            "Cycles that moved nothing because the traffic data could not be trusted, by reason.",
            ["reason"],
        )
        self.routing_kept_local = gauge(
            "routing_kept_local",
            "Traffic crossing zones that the recommended Service routing would keep in its zone, "
            "in the source's unit.",
        )
        self.routing_saving = gauge(
            "routing_saving_per_month",
            "What the recommended Service routing would take off the cross-zone bill.",
            ["currency"],
        )
        self.routing_recommended = gauge(
            "routing_recommendations", "Services whose recommended routing differs from theirs."
        )
        self.routing_changes = counter(
            "routing_changes",
            "Routing changes the controller made or tried, by result.",
            ["result"],
        )
        self.surges = counter(
            "surges",
            "Surge migrations by result: started, would-surge (dry run), completed (the old pod "
            "removed, the new one Ready in the target), reverted, abandoned, failed.",
            ["result"],
        )
        self.owned_gangs = gauge(
            "owned_gangs_spread",
            "Gangs another scheduler places that span more domains than they need, by owner: "
            "never moved, reported in the plan with their owner's fix.",
            ["owner"],
        )
        self.leader = gauge("leader", "1 while this replica holds the lease and acts.")
        self.last_success = gauge(
            "last_success_timestamp_seconds", "When the last cycle that could act ended."
        )

        self._start_at_zero()

    def _start_at_zero(self) -> None:
        """Create every series of the bounded label sets now, at 0, so rate() and increase()
        see the first event and a dashboard panel shows 0 instead of "no data"."""
        for cycle_result in get_args(CycleResult):
            self.cycles.labels(cycle_result)
        for eviction_result in get_args(EvictionResult):
            for strategy in STRATEGIES:
                self.evictions.labels(eviction_result, strategy)
        for landing_result in get_args(LandingResult):
            self.landings.labels(landing_result)
        for category in get_args(SkipCategory):
            self.skips.labels(category)
        for reload_result in get_args(ReloadResult):
            self.policy_reloads.labels(reload_result)
        for reason in get_args(FailureReason):
            self.traffic_failures.labels(reason)
        for change_result in get_args(ChangeResult):
            self.routing_changes.labels(change_result)
        for owner in OWNERS:
            self.owned_gangs.labels(owner)
        for surge_result in get_args(SurgeResult):
            self.surges.labels(surge_result)

    def observe_owned_gangs(self, gangs: Sequence[OwnedGang]) -> None:
        for owner in OWNERS:
            self.owned_gangs.labels(owner).set(sum(gang.owner == owner for gang in gangs))

    def observe_plan(self, plan: Plan, now: Figures, currency: str) -> None:
        """`now`: the traffic as routed today, which `plan.before` is not when the plan assumed
        the routing it recommends."""
        self._observe_figures(now, "current", currency)
        self._observe_figures(plan.after, "predicted", currency)
        self.total_traffic.set(now.total)
        self.candidates.set(plan.candidates)
        self.moves_planned.set(len(plan.moves))
        for skip in plan.skipped:
            self.skips.labels(skip.category).inc()

    def observe_routing(self, advice: Sequence[RoutingAdvice], currency: str) -> None:
        """The money only where the traffic is in bytes, as for the cross-zone cost."""
        recommended = [item for item in advice if item.kept_local > 0]
        self.routing_kept_local.set(sum(item.kept_local for item in recommended))
        self.routing_recommended.set(len(recommended))
        self.routing_saving.clear()  # a currency changed, or money no longer known
        if any(item.monthly_saved is not None for item in advice):
            self.routing_saving.labels(currency).set(
                sum(item.monthly_saved or 0.0 for item in recommended)
            )

    def _observe_figures(self, figures: Figures, when: str, currency: str) -> None:
        for level, rate in figures.crossing.items():
            self.crossing.labels(level, when).set(rate)
        self.weighted_cost.labels(when).set(figures.weighted_cost)
        if figures.monthly_cross_zone_cost is not None:
            self.monthly_cost.labels(currency, when).set(figures.monthly_cross_zone_cost)


READ_SECONDS = 5.0
"""For each read of a request: a client that connects and sends nothing is let go then, not held
on to by a thread for good."""


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would drown the JSON log."""


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


def serve(
    registry: CollectorRegistry,
    port: int,
    ready: Callable[[], bool],
    address: str = "0.0.0.0",
    read_seconds: float = READ_SECONDS,
) -> WSGIServer:
    """/metrics, /healthz (the process answers) and /readyz (a cycle could act), in a thread."""
    metrics_app = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz" or (path == "/readyz" and ready()):
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        status = "503 Service Unavailable" if path == "/readyz" else "404 Not Found"
        start_response(status, [("Content-Type", "text/plain")])
        return [status.encode()]

    class Handler(_QuietHandler):
        timeout = read_seconds

    server = make_server(address, port, app, _ThreadingServer, handler_class=Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
