"""Prometheus answers become pod rates, and every bad answer becomes a named failure."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness import builders as b
from rebalancer.clients.inputs import RecordedAnswer
from rebalancer.errors import InputError
from rebalancer.traffic.answer import parse_answer
from rebalancer.traffic.mapping import read_traffic
from rebalancer.traffic.model import PodTraffic, Sample, TrafficFailure, WorkloadTraffic
from rebalancer.traffic.queries import Queries, build_queries
from rebalancer.traffic.settings import CustomSource, HubbleSource, IstioSource
from tests.conftest import snapshot_of

SPLIT = build_queries(HubbleSource(source="hubble"))
SNAPSHOT = snapshot_of(
    [
        b.node("n1", "a"),
        *b.deployment_pods("web", ["n1", "n1"]),
        *b.deployment_pods("api", ["n1"]),
    ]
)
WEB = sorted(key for key in SNAPSHOT.pods if "web" in key)
API = next(key for key in SNAPSHOT.pods if "api" in key)
FRESH = [Sample((), 5.0)]


def vector(*entries: tuple[dict[str, Any], str]) -> dict[str, Any]:
    result = [{"metric": metric, "value": [1.7e9, value]} for metric, value in entries]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def parse(document: Any, queries: Queries = SPLIT) -> list[Sample] | TrafficFailure:
    """An answer as Prometheus sends it: JSON bytes, read for the labels `queries` names."""
    return parse_answer(json.dumps(document).encode(), queries.labels)


def split_labels(source: str, destination: str) -> dict[str, str]:
    return {
        "source_namespace": source.partition("/")[0],
        "source_pod": source.partition("/")[2],
        "destination_namespace": destination.partition("/")[0],
        "destination_pod": destination.partition("/")[2],
    }


def test_hubble_queries_aggregate_once_per_pair() -> None:
    assert SPLIT.traffic == (
        "sum by (source_namespace, source_pod, destination_namespace, destination_pod) "
        '(rate(hubble_flows_processed_total{source_pod!="",destination_pod!=""}[5m]))'
    )
    assert SPLIT.freshness == (
        'time() - max(timestamp(hubble_flows_processed_total{source_pod!="",destination_pod!=""}))'
    )
    combined = build_queries(
        HubbleSource(source="hubble", label_style="combined", matchers='verdict="FORWARDED"')
    )
    assert combined.traffic == (
        "sum by (source, destination) (rate(hubble_flows_processed_total"
        '{source!="",destination!="",verdict="FORWARDED"}[5m]))'
    )


def test_istio_query_sums_byte_metrics_by_workload() -> None:
    queries = build_queries(IstioSource(source="istio", window="2m"))
    assert queries.granularity == "workload"
    assert queries.traffic.startswith(
        "sum by (source_workload_namespace, source_workload, destination_workload_namespace, "
        'destination_workload) (rate({__name__=~"istio_tcp_sent_bytes_total|'
    )
    assert queries.traffic.endswith('reporter="source"}[2m]))')


def test_both_directions_of_a_pair_add_up_on_one_undirected_edge() -> None:
    samples = parse(vector((split_labels(WEB[0], API), "3.5"), (split_labels(API, WEB[0]), "1.5")))
    traffic = read_traffic(samples, FRESH, SPLIT, SNAPSHOT, 60)
    assert isinstance(traffic, PodTraffic)
    assert traffic.rates == {tuple(sorted((WEB[0], API))): 5.0}


def test_pod_traffic_holds_each_pair_once_in_key_order_as_first_named() -> None:
    """Both directions add up in the order given; pairs keep the order they were first named
    in, so every later sum over them runs as it did before they were numbered."""
    traffic = PodTraffic.of({("ns/c", "ns/b"): 2.0, ("ns/b", "ns/a"): 0.5, ("ns/b", "ns/c"): 0.25})
    assert list(traffic.rates.items()) == [(("ns/b", "ns/c"), 2.25), (("ns/a", "ns/b"), 0.5)]
    assert traffic.pair_count() == traffic.series == 2
    assert PodTraffic.of({}).pair_count() == 0


def test_combined_labels_name_pods_as_namespace_slash_name() -> None:
    queries = build_queries(HubbleSource(source="hubble", label_style="combined"))
    samples = parse(
        vector(
            ({"source": WEB[1], "destination": API}, "2"),
            ({"source": "world", "destination": API}, "9"),
        ),
        queries,
    )
    traffic = read_traffic(samples, FRESH, queries, SNAPSHOT, 60)
    assert isinstance(traffic, PodTraffic)
    assert traffic.rates == {tuple(sorted((WEB[1], API))): 2.0}
    assert traffic.unmatched == {"unlabelled": 1}


def istio_labels(source: str, destination: str) -> dict[str, str]:
    return {
        "source_workload_namespace": "default",
        "source_workload": source,
        "destination_workload_namespace": "default",
        "destination_workload": destination,
    }


def test_workload_series_missing_a_label_are_counted_not_paired() -> None:
    """Two such series alike are no duplicate pair: they name no pair at all."""
    queries = build_queries(IstioSource(source="istio"))
    unlabelled = {**istio_labels("web", "api"), "destination_workload": ""}
    answer = vector((istio_labels("web", "api"), "10"), (unlabelled, "1"), (unlabelled, "2"))
    traffic = read_traffic(parse(answer, queries), FRESH, queries, SNAPSHOT, 60)
    assert isinstance(traffic, WorkloadTraffic)
    assert traffic.rates == {("Deployment/default/api", "Deployment/default/web"): 10 / 2}
    assert traffic.unmatched == {"unlabelled": 2}


def test_workload_rates_split_evenly_over_pod_pairs() -> None:
    """Within a workload each pod pair is met both ways round; a lone pod has no pair."""
    queries = build_queries(IstioSource(source="istio"))
    answer = vector(
        (istio_labels("web", "api"), "10"),
        (istio_labels("web", "web"), "4"),
        (istio_labels("api", "api"), "3"),
    )
    traffic = read_traffic(parse(answer, queries), FRESH, queries, SNAPSHOT, 60)
    assert isinstance(traffic, WorkloadTraffic)
    web, api = "Deployment/default/web", "Deployment/default/api"
    assert traffic.rates == {(api, web): 10 / 2, (web, web): 2 * 4 / 4}
    # web called api, the second of their pair: none of it named from api to web
    assert traffic.forward == {(web, web): 4 / 4}
    assert traffic.members == {web: WEB, api: [API]}
    assert traffic.unmatched == {"self": 1}


def custom_queries(*labels: str) -> Queries:
    """A custom source reading source namespace, source, destination namespace and destination
    from these labels."""
    grouping = ", ".join(dict.fromkeys(labels))
    return build_queries(
        CustomSource(
            source="custom",
            query=f"sum by ({grouping}) (x)",
            freshness_query="vector(1)",
            source_namespace_label=labels[0],
            source_label=labels[1],
            destination_namespace_label=labels[2],
            destination_label=labels[3],
        )
    )


def test_custom_source_with_its_own_labels() -> None:
    labels = {"sn": "default", "s": WEB[0].split("/")[1], "dn": "default", "d": API.split("/")[1]}
    queries = custom_queries("sn", "s", "dn", "d")
    traffic = read_traffic(parse(vector((labels, "1")), queries), FRESH, queries, SNAPSHOT, 60)
    assert isinstance(traffic, PodTraffic) and len(traffic.rates) == 1


def test_a_custom_source_may_read_one_namespace_label_for_both_ends() -> None:
    queries = custom_queries("namespace", "client", "namespace", "server")
    labels = {"namespace": "default", "client": WEB[0].split("/")[1], "server": API.split("/")[1]}
    assert parse(vector((labels, "2")), queries) == [
        Sample(("default", labels["client"], "default", labels["server"]), 2.0)
    ]


def test_only_the_queried_labels_are_read_and_their_faults_are_located() -> None:
    """A label the query does not group by is skipped whatever it holds; a queried one that is
    not text is a bad answer whose detail names the series and the label."""
    other = {**split_labels(WEB[0], API), "verdict": 1, "extra": {"nested": True}}
    assert parse(vector((other, "1"))) == [Sample(tuple(split_labels(WEB[0], API).values()), 1.0)]
    wrong = {**split_labels(WEB[0], API), "destination_pod": 7}
    failure = parse(vector((split_labels(WEB[0], API), "1"), (wrong, "1")))
    assert failure == TrafficFailure(
        "bad-response", "data.result[1].metric.destination_pod: expected `str`, got `int`"
    )
    assert parse([1, 2]) == TrafficFailure(
        "bad-response", "response: expected `object`, got `array`"
    )
    assert parse_answer(b"{") == TrafficFailure(
        "bad-response", "not valid JSON (Input data was truncated)"
    )


def test_each_dropped_series_is_counted_once_for_its_reason() -> None:
    """The ends are looked up all at once; every series keeps its own reason and rate."""
    unlabelled = {**split_labels(WEB[0], API), "source_pod": ""}
    samples = parse(
        vector(
            (split_labels(WEB[0], API), "1"),
            (unlabelled, "2"),
            (split_labels("elsewhere/web-1", API), "4"),
            (split_labels(WEB[1], "default/gone-1"), "8"),
            (split_labels(WEB[1], WEB[1]), "16"),
            (split_labels(API, WEB[1]), "32"),
        )
    )
    traffic = read_traffic(samples, FRESH, SPLIT, SNAPSHOT, 60)
    assert isinstance(traffic, PodTraffic)
    assert traffic.unmatched == {"unlabelled": 1, "unknown-pod": 2, "self": 1}
    assert traffic.rates == {(API, WEB[0]): 1.0, (API, WEB[1]): 32.0}
    assert traffic.series == 6


def test_duplicates_are_counted_among_series_between_known_pods() -> None:
    """Found by the pods' numbers: three series of one pair are two too many; repeats of a pod
    not in the snapshot are dropped with it, as every series of it is."""
    known, gone = split_labels(WEB[0], API), split_labels("default/gone-1", API)
    answer = vector((known, "1"), (known, "2"), (gone, "3"), (gone, "4"), (known, "5"))
    failure = read_traffic(parse(answer), FRESH, SPLIT, SNAPSHOT, 60)
    assert failure == TrafficFailure("bad-response", "2 duplicate series for the same pair")
    traffic = read_traffic(
        parse(vector((known, "1"), (gone, "3"), (gone, "4"))), FRESH, SPLIT, SNAPSHOT, 60
    )
    assert isinstance(traffic, PodTraffic)
    assert traffic.unmatched == {"unknown-pod": 2}


def test_series_of_pods_not_in_the_snapshot_are_counted_and_dropped() -> None:
    samples = parse(
        vector((split_labels(WEB[0], API), "1"), (split_labels("default/gone-1", API), "7"))
    )
    traffic = read_traffic(samples, FRESH, SPLIT, SNAPSHOT, 60)
    assert isinstance(traffic, PodTraffic)
    assert traffic.unmatched == {"unknown-pod": 1}
    assert sum(traffic.rates.values()) == 1.0


@pytest.mark.parametrize(
    ("answer", "freshness", "reason"),
    [
        (vector(), FRESH, "empty"),
        (vector((split_labels("default/gone", API), "1")), FRESH, "empty"),
        (vector((split_labels(WEB[0], API), "NaN")), FRESH, "invalid-value"),
        (vector((split_labels(WEB[0], API), "+Inf")), FRESH, "invalid-value"),
        (vector((split_labels(WEB[0], API), "-2")), FRESH, "invalid-value"),
        (vector((split_labels(WEB[0], API), "1")), [Sample((), 600.0)], "stale"),
        (vector((split_labels(WEB[0], API), "1")), [], "stale"),
        (
            vector((split_labels(WEB[0], API), "1"), (split_labels(WEB[0], API), "2")),
            FRESH,
            "bad-response",
        ),
        ({"status": "error", "errorType": "bad_data", "error": "parse error"}, FRESH, "bad-query"),
        (
            {"status": "success", "data": {"resultType": "matrix", "result": []}},
            FRESH,
            "bad-response",
        ),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}}]}},
            FRESH,
            "bad-response",
        ),
        ([1, 2], FRESH, "bad-response"),
        (vector(({**split_labels(WEB[0], API), "source_pod": 1}, "1")), FRESH, "bad-response"),
    ],
    ids=[
        "empty-vector",
        "only-unknown-pods",
        "nan",
        "inf",
        "negative",
        "stale",
        "no-raw-samples",
        "duplicate-series",
        "bad-promql",
        "matrix",
        "no-value",
        "not-an-object",
        "label-not-text",
    ],
)
def test_bad_answers_are_failures_not_exceptions(
    answer: Any, freshness: list[Sample], reason: str
) -> None:
    result = read_traffic(parse(answer), freshness, SPLIT, SNAPSHOT, 120)
    assert isinstance(result, TrafficFailure)
    assert result.reason == reason


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["1", "NaN", "many"], TrafficFailure("invalid-value", "data.result[1] has value 'NaN'")),
        (["1", "many", "-2"], TrafficFailure("bad-response", "data.result[1] has value 'many'")),
        (["-2", "many"], TrafficFailure("invalid-value", "data.result[0] has value '-2'")),
    ],
    ids=["invalid-first", "unreadable-first", "negative-first"],
)
def test_the_first_bad_value_in_the_answer_is_named(
    values: list[str], expected: TrafficFailure
) -> None:
    """The values are checked all at once; the one named is still the first, in order."""
    pods = [f"default/p{index}" for index in range(len(values))]
    answer = vector(
        *((split_labels(pod, API), value) for pod, value in zip(pods, values, strict=True))
    )
    assert parse(answer) == expected


def test_values_read_whether_or_not_json_would_read_them_as_numbers() -> None:
    """Values are first read as JSON numbers while decoding; texts that float() reads but JSON
    does not are read again one by one, as before."""
    pods = [f"default/p{index}" for index in range(3)]
    values = ["2.5e-1", " 3", "1_000"]
    answer = vector(
        *((split_labels(pod, API), value) for pod, value in zip(pods, values, strict=True))
    )
    samples = parse(answer)
    assert isinstance(samples, list)
    assert [sample.value for sample in samples] == [0.25, 3.0, 1000.0]


def test_a_recorded_response_file_is_read_like_a_live_answer(tmp_path: Path) -> None:
    recorded = tmp_path / "answer.json"
    recorded.write_text(json.dumps(vector((split_labels(WEB[0], API), "4"))))
    samples, freshness = RecordedAnswer.from_file(recorded).read(SPLIT)
    assert freshness is None
    assert samples == [Sample(tuple(split_labels(WEB[0], API).values()), 4.0)]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read traffic file"),
        ("{", "not valid JSON"),
        ('{"items": []}', "not a Prometheus query response"),
    ],
)
def test_unusable_traffic_files_are_input_errors(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "t.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InputError, match=message):
        RecordedAnswer.from_file(path).read(SPLIT)
