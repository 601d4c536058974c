"""A PodDisruptionBudget object to a Pdb: its selector, and the disruptions its status allows."""

from __future__ import annotations

from rebalancer.cluster.model import Pdb
from rebalancer.cluster.parse_objects import parts
from rebalancer.cluster.wire import WireObject


def parse_pdb(item: WireObject) -> Pdb:
    metadata, spec, status = parts(item)
    observed = status.observedGeneration
    return Pdb(
        namespace=metadata.namespace or "default",
        name=metadata.name,
        selector=spec.selector,
        disruptions_allowed=status.disruptionsAllowed or 0,
        status_observed=observed is not None and observed >= (metadata.generation or 0),
    )
