"""Pod-to-pod traffic: the PromQL we send, a pure parser of Prometheus' answer, and the HTTP edge.

Every way the data can be wrong ends in a `TrafficFailure`, never an exception that escapes: a
controller that plans on a half-read or stale answer evicts on doubt, which must never happen.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any, Literal, NamedTuple

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from rebalancer.errors import InputError, one_line
from rebalancer.files import read_json
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
"""A series' source namespace and name, then its destination's, as its labels give them. A
plain tuple: an answer has up to a million, and a named tuple took several times longer to
build."""


class Sample(NamedTuple):
    """A named tuple, not a dataclass: an answer has up to a million, built faster this way."""

    labels: Mapping[str, str]
    value: float


@dataclass
class PodTraffic:
    """Undirected rates between pods in the snapshot, plus what could not be mapped."""

    rates: dict[tuple[str, str], float] = field(default_factory=dict)
    unmatched: Counter[str] = field(default_factory=Counter)
    """Why series were dropped: `unknown-pod`, `self`, `unlabelled`."""
    series: int = 0


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


def parse_vector(response: Any) -> list[Sample] | TrafficFailure:
    """Parse a decoded `/api/v1/query` response body into samples; pure, for recorded JSON too."""
    if not isinstance(response, Mapping):
        return TrafficFailure("bad-response", "response is not a JSON object")
    if response.get("status") != "success":
        error_type = response.get("errorType", "unknown")
        reason: FailureReason = "bad-query" if error_type == "bad_data" else "bad-response"
        error_text = one_line(response.get("error", "no error text"), _DETAIL_LIMIT)
        return TrafficFailure(reason, f"{one_line(error_type, _DETAIL_LIMIT)}: {error_text}")
    data = response.get("data")
    if not isinstance(data, Mapping) or not isinstance(data.get("result"), list):
        return TrafficFailure("bad-response", "data.result is missing")
    if data.get("resultType") not in ("vector", "scalar"):  # a tuple: the type may be unhashable
        return TrafficFailure(
            "bad-response",
            f"expected a vector, got {one_line(data.get('resultType'), _DETAIL_LIMIT)}",
        )
    result = data["result"]
    if data["resultType"] == "scalar":
        result = [{"metric": {}, "value": result}]
    samples: list[Sample] = []
    for index, entry in enumerate(result):
        try:
            labels = entry["metric"]
            _timestamp, raw = entry["value"]
            value = float(raw)
        except (KeyError, TypeError, ValueError):
            return TrafficFailure("bad-response", f"data.result[{index}] is not a sample")
        if type(labels) is not dict or not _all_text(labels):
            return TrafficFailure(
                "bad-response", f"data.result[{index}].metric: labels must be text"
            )
        if not 0.0 <= value < math.inf:  # also false for NaN
            return TrafficFailure("invalid-value", f"data.result[{index}] has value {raw!r}")
        samples.append(Sample(labels, value))
    return samples


def _all_text(labels: dict[Any, Any]) -> bool:
    """Whether every label value is a string. str.join checks it in C: a generator over the
    values took half the time of parsing a million-series answer."""
    try:
        "".join(labels.values())
    except TypeError:
        return False
    return True


def _endpoint_reader(queries: Queries) -> Callable[[Mapping[str, str]], EndpointNames | None]:
    """Reads a series' endpoints from its labels, or None when one is missing or empty. One
    itemgetter call per series: a million series made four `get` calls each cost a second."""
    src_ns, src_name, dst_ns, dst_name = queries.endpoint_labels
    if queries.combined_names:

        def read_combined(labels: Mapping[str, str]) -> EndpointNames | None:
            src_namespace, _, src_pod = labels.get(src_name, "").partition("/")
            dst_namespace, _, dst_pod = labels.get(dst_name, "").partition("/")
            names = (src_namespace, src_pod, dst_namespace, dst_pod)
            return names if all(names) else None

        return read_combined
    names_of = itemgetter(src_ns, src_name, dst_ns, dst_name)

    def read_split(labels: Mapping[str, str]) -> EndpointNames | None:
        try:
            names: EndpointNames = names_of(labels)
        except KeyError:
            return None
        return names if all(names) else None

    return read_split


def map_series(
    samples: list[Sample],
    endpoints_of: list[EndpointNames | None],
    queries: Queries,
    snapshot: Snapshot,
) -> PodTraffic | WorkloadTraffic:
    """Attach rates to the snapshot's pods, or, for workload series, to their workloads.
    `endpoints_of` holds each sample's endpoints, read once for this and the duplicate check."""
    if queries.granularity == "pod":
        return _map_pod_series(samples, endpoints_of, snapshot)
    return _map_workload_series(samples, endpoints_of, snapshot)


def _map_workload_series(
    samples: list[Sample], endpoints_of: list[EndpointNames | None], snapshot: Snapshot
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
        if endpoints is None:
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
    samples: list[Sample], endpoints_of: list[EndpointNames | None], snapshot: Snapshot
) -> PodTraffic:
    """Pods are found namespace first, then name: for a million series, two lookups by text took
    1.4 s against 2.3 s for one by a (namespace, name) tuple, hashed afresh for every series.
    The keys are the snapshot's own string objects, so later lookups by them (a million pairs,
    twice each) match by identity instead of comparing copies scattered in memory."""
    traffic = PodTraffic(series=len(samples))
    pod_keys: dict[str, dict[str, str]] = {}
    for key, pod in snapshot.pods.items():
        pod_keys.setdefault(pod.namespace, {})[pod.name] = key
    nowhere: dict[str, str] = {}
    rates = traffic.rates
    for sample, endpoints in zip(samples, endpoints_of, strict=True):
        if endpoints is None:
            traffic.unmatched["unlabelled"] += 1
            continue
        namespace_a, name_a, namespace_b, name_b = endpoints
        a = pod_keys.get(namespace_a, nowhere).get(name_a)
        b = pod_keys.get(namespace_b, nowhere).get(name_b)
        if a is None or b is None:
            traffic.unmatched["unknown-pod"] += 1
        elif a == b:
            traffic.unmatched["self"] += 1
        else:
            pair = (a, b) if a < b else (b, a)
            rates[pair] = rates.get(pair, 0.0) + sample.value
    return traffic


def judge_freshness(samples: list[Sample], max_age_seconds: float) -> TrafficFailure | None:
    if not samples:
        return TrafficFailure("stale", "no raw samples at all behind the traffic query")
    age = samples[0].value
    if age > max_age_seconds:
        return TrafficFailure("stale", f"newest sample {age:.0f}s old, max {max_age_seconds:g}s")
    return None


def read_traffic(
    traffic_samples: list[Sample] | TrafficFailure,
    freshness_samples: list[Sample] | TrafficFailure | None,
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
    read_endpoints = _endpoint_reader(queries)
    endpoints = [read_endpoints(sample.labels) for sample in traffic_samples]
    duplicated = _duplicated_pairs(endpoints)
    if duplicated:
        return TrafficFailure("bad-response", f"{duplicated} duplicate series for the same pair")
    traffic = map_series(traffic_samples, endpoints, queries, snapshot)
    if not traffic.rates:
        return TrafficFailure(
            "empty", f"none of {traffic.series} series matched a pod in the snapshot"
        )
    return traffic


def _duplicated_pairs(endpoints: list[EndpointNames | None]) -> int:
    """An aggregated query returns each pair once; more means the labels do not name pairs."""
    if len(set(endpoints)) == len(endpoints):  # the usual answer, checked at C speed
        return 0
    seen = Counter(endpoints)
    return sum(count - 1 for endpoints, count in seen.items() if endpoints and count > 1)


def load_response_file(path: Path) -> list[Sample] | TrafficFailure:
    """A saved `/api/v1/query` answer (`curl .../api/v1/query?query=...`), parsed as if live."""
    parsed = parse_vector(read_json(path, "traffic file"))
    if isinstance(parsed, TrafficFailure) and parsed.reason == "bad-response":
        raise InputError(f"{path}: not a Prometheus query response ({parsed.detail})")
    return parsed


class PrometheusReader:
    """The HTTP edge: sends the queries through prometheus-api-client, classifies what went wrong,
    and hands every answer to the same pure parser that reads recorded files."""

    def __init__(self, url: str, timeout_seconds: float) -> None:
        self.url = url
        self.timeout_seconds = timeout_seconds
        # One quick retry for a dropped connection or a gateway error, none for a slow answer:
        # asking again would only double the wait (and hide the timeout behind a generic
        # ConnectionError). A longer wait belongs to the next cycle.
        retry = Retry(total=1, read=False, backoff_factor=0.2, status_forcelist=(502, 503, 504))
        self._client = PrometheusConnect(url=url, retry=retry, timeout=timeout_seconds)

    def query(self, promql: str) -> list[Sample] | TrafficFailure:
        try:
            result = self._client.custom_query(promql)
        except requests.JSONDecodeError:  # a RequestException too, so it must come first
            return TrafficFailure("bad-response", f"{self.url}: the answer is not JSON")
        except (KeyError, TypeError):
            return TrafficFailure("bad-response", f"{self.url}: the answer has no data.result")
        except requests.Timeout:
            return TrafficFailure("timeout", f"{self.url}: no answer in {self.timeout_seconds:g}s")
        except requests.RequestException as error:
            return TrafficFailure("unreachable", f"{self.url}: {type(error).__name__}")
        except PrometheusApiClientException as error:
            return _classify_http_error(self.url, str(error))
        return parse_vector({"status": "success", "data": _as_data(result)})


def _as_data(result: Any) -> dict[str, Any]:
    """custom_query returns only `data.result`; a scalar is a bare [timestamp, value] pair."""
    is_scalar = isinstance(result, list) and len(result) == 2 and not isinstance(result[0], dict)
    return {"resultType": "scalar" if is_scalar else "vector", "result": result}


def _classify_http_error(url: str, message: str) -> TrafficFailure:
    status = re.search(r"HTTP Status Code (\d+)", message)
    code = int(status.group(1)) if status else 0
    error_text = re.search(r'"error"\s*:\s*"((?:[^"\\]|\\.)*)"', message)
    detail = error_text.group(1) if error_text else message[:200]
    if code in {400, 422}:
        return TrafficFailure("bad-query", f"{url} refused the query (HTTP {code}): {detail}")
    return TrafficFailure("unreachable", f"{url} answered HTTP {code}: {detail}")
