"""The shapes the workload cost model counts with: who talks to whom, and how many pods of a
workload are in each domain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np

from rebalancer.arrays import Floats, Indices
from rebalancer.cluster.topology import DomainKey, Location

DomainCounts = list[dict[DomainKey, int]]
"""Per level, domain -> how many of a workload's pods are in it."""


@dataclass(frozen=True)
class WorkloadPeers:
    """Who talks to whom; shared, never changed, by a model's copies."""

    names: list[str]
    members: list[list[str]]
    """Per workload, its pods on a known node."""
    of_pod: dict[str, int]
    rates: list[dict[int, float]]
    """Workload -> peer workload -> the rate of each pair of their pods, both ways round; a
    workload is its own peer when its pods talk among themselves."""


@dataclass(frozen=True)
class HeldTraffic:
    """Rows of (workload, domain, the traffic the workload's pods send it), sorted by workload,
    each pod's traffic counted; domains are numbered, `keys` naming them."""

    workload: Indices
    domain: Indices
    weight: Floats
    keys: list[DomainKey]

    def weights(self, workload: Indices, domain: Indices) -> Floats:
        """The traffic each workload sends the domain numbered alongside it; 0 where it sends
        it none or the number is -1. The rows are sorted by workload and domain, as `np.unique`
        left them, so each is found by bisection."""
        if not len(self.workload):
            return np.zeros(len(workload))
        width = len(self.keys) + 1
        rows = self.workload * width + self.domain
        wanted = workload * width + domain
        at = np.minimum(np.searchsorted(rows, wanted), len(rows) - 1)
        return np.where((rows[at] == wanted) & (domain >= 0), self.weight[at], 0.0)

    def by_domain(self, workload: int) -> dict[DomainKey, float]:
        """The workload's rows, as domain -> traffic."""
        start, end = np.searchsorted(self.workload, (workload, workload + 1)).tolist()
        return dict(
            zip(
                (self.keys[number] for number in self.domain[start:end].tolist()),
                self.weight[start:end].tolist(),
                strict=True,
            )
        )


class PairFigure(NamedTuple):
    split_at: list[float]
    """Rate by the widest level the pairs cross, as `Tally.split_at`."""
    rate: float
    cost: float


def pair_count(pods: list[str], peers: list[str], same: bool) -> int:
    return len(pods) * (len(pods) - 1) // 2 if same else len(pods) * len(peers)


def add_count(counts: DomainCounts, location: Location, count: int) -> None:
    """Counts `count` pods at `location` into every domain known to hold it."""
    for level, value in enumerate(location):
        if value is None:
            return
        key = cast(DomainKey, location[: level + 1])  # no None: checked on the way
        counts[level][key] = counts[level].get(key, 0) + count
