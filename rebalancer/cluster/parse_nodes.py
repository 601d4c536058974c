"""A Node object to a Node: its labels, allocatable, taints and readiness."""

from __future__ import annotations

from rebalancer.cluster.model import Node, Taint
from rebalancer.cluster.parse_objects import condition_true, parts
from rebalancer.cluster.parse_quantities import Reader, resources
from rebalancer.cluster.wire import WireObject


def parse_node(reader: Reader, item: WireObject) -> Node:
    metadata, spec, status = parts(item)
    return Node(
        name=metadata.name,
        labels=metadata.labels or {},
        allocatable=resources(reader, "status.allocatable", status.allocatable or {}),
        taints=tuple(Taint(t.key, t.value, t.effect) for t in spec.taints or ()),
        unschedulable=bool(spec.unschedulable),
        ready=condition_true(status, "Ready"),
    )
