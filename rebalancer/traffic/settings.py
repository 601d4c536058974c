"""Where pod-to-pod traffic is read: the policy's `traffic` section, one model per source."""

from __future__ import annotations

import re
from typing import Annotated, Literal

import promql_parser
from pydantic import (
    Field,
    field_validator,
)

from rebalancer.strict import Strict

_PROMQL_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def _check_promql(query: str) -> str:
    try:
        promql_parser.parse(query)
    except ValueError as error:
        raise ValueError(f"invalid PromQL: {error}") from None
    return query


class _TrafficCommon(Strict):
    window: str = "5m"
    """PromQL range of the rate; longer windows smooth bursts and so damp eviction loops."""
    max_age_seconds: Annotated[float, Field(gt=0)] = 180
    """Newest sample older than this means the data is stale: no moves this cycle."""
    timeout_seconds: Annotated[float, Field(gt=0)] = 15
    """Per Prometheus query; a query that takes longer fails the cycle, which then moves nothing."""
    bytes_per_unit: Annotated[float | None, Field(gt=0)] = None
    """Assumed bytes per unit when the unit is not bytes, so a monthly cost can be estimated."""

    @field_validator("window")
    @classmethod
    def _window_is_a_duration(cls, value: str) -> str:
        if not _PROMQL_DURATION.match(value):
            raise ValueError(f"not a PromQL duration such as '5m': {value!r}")
        return value


class HubbleSource(_TrafficCommon):
    """Cilium Hubble flow counts (`hubble_flows_processed_total`), which have no byte counts."""

    source: Literal["hubble"]
    """Selects this kind of source."""
    label_style: Literal["split", "combined"] = "split"
    """`split`: source_namespace/source_pod/... (labelsContext); `combined`: source="ns/pod"."""
    metric: str = "hubble_flows_processed_total"
    """The counter to rate; a recording rule that keeps the same labels can stand in for it."""
    matchers: str = ""
    """Extra label matchers, for example `verdict="FORWARDED"`."""
    unit: str = "flows/s"
    """Shown in reports and metrics; rates are compared only with each other."""


class IstioSource(_TrafficCommon):
    """Istio TCP and HTTP byte metrics, which name workloads, not pods."""

    source: Literal["istio"]
    """Selects this kind of source."""
    reporter: Literal["source", "destination"] = "source"
    """Which side's proxy reports the bytes; pick one so each byte is counted once."""
    unit: str = "bytes/s"
    """Shown in reports and metrics; bytes also give the monthly cross-zone cost."""


class CustomSource(_TrafficCommon):
    """Any PromQL that returns one rate per communicating pair."""

    source: Literal["custom"]
    """Selects this kind of source."""
    query: str
    """PromQL returning one rate per communicating pair, with the labels named below."""
    freshness_query: str
    """PromQL returning one value: the age in seconds of the newest raw sample behind `query`."""
    granularity: Literal["pod", "workload"] = "pod"
    """Whether the labels below name pods or workloads; a workload pair's rate is split evenly
    over its pod pairs."""
    source_namespace_label: str = "source_namespace"
    """Label holding the sending namespace."""
    source_label: str = "source_pod"
    """Label holding the sending pod (or workload)."""
    destination_namespace_label: str = "destination_namespace"
    """Label holding the receiving namespace."""
    destination_label: str = "destination_pod"
    """Label holding the receiving pod (or workload)."""
    unit: str = "bytes/s"
    """The unit of the query's values, for reports; `bytes/s` also gives the monthly cost."""

    _query_is_promql = field_validator("query", "freshness_query")(_check_promql)


TrafficSource = Annotated[HubbleSource | IstioSource | CustomSource, Field(discriminator="source")]
TrafficSourcePolicy = HubbleSource | IstioSource | CustomSource
