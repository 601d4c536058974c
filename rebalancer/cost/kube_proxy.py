"""Where kube-proxy sends a Service's calls under the endpoints' hints, and the hints each
trafficDistribution brings: the prediction the plan's routing section stands on, and the
simulator's routing.

It follows kube-proxy's choice of endpoints (pkg/proxy/topology.go): only ready endpoints
decide; node hints are used if every ready endpoint has one and one names the client's node,
else zone hints on the same terms, else every ready endpoint; with none ready, the serving and
terminating ones; internalTrafficPolicy Local keeps to the client's node. Connections spread
evenly over the chosen set. The hints a distribution would bring are those the EndpointSlice
controller writes (k8s.io/endpointslice/trafficdist): each ready endpoint's own zone, and its
node too for PreferSameNode. The `service.kubernetes.io/topology-mode` annotation overrides the
field, so where it is set the field's value changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec
import numpy as np

from rebalancer.cluster.model import Endpoint, Service

TOPOLOGY_MODE_ANNOTATIONS = (
    "service.kubernetes.io/topology-aware-hints",
    "service.kubernetes.io/topology-mode",
)
"""Topology Aware Routing, older than the field; set to Auto it wins over trafficDistribution.
The EndpointSlice controller reads the first (deprecated) where it is set, else the second."""

Distribution = Literal["Cluster", "PreferSameZone", "PreferSameNode"]
SAME_ZONE: Distribution = "PreferSameZone"


def distribution_of(value: str | None) -> Distribution:
    """trafficDistribution as the EndpointSlice controller reads it: PreferClose is
    PreferSameZone's older name; any other value, or none, routes cluster-wide."""
    if value in ("PreferClose", "PreferSameZone"):
        return "PreferSameZone"
    return "PreferSameNode" if value == "PreferSameNode" else "Cluster"


def topology_mode(service: Service) -> str | None:
    """The Topology Aware Routing annotation in force, when it turns hints on: as the
    EndpointSlice controller's hintsEnabled reads it, the deprecated key where it is set, and
    only the values Auto and auto."""
    for key in TOPOLOGY_MODE_ANNOTATIONS:
        value = service.annotations.get(key)
        if value is not None:
            return f"{key}={value}" if value in ("Auto", "auto") else None
    return None


MESH_ANNOTATION = "networking.istio.io/traffic-distribution"
"""Istio's, on a Service: its proxies route by it where the field is unset; kube-proxy and the
EndpointSlice controller do not read it."""


def mesh_distribution(service: Service) -> str | None:
    """Istio's annotation, as key=value, where it routes the Service's calls by place: set to
    a distribution other than Cluster, on a Service whose field is unset (the field wins)."""
    value = service.annotations.get(MESH_ANNOTATION)
    if service.traffic_distribution is not None or distribution_of(value) == "Cluster":
        return None
    return f"{MESH_ANNOTATION}={value}"


def hinted(endpoints: Sequence[Endpoint], distribution: Distribution) -> tuple[Endpoint, ...]:
    """The endpoints with the hints the EndpointSlice controller would write for
    `distribution`. It writes only ready endpoints' hints, and clears them all for Cluster."""
    if distribution == "Cluster":
        return tuple(msgspec.structs.replace(e, zone_hints=(), node_hints=()) for e in endpoints)
    same_node = distribution == "PreferSameNode"
    return tuple(
        msgspec.structs.replace(
            endpoint,
            zone_hints=(endpoint.zone,) if endpoint.zone else (),
            node_hints=(endpoint.node,) if same_node and endpoint.node else (),
        )
        if endpoint.ready
        else endpoint
        for endpoint in endpoints
    )


class Chooser:
    """kube-proxy's choice of endpoints for one Service, worked out once for every client: which
    endpoints are usable, whether node or zone hints apply, and the endpoints hinted for each
    node and zone, as positions in the Service's list."""

    def __init__(self, endpoints: Sequence[Endpoint], local_only: bool) -> None:
        self.endpoints = endpoints
        self.local_only = local_only
        ready = [i for i, e in enumerate(endpoints) if e.ready]
        fallback = [i for i, e in enumerate(endpoints) if e.serving and e.terminating]
        self.ready = ready or fallback
        """With none ready, the serving and terminating ones, wherever they are."""
        self.by_node: dict[str, list[int]] = defaultdict(list)
        self.by_zone: dict[str, list[int]] = defaultdict(list)
        if local_only:
            # The node's ready endpoints, else its serving and terminating ones.
            self.by_node.update(_by_node(endpoints, fallback))
            self.by_node.update(_by_node(endpoints, ready))
            return
        if not ready:
            return
        if all(endpoints[i].node_hints for i in ready):
            for i in ready:
                for node in endpoints[i].node_hints:
                    self.by_node[node].append(i)
        if all(endpoints[i].zone_hints for i in ready):
            for i in ready:
                for zone in endpoints[i].zone_hints:
                    self.by_zone[zone].append(i)

    def __call__(self, node: str | None, zone: str | None) -> list[int]:
        """The positions of the endpoints kube-proxy on `node` (in `zone`) sends a connection
        to, evenly: node hints if one names the node, else zone hints if one names the zone,
        else every usable endpoint; with internalTrafficPolicy Local, the node's own only."""
        if self.local_only:
            return self.by_node.get(node or "", [])
        near = self.by_node.get(node or "") or self.by_zone.get(zone or "")
        return near or self.ready


def _by_node(endpoints: Sequence[Endpoint], positions: list[int]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for i in positions:
        node = endpoints[i].node
        if node is not None:
            grouped[node].append(i)
    return grouped


@dataclass(frozen=True)
class Call:
    """Calls to one Service from one place: its clients' summed rate, from one zone, or from one
    node where the Service may route by node (internalTrafficPolicy Local, or node hints)."""

    node: str | None
    zone: str | None
    rate: float


@dataclass(frozen=True)
class Routed:
    """Where a Service's calls go under one set of endpoints' hints."""

    crossing: float
    """Rate sent to an endpoint in another zone (both zones known)."""
    dropped: float
    """Rate with no endpoint to go to (internalTrafficPolicy Local on a node without one)."""
    load: Mapping[int, float]
    """Rate per endpoint, by its position in the Service's list."""


def route(
    endpoints: Sequence[Endpoint],
    calls: Sequence[Call],
    local_only: bool = False,
    *,
    with_load: bool = False,
) -> Routed:
    """Where the calls go; the rate per endpoint only when asked (`with_load`)."""
    pick = Chooser(endpoints, local_only)
    zones = [e.zone for e in endpoints]
    crossing = dropped = 0.0
    load = np.zeros(len(endpoints)) if with_load else None
    for call in calls:
        targets = pick(call.node, call.zone)
        if not targets:
            dropped += call.rate
            continue
        share = call.rate / len(targets)
        if call.zone is not None:
            away = sum(1 for i in targets if zones[i] is not None and zones[i] != call.zone)
            crossing += share * away
        if load is not None:
            np.add.at(load, targets, share)  # an index listed twice takes two shares
    return Routed(crossing, dropped, {} if load is None else dict(enumerate(load.tolist())))
