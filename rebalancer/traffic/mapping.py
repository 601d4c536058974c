"""Samples to traffic between the snapshot's pods: names mapped, duplicates and strangers dropped,
freshness judged.
"""

from __future__ import annotations

from collections import Counter
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import cast

import numpy as np

from rebalancer.arrays import Indices
from rebalancer.cluster.model import Snapshot
from rebalancer.traffic.model import (
    AnswerOrFailure,
    EndpointNames,
    PodTraffic,
    Sample,
    Traffic,
    TrafficFailure,
    WorkloadName,
    WorkloadTraffic,
)
from rebalancer.traffic.queries import Queries


def _endpoints(samples: list[Sample], queries: Queries) -> list[EndpointNames]:
    """Each series' endpoints. Where a label names each of the four, they are the label values
    as read, taken in C rather than by a call per series."""
    if queries.combined_names:
        return [_split_names(*sample.labels) for sample in samples]
    return cast(list[EndpointNames], list(map(_LABELS_OF, samples)))


def _split_names(source: str, destination: str) -> EndpointNames:
    """From "namespace/name" labels; a label without the slash leaves the name empty."""
    source_namespace, _, source_pod = source.partition("/")
    destination_namespace, _, destination_pod = destination.partition("/")
    return source_namespace, source_pod, destination_namespace, destination_pod


_LABELS_OF = attrgetter("labels")


def map_series(
    samples: list[Sample],
    endpoints_of: list[EndpointNames],
    queries: Queries,
    snapshot: Snapshot,
) -> PodTraffic | WorkloadTraffic | TrafficFailure:
    """Attach rates to the snapshot's pods, or, for workload series, to their workloads; a
    failure if a pair has more than one series: an aggregated query returns each pair once, so
    more means the labels do not name pairs."""
    if queries.granularity == "pod":
        return _map_pod_series(samples, endpoints_of, snapshot)
    duplicated = _duplicated_pairs(endpoints_of)
    if duplicated:
        return _duplicates_failure(duplicated)
    return _map_workload_series(samples, endpoints_of, snapshot)


def _duplicates_failure(duplicated: int) -> TrafficFailure:
    return TrafficFailure("bad-response", f"{duplicated} duplicate series for the same pair")


def _map_workload_series(
    samples: list[Sample], endpoints_of: list[EndpointNames], snapshot: Snapshot
) -> WorkloadTraffic:
    """A series' rate is split evenly over the pod pairs of its two workloads, as a share per
    pair. A workload the answer names may hold pods of several kinds (a Deployment and a
    StatefulSet of one name): each kind is a workload of its own in the figures, sharing the
    series' pairs."""
    traffic = WorkloadTraffic(series=len(samples))
    named: dict[WorkloadName, dict[str, list[str]]] = {}
    for key, pod in snapshot.pods.items():
        if pod.workload is not None and pod.node_name:
            name = (pod.workload.namespace, pod.workload.name)
            named.setdefault(name, {}).setdefault(str(pod.workload), []).append(key)
    for by_kind in named.values():
        traffic.members.update(by_kind)
    rates, forward = traffic.rates, traffic.forward
    for sample, endpoints in zip(samples, endpoints_of, strict=True):
        if not all(endpoints):
            traffic.unmatched["unlabelled"] += 1
            continue
        kinds_a, kinds_b = named.get(endpoints[:2]), named.get(endpoints[2:])
        if not kinds_a or not kinds_b:
            traffic.unmatched["unknown-workload"] += 1
            continue
        sizes = sum(map(len, kinds_a.values())) * sum(map(len, kinds_b.values()))
        if kinds_a is kinds_b and sizes == 1:
            traffic.unmatched["self"] += 1  # one pod talking to itself: no pair at all
            continue
        share = sample.value / sizes
        for a, pods_a in kinds_a.items():
            for b in kinds_b:
                if a == b:  # both ends of every pair in one workload: met once each way round
                    if len(pods_a) > 1:
                        rates[a, a] = rates.get((a, a), 0.0) + 2 * share
                        forward[a, a] = forward.get((a, a), 0.0) + share
                else:
                    pair = (a, b) if a < b else (b, a)
                    rates[pair] = rates.get(pair, 0.0) + share
                    if a < b:  # `a` is the series' source
                        forward[pair] = forward.get(pair, 0.0) + share
    return traffic


def _map_pod_series(
    samples: list[Sample], endpoints: list[EndpointNames], snapshot: Snapshot
) -> PodTraffic | TrafficFailure:
    """Pods are found namespace first, then name: a lookup by a (namespace, name) tuple hashes
    the tuple afresh for every series. They are numbered in the snapshot's order, and the
    lookups run in C, through map(), and are judged all at once in numpy. Duplicates are found
    by sorting these numbers, among series between known pods only (the others are dropped
    anyway), which is far cheaper than a set of a million label tuples."""
    numbers: dict[str, dict[str, int]] = {}
    for number, pod in enumerate(snapshot.pods.values()):
        numbers.setdefault(pod.namespace, {})[pod.name] = number
    count = len(samples)
    labelled = np.fromiter(map(all, endpoints), np.bool_, count)
    source = _pod_numbers(numbers, endpoints, 0, count)
    destination = _pod_numbers(numbers, endpoints, 2, count)
    known = (source >= 0) & (destination >= 0)
    directed = np.sort(source[known] * len(snapshot.pods) + destination[known])
    duplicated = int(np.count_nonzero(directed[1:] == directed[:-1]))
    if duplicated:
        return _duplicates_failure(duplicated)
    between_two = known & (source != destination)
    unmatched = Counter(
        {
            "unlabelled": count - int(labelled.sum()),
            "unknown-pod": int((labelled & ~known).sum()),
            "self": int((known & ~between_two).sum()),
        }
    )
    values = np.fromiter(map(_VALUE_OF, samples), np.float64, count)
    return PodTraffic.undirected(
        tuple(snapshot.pods),
        source[between_two],
        destination[between_two],
        values[between_two],
        unmatched=+unmatched,  # only the reasons that occurred, as a count per series made them
        series=count,
    )


_VALUE_OF = attrgetter("value")
_NOWHERE: dict[str, int] = {}


def _pod_numbers(
    numbers: dict[str, dict[str, int]], endpoints: list[EndpointNames], first: int, count: int
) -> Indices:
    """The number of the pod named at `first` (namespace) and the next position (name) of each
    series' endpoints; -1 for a pod not in the snapshot, and so for an empty text: no pod has an
    empty namespace or name."""
    namespaces = map(itemgetter(first), endpoints)
    names = map(itemgetter(first + 1), endpoints)
    by_name = map(numbers.get, namespaces, repeat(_NOWHERE))
    return np.fromiter(map(dict.get, by_name, names, repeat(-1)), np.int64, count)


def judge_freshness(samples: list[Sample], max_age_seconds: float) -> TrafficFailure | None:
    if not samples:
        return TrafficFailure("stale", "no raw samples at all behind the traffic query")
    age = samples[0].value
    if age > max_age_seconds:
        return TrafficFailure("stale", f"newest sample {age:.0f}s old, max {max_age_seconds:g}s")
    return None


def read_traffic(
    traffic_samples: AnswerOrFailure,
    freshness_samples: AnswerOrFailure | None,
    queries: Queries,
    snapshot: Snapshot,
    max_age_seconds: float,
) -> Traffic | TrafficFailure:
    """Turn parsed answers into pod traffic, or the first reason this cycle must not act."""
    if isinstance(traffic_samples, TrafficFailure):
        return traffic_samples
    if isinstance(freshness_samples, TrafficFailure):
        return freshness_samples
    if not traffic_samples:
        return TrafficFailure("empty", "the traffic query returned no series")
    if freshness_samples is not None:
        stale = judge_freshness(freshness_samples, max_age_seconds)
        if stale is not None:
            return stale
    endpoints = _endpoints(traffic_samples, queries)
    traffic = map_series(traffic_samples, endpoints, queries, snapshot)
    if isinstance(traffic, TrafficFailure):
        return traffic
    if not traffic.pair_count():
        return TrafficFailure(
            "empty", f"none of {traffic.series} series matched a pod in the snapshot"
        )
    return traffic


def _duplicated_pairs(endpoints: list[EndpointNames]) -> int:
    if len(set(endpoints)) == len(endpoints):  # the usual answer, checked at C speed
        return 0
    seen = Counter(endpoints)
    return sum(count - 1 for names, count in seen.items() if all(names) and count > 1)
