"""A scenario's traffic model, and the Services (with their endpoints' hints) calls go through.

The traffic model is pure: given where pods run now, it says what flows between them, following
each pair's routing, which is what makes it ground truth when pods move. The simulated cluster
and the harness's exporter both take their traffic from it; the format is scenario.py's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rebalancer.cluster.model import Endpoint, Service
from rebalancer.cost.kube_proxy import Chooser, distribution_of, hinted
from rebalancer.simulator.scenario import Scenario, qualified

_ORDINAL = re.compile(r"-(\d+)$")


@dataclass(frozen=True)
class PlacedPod:
    key: str
    """namespace/name"""
    workload: str
    """namespace/name of the scenario workload"""
    zone: str | None
    rank: int | None = None
    """The pod's fixed place in its workload, which a replacement inherits: an indexed Job's
    completion index (as a training job's ranks are). None: the name's ordinal, if any."""
    node: str | None = None


COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def rank_of(annotations: Mapping[str, str]) -> int | None:
    value = annotations.get(COMPLETION_INDEX, "")
    return int(value) if value.isdigit() else None


def _ordinal_order(pods: Iterable[PlacedPod]) -> list[PlacedPod]:
    """Ranks, else StatefulSet ordinals when the names carry them, else by name: stable across
    cycles, and a replacement takes the place of the pod it replaced, so a ring keeps its order."""

    def order(pod: PlacedPod) -> tuple[int, str]:
        if pod.rank is not None:
            return (pod.rank, pod.key)
        match = _ORDINAL.search(pod.key)
        return (int(match.group(1)) if match else 0, pod.key)

    return sorted(pods, key=order)


def service_endpoints(
    servers: Iterable[PlacedPod], distribution: str | None
) -> tuple[Endpoint, ...]:
    """The endpoints of the Service in front of these pods, each ready (a placed pod runs), with
    the hints the EndpointSlice controller writes for `distribution`."""
    endpoints = [Endpoint(pod.key, pod.node, pod.zone, True, True, False) for pod in servers]
    return hinted(endpoints, distribution_of(distribution))


def _by_workload(pods: Iterable[PlacedPod]) -> dict[str, list[PlacedPod]]:
    grouped: dict[str, list[PlacedPod]] = {}
    for pod in pods:
        grouped.setdefault(pod.workload, []).append(pod)
    return grouped


def _routing(
    scenario: Scenario, distributions: Mapping[str, str | None] | None
) -> dict[str, str | None]:
    """Each workload's Service's trafficDistribution: the scenario's, or a change made since."""
    routed: dict[str, str | None] = {w.key: w.traffic_distribution for w in scenario.workloads}
    routed.update(distributions or {})
    return routed


def services(
    scenario: Scenario,
    pods: Iterable[PlacedPod],
    distributions: Mapping[str, str | None] | None = None,
) -> dict[str, Service]:
    """The Service in front of each workload another one calls, by its key (the workload's),
    with its endpoints and their hints as the EndpointSlice controller keeps them."""
    served = scenario.served()
    by_workload = _by_workload(pods)
    routed = _routing(scenario, distributions)
    found = {}
    for workload in scenario.workloads:
        if workload.key not in served:
            continue
        distribution = routed[workload.key]
        found[workload.key] = Service(
            namespace=workload.namespace,
            name=workload.name,
            selector={"app": workload.name},
            traffic_distribution=distribution,
            internal_traffic_policy="Cluster",
            annotations={},
            endpoints=service_endpoints(by_workload.get(workload.key, []), distribution),
        )
    return found


def pair_rates(
    scenario: Scenario,
    pods: Iterable[PlacedPod],
    distributions: Mapping[str, str | None] | None = None,
) -> dict[tuple[str, str], float]:
    """(source pod, destination pod) -> rate, for the pods running now. `distributions`: the
    trafficDistribution of a workload's Service where it differs from the scenario's (a routing
    change made during the run)."""
    by_workload = _by_workload(pods)
    rates: dict[tuple[str, str], float] = {}

    def add(source: PlacedPod, destination: PlacedPod, rate: float) -> None:
        if source.key != destination.key:
            pair = (source.key, destination.key)
            rates[pair] = rates.get(pair, 0.0) + rate

    routed = _routing(scenario, distributions)
    for flow in scenario.traffic:
        clients = _ordinal_order(by_workload.get(qualified(flow.source), []))
        servers = _ordinal_order(by_workload.get(qualified(flow.destination), []))
        if not clients or not servers:
            continue
        per_client = flow.rate / len(clients)
        destination = qualified(flow.destination)
        through_service = flow.through_service
        if through_service:
            endpoints = service_endpoints(servers, routed.get(destination))
            pick = Chooser(endpoints, local_only=False)
            by_key = {pod.key: pod for pod in servers}
        for index, client_pod in enumerate(clients):
            if flow.routing == "pinned":
                add(client_pod, servers[index % len(servers)], per_client)
                continue
            if flow.routing == "ring":
                add(client_pod, servers[(index + 1) % len(servers)], per_client)
                continue
            targets = servers
            if through_service:
                near = pick(client_pod.node, client_pod.zone)
                targets = [by_key[endpoints[i].pod or ""] for i in near]
            for server in targets:
                add(client_pod, server, per_client / len(targets))
    return rates
