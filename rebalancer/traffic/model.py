"""Traffic as the cost models read it, and the one way it can be missing: a TrafficFailure.

Every way the data can be wrong ends in a `TrafficFailure`, never an exception that escapes: a
controller that plans on a half-read or stale answer evicts on doubt, which must never happen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Literal

import msgspec
import numpy as np

from rebalancer.arrays import Floats, Indices, group_sums, unique_first_seen

FailureReason = Literal[
    "unreachable", "timeout", "bad-query", "bad-response", "empty", "stale", "invalid-value"
]


@dataclass(frozen=True)
class TrafficFailure:
    """Why there is no usable traffic this cycle; any failure means no moves."""

    reason: FailureReason
    detail: str


WorkloadName = tuple[str, str]
"""(namespace, name) of a workload, as a workload-level answer names it."""

EndpointNames = tuple[str, str, str, str]
"""A series' source namespace and name, then its destination's, as its labels give them; a
series missing one of them (an empty text) names no pair. A plain tuple: an answer has up to a
million, and a named tuple took several times longer to build."""


class Sample(msgspec.Struct, frozen=True, gc=False):
    """A Struct: an answer has up to a million, made in C, where a named tuple's constructor
    runs Python code."""

    labels: tuple[str, ...]
    """The values of the labels the answer was read for, in their order; "" where absent."""
    value: float


@dataclass
class PodTraffic:
    """Undirected rates between pods, each pair once, as arrays of pod numbers, so the graph
    takes them as they are instead of looking every pod's key up again.

    A pair's two numbers are in the order of their keys, and pairs in the order the answer first
    named them, so every sum over them runs in a fixed order."""

    pods: tuple[str, ...] = ()
    """The keys the numbers below stand for."""
    first: Indices = field(default_factory=lambda: np.zeros(0, np.int64))
    second: Indices = field(default_factory=lambda: np.zeros(0, np.int64))
    rate: Floats = field(default_factory=lambda: np.zeros(0))
    unmatched: Counter[str] = field(default_factory=Counter)
    """Why series were dropped: `unknown-pod`, `self`, `unlabelled`."""
    series: int = 0
    forward: Floats = field(default_factory=lambda: np.zeros(0))
    """Of each pair's rate, what its series named from `first` to `second`; the rest went the
    other way. Who calls whom, where the source says: routing sends a client's calls to its
    Service's endpoints by the client's own zone."""

    @classmethod
    def of(
        cls,
        rates: Mapping[tuple[str, str], float],
        unmatched: Counter[str] | None = None,
        series: int | None = None,
    ) -> PodTraffic:
        """From a rate per pod pair; a pair given both ways round is added up. Unless told, the
        number of series is that of the pairs."""
        pods = tuple(dict.fromkeys(chain.from_iterable(rates)))
        number = {pod: index for index, pod in enumerate(pods)}
        count = len(rates)
        ends = np.fromiter(map(number.__getitem__, chain.from_iterable(rates)), np.int64, 2 * count)
        values = np.fromiter(rates.values(), np.float64, count)
        traffic = cls.undirected(
            pods,
            ends[0::2],
            ends[1::2],
            values,
            unmatched=unmatched or Counter(),
            series=series or 0,
        )
        if series is None:
            traffic.series = traffic.pair_count()
        return traffic

    @classmethod
    def undirected(
        cls,
        pods: tuple[str, ...],
        sources: Indices,
        destinations: Indices,
        values: Floats,
        *,
        unmatched: Counter[str],
        series: int,
    ) -> PodTraffic:
        """Directed rates (pods numbered as in `pods`) added up per pair. np.bincount adds in
        input order, as the dict did: a pair's rate is its first series plus its second."""
        rank = np.empty(len(pods), np.int64)
        rank[np.argsort(np.array(pods, dtype=object), kind="stable")] = np.arange(len(pods))
        swapped = rank[sources] > rank[destinations]
        first = np.where(swapped, destinations, sources)
        second = np.where(swapped, sources, destinations)
        pair_keys, first_seen, pair_of = unique_first_seen(first * len(pods) + second)
        summed = group_sums(pair_of, values, len(pair_keys))
        forward = group_sums(pair_of, np.where(swapped, 0.0, values), len(pair_keys))
        order = np.argsort(first_seen)  # positions, each once: any sort is stable
        kept = first_seen[order]
        return cls(
            pods, first[kept], second[kept], summed[order], unmatched, series, forward[order]
        )

    @property
    def rates(self) -> dict[tuple[str, str], float]:
        """Pair of keys (in order) -> rate, for readers that want names, not numbers."""
        pods = self.pods
        return {
            (pods[a], pods[b]): rate
            for a, b, rate in zip(
                self.first.tolist(), self.second.tolist(), self.rate.tolist(), strict=True
            )
        }

    def pair_count(self) -> int:
        return len(self.rate)


@dataclass
class WorkloadTraffic:
    """Rates between workloads, kept per pair of workloads rather than spread over their pods:
    a workload answer of 46k series means 2.8M pod pairs at 100k pods, while every figure the
    planner needs can be counted per workload (see cost/workload_pairs.py)."""

    rates: dict[tuple[str, str], float] = field(default_factory=dict)
    """Workload pair (names as `str(WorkloadRef)`, in order) -> the rate of each pair of their
    pods: every pod pair of the two carries the same share. A workload's pairs among its own
    pods are under (name, name)."""
    members: dict[str, list[str]] = field(default_factory=dict)
    """Workload name -> the keys of its pods that are on a node."""
    unmatched: Counter[str] = field(default_factory=Counter)
    """Why series were dropped: `unknown-workload`, `unlabelled`, or `self` (a single pod's
    workload talking to itself)."""
    series: int = 0
    forward: dict[tuple[str, str], float] = field(default_factory=dict)
    """Of each pair's rate, what its series named from the first workload's pods to the
    second's; the rest went the other way (half of it, within one workload). Who calls whom:
    routing sends a client's calls to its Service's endpoints by the client's own zone."""

    def pair_count(self) -> int:
        """Workload pairs, not pod pairs."""
        return len(self.rates)


AnswerOrFailure = list[Sample] | TrafficFailure
Traffic = PodTraffic | WorkloadTraffic
"""What an answer gives: pod pairs' rates, or workload pairs' for workload-level series."""
