"""Prometheus' `/api/v1/query` answer, bytes to typed samples, purely.

The same parser reads a live answer and a recorded file, and decodes only the labels the queries
name; anything else wrong with the answer is a TrafficFailure with Prometheus' own words in it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np

from rebalancer.errors import one_line, where_and_what
from rebalancer.traffic.model import AnswerOrFailure, FailureReason, Sample, TrafficFailure

_DETAIL_LIMIT = 200
"""Characters of Prometheus' own text kept in a failure's detail."""


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
    Every other label is skipped in C, with no dict per series: a general JSON parser builds a
    dict for each of up to a million series. `lax` reads each value's text
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
    except RecursionError:
        return TrafficFailure("bad-response", "not valid JSON (nested too deeply)")
    if answer.status != "success":
        reason: FailureReason = "bad-query" if answer.errorType == "bad_data" else "bad-response"
        error_text = one_line(answer.error, _DETAIL_LIMIT)
        return TrafficFailure(reason, f"{one_line(answer.errorType, _DETAIL_LIMIT)}: {error_text}")
    if answer.data is None:
        return TrafficFailure("bad-response", "data.result is missing")
    if answer.data.resultType not in ("vector", "scalar") or (
        answer.data.resultType == "scalar" and labels
    ):  # a scalar dates an answer; it names no pair
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
    except msgspec.DecodeError as error:  # invalid UTF-8 in a label, say
        return TrafficFailure("bad-response", f"data.result: {one_line(error, _DETAIL_LIMIT)}")
    except RecursionError:
        return TrafficFailure("bad-response", "data.result: nested too deeply")
    rates = _rates_one_by_one(texts)
    if isinstance(rates, TrafficFailure):
        return rates
    return list(map(Sample, label_values, rates))


_METRIC, _VALUE, _SECOND = attrgetter("metric"), attrgetter("value"), itemgetter(1)


def _vector_read_fast(result: msgspec.Raw, labels: tuple[str, ...]) -> list[Sample] | None:
    """The samples, with the values read as floats while decoding and checked in numpy; None
    when that finds anything wrong, and the answer is then read again strictly, to name the
    fault in the answer's own words, where converting each value's text in Python would cost a
    call per series."""
    try:
        series = _series_decoder(tuple(dict.fromkeys(labels)), lax=True).decode(result)
    except (msgspec.DecodeError, RecursionError):  # ValidationError among them: read strictly
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


def http_failure(url: str, code: int, body: bytes) -> TrafficFailure:
    try:
        detail = one_line(_ANSWER.decode(body).error, _DETAIL_LIMIT)
    except (msgspec.DecodeError, msgspec.ValidationError):
        detail = one_line(body.decode("utf-8", "replace"), _DETAIL_LIMIT)
    if code in {400, 422}:
        return TrafficFailure("bad-query", f"{url} refused the query (HTTP {code}): {detail}")
    return TrafficFailure("unreachable", f"{url} answered HTTP {code}: {detail}")
