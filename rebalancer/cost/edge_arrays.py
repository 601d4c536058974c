"""The communication graph as arrays of pod numbers, for passes over every pair at once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Self, cast

import numpy as np
import numpy.typing as npt

from rebalancer.arrays import Floats, Indices, group_sums, stable_order
from rebalancer.cluster.topology import DomainKey, Location
from rebalancer.traffic.model import PodTraffic


@dataclass(frozen=True)
class DomainNumbers:
    of_pod: Indices
    """Per level (rows) and pod (columns, as in EdgeArrays.pods), a number for the pod's domain
    there, shared by the pods of one domain; -1 where it is unknown, from the first unknown
    level down, as `first_split` reads a location."""
    keys: list[DomainKey]
    """Number -> the domain's key; its length tells the level."""

    _holding: dict[int, Indices] = field(default_factory=dict, compare=False, repr=False)

    def holding(self, level: int) -> Indices:
        """Number -> the number of the domain at `level` holding it (itself at `level`); -1
        for wider domains. Every prefix of a key is numbered too (see `domain_ids`)."""
        if level not in self._holding:
            numbered = {key: number for number, key in enumerate(self.keys)}
            self._holding[level] = np.fromiter(
                (numbered[key[: level + 1]] if len(key) > level else -1 for key in self.keys),
                np.int64,
                len(self.keys),
            )
        return self._holding[level]


@dataclass(frozen=True)
class EdgeArrays:
    """The communication graph, pods numbered, as arrays: the passes over every pair at once
    (the tally, a strategy's traffic per domain) took seconds per million pairs in Python.

    Every pair is here both ways round, grouped by source. A pod's peers (see `peers_of`) are
    read from here in the same order, and `np.bincount` adds in input order, so sums taken over
    the arrays are bit for bit the ones a loop over each pod's peers makes."""

    pods: tuple[str, ...]
    index: dict[str, int]
    source: Indices
    target: Indices
    rate: Floats
    once: npt.NDArray[np.bool_]
    """The direction `PodCostModel.edges` yields each pair in: from the pod whose key sorts
    first."""
    start: Indices
    """Where each pod's pairs start; one more entry, the number of pairs both ways round."""

    @classmethod
    def of(cls, traffic: PodTraffic, placed: Mapping[str, object], min_pair_rate: float) -> Self:
        """The pairs above the threshold whose both pods are placed on a known node, numbered
        in the order of `placed`, all in numpy."""
        number = {pod: index for index, pod in enumerate(traffic.pods)}
        placed_as = np.full(len(traffic.pods), -1, np.int64)  # traffic's number -> placed's
        known = np.fromiter(map(number.get, placed, repeat(-1)), np.int64, len(placed))
        placed_as[known[known >= 0]] = np.flatnonzero(known >= 0)
        first, second = placed_as[traffic.first], placed_as[traffic.second]
        rate = traffic.rate
        kept = (rate >= min_pair_rate) & (rate > 0) & (first >= 0) & (second >= 0)
        first, second, rate = first[kept], second[kept], rate[kept]
        paired = np.zeros(len(placed), np.bool_)
        paired[first] = paired[second] = True
        present = np.flatnonzero(paired)  # the placed pods with a pair, in the order of `placed`
        names = tuple(placed)
        pods = tuple(names[position] for position in present.tolist())
        renumbered = np.cumsum(paired) - 1
        first, second = renumbered[first], renumbered[second]
        either_way = np.concatenate([first, second])
        by_source = stable_order(either_way)
        source = either_way[by_source]
        target = np.concatenate([second, first])[by_source]
        rate = np.concatenate([rate, rate])[by_source]
        start = np.zeros(len(pods) + 1, np.int64)
        np.cumsum(np.bincount(source, minlength=len(pods)), out=start[1:])
        once = by_source < len(first)  # from `first`: the pod whose key sorts first (PodTraffic)
        index = {pod: position for position, pod in enumerate(pods)}
        return cls(pods, index, source, target, rate, once, start)

    def peers_of(self, pod: str) -> dict[str, float]:
        """Peer -> rate, in the order of the arrays."""
        position = self.index[pod]
        pairs = slice(self.start[position], self.start[position + 1])
        return dict(
            zip(
                map(self.pods.__getitem__, self.target[pairs].tolist()),
                self.rate[pairs].tolist(),
                strict=True,
            )
        )

    def domain_ids(self, locations: Mapping[str, Location], levels: int) -> DomainNumbers:
        """Numbers for the pods' domains at every level. Worked out once per distinct location:
        a cluster has far fewer of those (one per node) than pods."""
        numbered: dict[Location, int] = {}
        location_of = np.fromiter(
            (numbered.setdefault(locations[pod], len(numbered)) for pod in self.pods),
            np.int64,
            len(self.pods),
        )
        by_location = np.full((levels, len(numbered)), -1, np.int64)
        domains: dict[DomainKey, int] = {}
        for location, number in numbered.items():
            for level in range(levels):
                value = location[level]
                if value is None:
                    break
                key = cast(DomainKey, location[: level + 1])  # no None: checked on the way
                by_location[level, number] = domains.setdefault(key, len(domains))
        return DomainNumbers(by_location[:, location_of], list(domains))

    def traffic_per_pod(self) -> Floats:
        """Each pod's total rate, summed in the order of its peers."""
        return group_sums(self.source, self.rate, len(self.pods))

    def splits(self, numbers: DomainNumbers, source: Indices, target: Indices) -> Indices:
        """`first_split` of every pair (source[i], target[i]): domain numbers name the whole
        prefix of a location, so the pods share exactly the levels, widest first, whose numbers
        match."""
        here, there = numbers.of_pod[:, source], numbers.of_pod[:, target]
        shared: Indices = ((here == there) & (here >= 0)).sum(axis=0)
        return shared
