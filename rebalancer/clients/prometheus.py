"""The Prometheus HTTP edge: one GET per query, the failure classified, the bytes handed to the pure
parser that reads recorded files too.
"""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from rebalancer.traffic.answer import http_failure, parse_answer
from rebalancer.traffic.model import AnswerOrFailure, TrafficFailure
from rebalancer.traffic.queries import Queries


class PrometheusReader:
    """Asks Prometheus over a requests session with urllib3's retry mounted for the URL,
    classifies what went wrong, and hands every answer's bytes to the same pure parser that reads
    recorded files: decoding only the labels the queries name is what keeps a million series
    cheap, so no client library that decodes the whole answer stands in between."""

    def __init__(self, url: str, timeout_seconds: float) -> None:
        self.url = url
        self.timeout_seconds = timeout_seconds
        # One quick retry for a dropped connection or a gateway error, none for a slow answer:
        # asking again would only double the wait (and hide the timeout behind a generic
        # ConnectionError). A longer wait belongs to the next cycle.
        retry = Retry(total=1, read=False, backoff_factor=0.2, status_forcelist=(502, 503, 504))
        self._base = url.rstrip("/")
        self._session = requests.Session()
        self._session.mount(self._base, HTTPAdapter(max_retries=retry))

    def read(self, queries: Queries) -> tuple[AnswerOrFailure, AnswerOrFailure | None]:
        """The traffic answer, then, only if it came, the one that dates it."""
        answer = self.query(queries.traffic, queries.labels)
        freshness = None if isinstance(answer, TrafficFailure) else self.query(queries.freshness)
        return answer, freshness

    def query(self, promql: str, labels: tuple[str, ...] = ()) -> AnswerOrFailure:
        try:
            response = self._session.get(
                f"{self._base}/api/v1/query",
                params={"query": promql},
                timeout=self.timeout_seconds,
            )
        except requests.Timeout:
            return TrafficFailure("timeout", f"{self.url}: no answer in {self.timeout_seconds:g}s")
        except requests.RequestException as error:
            return TrafficFailure("unreachable", f"{self.url}: {type(error).__name__}")
        if response.status_code != 200:
            return http_failure(self.url, response.status_code, response.content)
        parsed = parse_answer(response.content, labels)
        if isinstance(parsed, TrafficFailure) and parsed.reason == "bad-response":
            return TrafficFailure("bad-response", f"{self.url}: {parsed.detail}")
        return parsed
