"""A synthetic Hubble: `hubble_flows_processed_total` per pod pair, for the pods running now; or
a synthetic Istio: `istio_tcp_sent_bytes_total` per workload pair.

This is the tests' ground truth of who talks to whom. Counters grow at the rate the scenario's
traffic model gives for the current placement, integrated between scrapes, so Prometheus' rate()
recovers exactly those rates. Series of pods that are gone disappear, as Hubble's do. The
rebalancer only ever sees this through Prometheus.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, config
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from rebalancer.clients.kube_api import list_raw
from rebalancer.errors import SourceUnavailableError
from rebalancer.simulator.scenario import LEVEL_LABELS, Scenario, load_scenario
from rebalancer.simulator.traffic_model import PlacedPod, pair_rates, rank_of

Pair = tuple[str, str]
"""Source and destination, each "namespace/name" of a pod (Hubble) or a workload (Istio)."""


@dataclass(frozen=True)
class FlowMetric:
    """How a counter family names a pair."""

    name: str
    documentation: str
    labels: list[str]
    label_values: Callable[[str, str, str, str], list[str]]
    """Source namespace and name, destination namespace and name -> the labels' values."""
    source_namespace: str
    """The label holding the source's namespace."""


HUBBLE_FLOWS = FlowMetric(
    "hubble_flows_processed",
    "Total number of flows processed",
    [
        "source_namespace",
        "source_pod",
        "destination_namespace",
        "destination_pod",
        "type",
        "verdict",
        "traffic_direction",
    ],
    lambda *endpoints: [*endpoints, "L3_L4", "FORWARDED", "egress"],
    "source_namespace",
)
ISTIO_TCP_SENT = FlowMetric(
    "istio_tcp_sent_bytes",
    "Size of total bytes sent during response in case of a TCP connection",
    [
        "reporter",
        "source_workload_namespace",
        "source_workload",
        "destination_workload_namespace",
        "destination_workload",
    ],
    lambda *endpoints: ["source", *endpoints],
    "source_workload_namespace",
)


class FlowCounters(Collector):
    """Counters that grow at `rates()` (read again after every scrape) between scrapes."""

    def __init__(
        self, rates: Callable[[], Mapping[Pair, float]], metric: FlowMetric = HUBBLE_FLOWS
    ) -> None:
        self._rates_now = rates
        self._metric = metric
        self._lock = threading.Lock()
        self._counters: dict[Pair, float] = {}
        self._rates: Mapping[Pair, float] = rates()
        self._last = time.monotonic()

    def collect(self) -> Iterator[CounterMetricFamily]:
        with self._lock:
            now = time.monotonic()
            elapsed, self._last = now - self._last, now
            for pair, rate in self._rates.items():
                self._counters[pair] = self._counters.get(pair, 0.0) + rate * elapsed
            with contextlib.suppress(SourceUnavailableError):
                # Hubble counts flows without the API server: while it is down (a fault test),
                # the pods go on talking at the rates last known.
                self._rates = self._rates_now()
            live = {pair: self._counters.get(pair, 0.0) for pair in self._rates}
        metric = self._metric
        family = CounterMetricFamily(metric.name, metric.documentation, labels=metric.labels)
        for (source, destination), value in sorted(live.items()):
            source_namespace, _, source_name = source.partition("/")
            destination_namespace, _, destination_name = destination.partition("/")
            family.add_metric(
                metric.label_values(
                    source_namespace, source_name, destination_namespace, destination_name
                ),
                value,
            )
        yield family


@contextmanager
def serve(collector: Collector, port: int = 0) -> Iterator[str]:
    """Serve the collector on loopback; yields host:port for a scrape config."""
    registry = CollectorRegistry()
    registry.register(collector)
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


class ClusterTraffic:
    """The scenario's traffic model applied to the pods the API server reports running."""

    def __init__(self, scenario: Scenario, api: client.ApiClient) -> None:
        self.scenario = scenario
        self.core = client.CoreV1Api(api)

    def placed_pods(self) -> tuple[list[PlacedPod], dict[str, dict[str, str]]]:
        """The running pods of the scenario, and every node's labels, read together. Kept by
        no one: the scrape thread reads them after every scrape while a trial reads them for
        its figures, and a copy shared between the two would change under either."""
        workloads = {(w.namespace, w.name): w.key for w in self.scenario.workloads}
        node_labels = {
            node["metadata"]["name"]: node["metadata"].get("labels") or {}
            for node in list_raw("Node", self.core.list_node)
        }
        placed = []
        for pod in list_raw("Pod", self.core.list_pod_for_all_namespaces):
            metadata, node_name = pod["metadata"], pod["spec"].get("nodeName")
            app = (metadata.get("labels") or {}).get("app", "")
            workload = workloads.get((metadata["namespace"], app))
            phase = pod.get("status", {}).get("phase")
            running = phase == "Running" and not metadata.get("deletionTimestamp")
            if workload is None or not running or not node_name:
                continue
            key = f"{metadata['namespace']}/{metadata['name']}"
            zone = node_labels.get(node_name, {}).get(LEVEL_LABELS["zone"])
            rank = rank_of(metadata.get("annotations") or {})
            placed.append(PlacedPod(key, workload, zone, rank, node_name))
        return placed, node_labels

    def distributions(self) -> dict[str, str | None]:
        """Each scenario Service's trafficDistribution as the API server has it now, so calls
        follow a routing change the way kube-proxy would make them."""
        workloads = {w.key for w in self.scenario.workloads}
        found = {}
        for service in list_raw("Service", self.core.list_service_for_all_namespaces):
            metadata = service["metadata"]
            key = f"{metadata['namespace']}/{metadata['name']}"
            if key in workloads:
                found[key] = (service.get("spec") or {}).get("trafficDistribution")
        return found

    def rates(self) -> dict[Pair, float]:
        placed, _node_labels = self.placed_pods()
        return pair_rates(self.scenario, placed, self.distributions())

    def workload_rates(self) -> dict[Pair, float]:
        """The same rates summed per pair of workloads, as Istio's proxies report them."""
        placed, _node_labels = self.placed_pods()
        workload_of = {pod.key: pod.workload for pod in placed}
        summed: dict[Pair, float] = {}
        for (source, destination), rate in pair_rates(
            self.scenario, placed, self.distributions()
        ).items():
            pair = (workload_of[source], workload_of[destination])
            summed[pair] = summed.get(pair, 0.0) + rate
        return summed

    def true_crossing(self) -> dict[str, float]:
        """The true rate crossing each level (zone, rack, host) for the pods running now."""
        placed, node_labels = self.placed_pods()
        rates = pair_rates(self.scenario, placed, self.distributions())
        labels_of = {pod.key: node_labels.get(pod.node or "", {}) for pod in placed}
        crossing: dict[str, float] = dict.fromkeys(LEVEL_LABELS, 0.0)
        for (source, destination), rate in rates.items():
            here, there = labels_of[source], labels_of[destination]
            differs = False
            for level, label in LEVEL_LABELS.items():
                differs = differs or here.get(label) != there.get(label)
                if differs:
                    crossing[level] += rate
        return crossing


def main() -> None:
    parser = argparse.ArgumentParser(description="serve ground-truth Hubble flows for a scenario")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scenario", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    api = config.new_client_from_config(config_file=args.kubeconfig)  # type: ignore[no-untyped-call]
    traffic = ClusterTraffic(load_scenario(args.scenario), api)
    with serve(FlowCounters(traffic.rates), args.port):
        threading.Event().wait()


if __name__ == "__main__":
    main()
