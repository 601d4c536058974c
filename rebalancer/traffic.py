"""Pod-to-pod traffic: the PromQL we send, a pure parser of Prometheus' answer, and the HTTP edge.

Every way the data can be wrong ends in a `TrafficFailure`, never an exception that escapes: a
controller that plans on a half-read or stale answer evicts on doubt, which must never happen.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any, Literal, cast

import msgspec
import numpy as np
import requests
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from rebalancer.errors import InputError, one_line, where_and_what
from rebalancer.files import read_bytes
from rebalancer.graph import Floats, Indices, group_sums, unique_first_seen
from rebalancer.policy import CustomSource, HubbleSource, IstioSource
from rebalancer.snapshot import Snapshot

TrafficSourcePolicy = HubbleSource | IstioSource | CustomSource
FailureReason = Literal[
    "unreachable", "timeout", "bad-query", "bad-response", "empty", "stale", "invalid-value"
]

_DETAIL_LIMIT = 200
"""Characters of Prometheus' own text kept in a failure's detail."""
_ISTIO_BYTE_METRICS = (
    "istio_tcp_sent_bytes_total|istio_tcp_received_bytes_total"
    "|istio_request_bytes_sum|istio_response_bytes_sum"
)


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
    """A Struct: an answer has up to a million, and a million took 0.07 s to build, against
    0.7 s or more as named tuples (whose constructor runs Python code)."""

    labels: tuple[str, ...]
    """The values of the labels the answer was read for, in their order; "" where absent."""
    value: float


@dataclass
class PodTraffic:
    """Undirected rates between pods, each pair once, as arrays of pod numbers. A million pairs
    were a dict of key pairs, which the graph then numbered by looking every key up again (1.25 s
    of its 3.5 s at 100k pods; the graph now takes 1.0 to 1.3 s).

    A pair's two numbers are in the order of their keys, and pairs in the order the answer first
    named them, so every sum over them runs as it did over the dict this replaced."""

    pods: tuple[str, ...] = ()
    """The keys the numbers below stand for."""
    first: Indices = field(default_factory=lambda: np.zeros(0, np.int64))
    second: Indices = field(default_factory=lambda: np.zeros(0, np.int64))
    rate: Floats = field(default_factory=lambda: np.zeros(0))
    unmatched: Counter[str] = field(default_factory=Counter)
    """Why series were dropped: `unknown-pod`, `self`, `unlabelled`."""
    series: int = 0

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
        order = np.argsort(first_seen)  # positions, each once: any sort is stable
        kept = first_seen[order]
        return cls(pods, first[kept], second[kept], summed[order], unmatched, series)

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
    planner needs can be counted per workload (see workload_graph)."""

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

    def pair_count(self) -> int:
        """Workload pairs, not pod pairs."""
        return len(self.rates)


AnswerOrFailure = list[Sample] | TrafficFailure
Traffic = PodTraffic | WorkloadTraffic
"""What an answer gives: pod pairs' rates, or workload pairs' for workload-level series."""


@dataclass(frozen=True)
class Queries:
    traffic: str
    freshness: str
    granularity: Literal["pod", "workload"]
    endpoint_labels: tuple[str, str, str, str]
    """Labels for source namespace, source name, destination namespace, destination name."""
    combined_names: bool = False
    """Source and destination are single labels holding "namespace/name"."""

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels an answer is read for: the endpoint labels that are named."""
        return tuple(label for label in self.endpoint_labels if label)


def build_queries(source: TrafficSourcePolicy) -> Queries:
    """The single aggregated query per cycle, and the cheap one that dates its newest sample."""
    window = source.window
    if isinstance(source, HubbleSource):
        extra = f",{source.matchers}" if source.matchers else ""
        if source.label_style == "split":
            labels = ("source_namespace", "source_pod", "destination_namespace", "destination_pod")
            selector = f'{source.metric}{{source_pod!="",destination_pod!=""{extra}}}'
        else:
            labels = ("", "source", "", "destination")
            selector = f'{source.metric}{{source!="",destination!=""{extra}}}'
        grouping = ", ".join(label for label in labels if label)
        return Queries(
            traffic=f"sum by ({grouping}) (rate({selector}[{window}]))",
            freshness=f"time() - max(timestamp({selector}))",
            granularity="pod",
            endpoint_labels=labels,
            combined_names=source.label_style == "combined",
        )
    if isinstance(source, IstioSource):
        labels = (
            "source_workload_namespace",
            "source_workload",
            "destination_workload_namespace",
            "destination_workload",
        )
        selector = f'{{__name__=~"{_ISTIO_BYTE_METRICS}",reporter="{source.reporter}"}}'
        return Queries(
            traffic=f"sum by ({', '.join(labels)}) (rate({selector}[{window}]))",
            freshness=f"time() - max(timestamp({selector}))",
            granularity="workload",
            endpoint_labels=labels,
        )
    return Queries(
        traffic=source.query,
        freshness=source.freshness_query,
        granularity=source.granularity,
        endpoint_labels=(
            source.source_namespace_label,
            source.source_label,
            source.destination_namespace_label,
            source.destination_label,
        ),
    )


class _Data(msgspec.Struct):
    resultType: str  # noqa: N815 - Prometheus' own name
    result: msgspec.Raw
    """Decoded in a second step, once `resultType` says which shape it has."""


class _Answer(msgspec.Struct):
    """The envelope of every `/api/v1/query` answer, an error one included."""

    status: str = ""
    data: _Data | None = None
    errorType: str = "unknown"  # noqa: N815
    error: str = "no error text"


_ANSWER = msgspec.json.Decoder(_Answer)
_SCALAR = msgspec.json.Decoder(tuple[float, str])


@functools.cache
def _series_decoder(labels: tuple[str, ...], *, lax: bool) -> msgspec.json.Decoder[list[Any]]:
    """Decodes a vector's series into structs holding only `labels`, each "" when absent.
    Skipping every other label in C, with no dict per series, decoded a million-series answer
    in 0.7 s, where json.loads took 2.0 s and orjson 1.8 s. `lax` reads each value's text
    ("1.5") as a float in C, in the same pass; it refuses "+Inf" and texts Python's float()
    reads but JSON does not ("1_000", " 1"), and accepts numbers where Prometheus sends text."""
    fields = {f"label_{index}": label for index, label in enumerate(labels)}
    metric = msgspec.defstruct(
        "Metric", [(name, str, "") for name in fields], rename=fields, gc=False
    )
    value = tuple[float, float] if lax else tuple[float, str]
    series = msgspec.defstruct("Series", [("metric", metric), ("value", value)], gc=False)
    return msgspec.json.Decoder(list[series], strict=not lax)  # type: ignore[valid-type]


def parse_answer(body: bytes, labels: tuple[str, ...] = ()) -> AnswerOrFailure:
    """Parse a `/api/v1/query` answer body into samples carrying the values of `labels`; pure,
    for recorded files too. Anything but a well-formed vector (or scalar) of non-negative
    finite rates is a failure naming where the answer went wrong."""
    try:
        answer = _ANSWER.decode(body)
    except msgspec.ValidationError as error:  # a DecodeError too, so it must come first
        return TrafficFailure("bad-response", _located(error, "response"))
    except msgspec.DecodeError as error:
        return TrafficFailure("bad-response", f"not valid JSON ({one_line(error, _DETAIL_LIMIT)})")
    if answer.status != "success":
        reason: FailureReason = "bad-query" if answer.errorType == "bad_data" else "bad-response"
        error_text = one_line(answer.error, _DETAIL_LIMIT)
        return TrafficFailure(reason, f"{one_line(answer.errorType, _DETAIL_LIMIT)}: {error_text}")
    if answer.data is None:
        return TrafficFailure("bad-response", "data.result is missing")
    if answer.data.resultType not in ("vector", "scalar"):
        return TrafficFailure(
            "bad-response",
            f"expected a vector, got {one_line(answer.data.resultType, _DETAIL_LIMIT)}",
        )
    if answer.data.resultType == "vector":
        read_fast = _vector_read_fast(answer.data.result, labels)
        if read_fast is not None:
            return read_fast
    try:
        if answer.data.resultType == "scalar":
            label_values: list[tuple[str, ...]] = [()]
            texts = [_SCALAR.decode(answer.data.result)[1]]
        else:
            decoder = _series_decoder(tuple(dict.fromkeys(labels)), lax=False)
            series = decoder.decode(answer.data.result)
            label_values = list(map(_label_reader(labels), map(_METRIC, series)))
            texts = list(map(_SECOND, map(_VALUE, series)))
    except msgspec.ValidationError as error:
        return TrafficFailure("bad-response", _located(error, "data.result"))
    rates = _rates_one_by_one(texts)
    if isinstance(rates, TrafficFailure):
        return rates
    return list(map(Sample, label_values, rates))


_METRIC, _VALUE, _SECOND = attrgetter("metric"), attrgetter("value"), itemgetter(1)


def _vector_read_fast(result: msgspec.Raw, labels: tuple[str, ...]) -> list[Sample] | None:
    """The samples, with the values read as floats while decoding and checked in numpy; None
    when that finds anything wrong, and the answer is then read again strictly, to name the
    fault in the answer's own words. Converting a million values' texts one by one took 0.4 s."""
    try:
        series = _series_decoder(tuple(dict.fromkeys(labels)), lax=True).decode(result)
    except msgspec.ValidationError:
        return None
    rates = list(map(_SECOND, map(_VALUE, series)))
    checked = np.fromiter(rates, np.float64, len(rates))
    if not bool(((checked >= 0) & (checked < math.inf)).all()):  # NaN fails both
        return None
    return list(map(Sample, map(_label_reader(labels), map(_METRIC, series)), rates))


def _rates_one_by_one(texts: list[str]) -> list[float] | TrafficFailure:
    """The values' texts as non-negative finite rates, or the first, in order, that is not one."""
    rates = []
    for index, raw in enumerate(texts):
        try:
            value = float(raw)
        except ValueError:
            return TrafficFailure("bad-response", f"data.result[{index}] has value {raw!r}")
        if not 0.0 <= value < math.inf:  # also false for NaN
            return TrafficFailure("invalid-value", f"data.result[{index}] has value {raw!r}")
        rates.append(value)
    return rates


def _label_reader(labels: tuple[str, ...]) -> Callable[[Any], tuple[str, ...]]:
    """A series' label values in the order of `labels`, from a struct that holds each distinct
    label once (a custom query may name one label twice, as both ends' namespace)."""
    distinct = list(dict.fromkeys(labels))
    if distinct == list(labels):
        return msgspec.structs.astuple
    pick = itemgetter(*(distinct.index(label) for label in labels))
    return lambda metric: tuple(pick(msgspec.structs.astuple(metric)))


def _located(error: msgspec.ValidationError, root: str) -> str:
    """The path first, as in every other input error: "data.result[3].metric.pod: expected
    `str`, got `int`"."""
    path, problem = where_and_what(error)
    return one_line(f"{root}{path}: {problem}", _DETAIL_LIMIT)


def _endpoints(samples: list[Sample], queries: Queries) -> list[EndpointNames]:
    """Each series' endpoints. Where a label names each of the four, they are the label values
    as read, taken in C: for a million series 0.02 s, where a call per series took 0.11 s."""
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
    rates = traffic.rates
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
                else:
                    pair = (a, b) if a < b else (b, a)
                    rates[pair] = rates.get(pair, 0.0) + share
    return traffic


def _map_pod_series(
    samples: list[Sample], endpoints: list[EndpointNames], snapshot: Snapshot
) -> PodTraffic | TrafficFailure:
    """Pods are found namespace first, then name: a lookup by a (namespace, name) tuple hashes
    the tuple afresh for every series. They are numbered in the snapshot's order, and the
    lookups run in C, through map(), and are judged all at once in numpy. Duplicates are found
    by these numbers, so among series between known pods only (the others are dropped anyway):
    for a million series a set of the label tuples, made first, took 0.34 to 0.39 s, sorting
    the numbers 0.01 to 0.03 s."""
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


def load_response_file(path: Path, queries: Queries) -> AnswerOrFailure:
    """A saved `/api/v1/query` answer (`curl .../api/v1/query?query=...`), parsed as if live."""
    parsed = parse_answer(read_bytes(path, "traffic file"), queries.labels)
    if isinstance(parsed, TrafficFailure) and parsed.reason == "bad-response":
        raise InputError(f"{path}: not a Prometheus query response ({parsed.detail})")
    return parsed


class PrometheusReader:
    """The HTTP edge: asks Prometheus over a session that prometheus-api-client sets up (its
    retry adapter, mounted for the URL), classifies what went wrong, and hands every answer's
    bytes to the same pure parser that reads recorded files. It does not call `custom_query`:
    that decodes the whole answer into dicts with the standard library, which for a million
    series took longer than our typed decoding of only the labels we need."""

    def __init__(self, url: str, timeout_seconds: float) -> None:
        self.url = url
        self.timeout_seconds = timeout_seconds
        # One quick retry for a dropped connection or a gateway error, none for a slow answer:
        # asking again would only double the wait (and hide the timeout behind a generic
        # ConnectionError). A longer wait belongs to the next cycle.
        retry = Retry(total=1, read=False, backoff_factor=0.2, status_forcelist=(502, 503, 504))
        self._session = requests.Session()
        self._client = PrometheusConnect(url=url, retry=retry, session=self._session)

    def read(self, queries: Queries) -> tuple[AnswerOrFailure, AnswerOrFailure | None]:
        """The traffic answer, then, only if it came, the one that dates it."""
        answer = self.query(queries.traffic, queries.labels)
        freshness = None if isinstance(answer, TrafficFailure) else self.query(queries.freshness)
        return answer, freshness

    def query(self, promql: str, labels: tuple[str, ...] = ()) -> AnswerOrFailure:
        try:
            response = self._session.get(
                f"{self._client.url}/api/v1/query",
                params={"query": promql},
                headers=self._client.headers,
                timeout=self.timeout_seconds,
            )
        except requests.Timeout:
            return TrafficFailure("timeout", f"{self.url}: no answer in {self.timeout_seconds:g}s")
        except requests.RequestException as error:
            return TrafficFailure("unreachable", f"{self.url}: {type(error).__name__}")
        if response.status_code != 200:
            return _http_failure(self.url, response.status_code, response.content)
        parsed = parse_answer(response.content, labels)
        if isinstance(parsed, TrafficFailure) and parsed.reason == "bad-response":
            return TrafficFailure("bad-response", f"{self.url}: {parsed.detail}")
        return parsed


def _http_failure(url: str, code: int, body: bytes) -> TrafficFailure:
    try:
        detail = one_line(_ANSWER.decode(body).error, _DETAIL_LIMIT)
    except (msgspec.DecodeError, msgspec.ValidationError):
        detail = one_line(body.decode("utf-8", "replace"), _DETAIL_LIMIT)
    if code in {400, 422}:
        return TrafficFailure("bad-query", f"{url} refused the query (HTTP {code}): {detail}")
    return TrafficFailure("unreachable", f"{url} answered HTTP {code}: {detail}")
