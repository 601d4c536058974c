"""The PromQL a cycle sends: one aggregated traffic query and a cheap one that dates it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rebalancer.traffic.settings import HubbleSource, IstioSource, TrafficSourcePolicy

_ISTIO_BYTE_METRICS = (
    "istio_tcp_sent_bytes_total|istio_tcp_received_bytes_total"
    "|istio_request_bytes_sum|istio_response_bytes_sum"
)


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
