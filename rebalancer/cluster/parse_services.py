"""Service objects, with the EndpointSlices that list their endpoints, to Services."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rebalancer.cluster.model import Endpoint, Service
from rebalancer.cluster.parse_objects import parts
from rebalancer.cluster.parse_quantities import Reader
from rebalancer.cluster.wire import WireEndpoint, WireEndpointConditions, WireObject
from rebalancer.errors import InputError

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""On an EndpointSlice: the Service it lists endpoints for."""
_NO_CONDITIONS = WireEndpointConditions()


def parse_service(
    reader: Reader, item: WireObject, slices: Mapping[str, list[WireObject]]
) -> Service:
    metadata, spec, _status = parts(item)
    selector = spec.selector
    if selector is not None and not all(isinstance(v, str) for v in selector.values()):
        raise InputError(f"{reader.origin}: spec.selector: expected a map of label values")
    namespace = metadata.namespace or "default"
    return Service(
        namespace=namespace,
        name=metadata.name,
        selector=selector or None,
        traffic_distribution=spec.trafficDistribution,
        internal_traffic_policy=spec.internalTrafficPolicy or "Cluster",
        annotations=metadata.annotations or {},
        headless=spec.clusterIP == "None",
        endpoints=_endpoints(namespace, slices.get(f"{namespace}/{metadata.name}", ())),
        resource_version=metadata.resourceVersion or "",
    )


def _endpoint(namespace: str, wire: WireEndpoint) -> Endpoint:
    """Unset conditions read as the API documents them: ready true, serving as ready,
    terminating false."""
    conditions = wire.conditions or _NO_CONDITIONS
    ready = conditions.ready is not False
    ref, hints = wire.targetRef, wire.hints
    return Endpoint(
        pod=f"{ref.namespace or namespace}/{ref.name}"
        if ref is not None and ref.kind == "Pod" and ref.name
        else None,
        node=wire.nodeName,
        zone=wire.zone,
        ready=ready,
        serving=ready if conditions.serving is None else conditions.serving,
        terminating=bool(conditions.terminating),
        zone_hints=tuple(hint.name for hint in hints.forZones or ()) if hints else (),
        node_hints=tuple(hint.name for hint in hints.forNodes or ()) if hints else (),
    )


def _endpoints(namespace: str, slices: Sequence[WireObject]) -> tuple[Endpoint, ...]:
    """A Service's endpoints from all its slices, each pod once: a dual-stack Service lists
    it in a slice per address family, and a slice written by hand may list it twice."""
    endpoints = [_endpoint(namespace, wire) for item in slices for wire in item.endpoints or ()]
    seen: set[str] = set()
    kept: list[Endpoint] = []
    for endpoint in endpoints:
        if endpoint.pod is not None:
            if endpoint.pod in seen:
                continue
            seen.add(endpoint.pod)
        kept.append(endpoint)
    return tuple(kept)
