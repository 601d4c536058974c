"""Reading a cycle's two inputs, the cluster and its traffic, from files or live sources.

The CLI, the controller and the benchmark all read through here: the queries the policy asks
for, a reader that answers them (recorded or live), and the mapping of the answer onto the
snapshot's pods, so a saved answer and a live one go through the same steps.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.parse import decode_snapshot
from rebalancer.errors import InputError
from rebalancer.files import LARGE_INPUT_BYTES, read_bytes
from rebalancer.traffic.answer import parse_answer
from rebalancer.traffic.mapping import read_traffic
from rebalancer.traffic.model import AnswerOrFailure, Traffic, TrafficFailure
from rebalancer.traffic.queries import Queries, build_queries
from rebalancer.traffic.settings import TrafficSourcePolicy

Answers = tuple[AnswerOrFailure, AnswerOrFailure | None]
"""The traffic answer, and the one that dates it (None: nothing to date it by)."""


def load_snapshot(path: Path) -> Snapshot:
    return decode_snapshot(read_bytes(path, "snapshot", LARGE_INPUT_BYTES), str(path))


class AnswerReader(Protocol):
    def read(self, queries: Queries) -> Answers:
        """The answers to the traffic query and, if it came, to the freshness query."""


@dataclass(frozen=True)
class RecordedAnswer:
    """A saved `/api/v1/query` answer (`curl .../api/v1/query?query=...`), parsed as if live. It
    is judged as of the moment it was saved, so it has no freshness answer."""

    body: bytes
    origin: str

    @classmethod
    def from_file(cls, path: Path) -> RecordedAnswer:
        return cls(read_bytes(path, "traffic file", LARGE_INPUT_BYTES), str(path))

    def read(self, queries: Queries) -> Answers:
        parsed = parse_answer(self.body, queries.labels)
        if isinstance(parsed, TrafficFailure) and parsed.reason == "bad-response":
            raise InputError(f"{self.origin}: not a Prometheus query response ({parsed.detail})")
        return parsed, None


@dataclass(frozen=True)
class TrafficInput:
    """The policy's traffic source, read by `reader` and mapped onto a snapshot: `read` does
    both steps; the benchmark times `answers` and `mapped` apart."""

    settings: TrafficSourcePolicy
    reader: AnswerReader

    @functools.cached_property
    def queries(self) -> Queries:
        return build_queries(self.settings)

    def answers(self) -> Answers:
        return self.reader.read(self.queries)

    def mapped(self, answers: Answers, snapshot: Snapshot) -> Traffic | TrafficFailure:
        """A saved answer that cannot be read as traffic (the same pair twice, say) is the
        user's file to fix, named; a live one fails the cycle's traffic, which may heal."""
        answer, freshness = answers
        traffic = read_traffic(
            answer, freshness, self.queries, snapshot, self.settings.max_age_seconds
        )
        recorded = self.reader
        if (
            isinstance(traffic, TrafficFailure)
            and isinstance(recorded, RecordedAnswer)
            and traffic.reason == "bad-response"
        ):
            raise InputError(f"{recorded.origin}: {traffic.detail}")
        return traffic

    def read(self, snapshot: Snapshot) -> Traffic | TrafficFailure:
        return self.mapped(self.answers(), snapshot)
