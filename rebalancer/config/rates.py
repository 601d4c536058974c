"""Thresholds written with a unit ("10KiB/s", "0.5 flows/s"), and the defaults for each unit.

A bare number is in the traffic source's unit, so 0.1 means a tenth of a flow a second from
Hubble but a tenth of a byte from Istio, where it filters nothing. A threshold that names its
unit means the same whatever the source counts, and unset thresholds take defaults made for
the source's unit.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

BYTES_PER_SECOND = "bytes/s"
"""The unit whose rates are bytes: the only one a price applies to without `bytes_per_unit`."""

BYTE_RATES = {
    "B/s": 1.0,
    "kB/s": 1e3,
    "KB/s": 1e3,
    "KiB/s": 1024.0,
    "MB/s": 1e6,
    "MiB/s": 1024.0**2,
    "GB/s": 1e9,
    "GiB/s": 1024.0**3,
    BYTES_PER_SECOND: 1.0,
}
"""Byte-rate units a threshold may name, in bytes per second."""

_TEXT = re.compile(r"^\s*((?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\s*(\S+)?\s*$")


@dataclass(frozen=True)
class Rate:
    """A threshold as written: an amount and its unit (None: the source's own)."""

    amount: float
    unit: str | None


def parse_rate(value: float | str) -> Rate:
    """A number, or "<number> <unit>" (the space optional; a text without a unit is in the
    source's); ValueError naming what is wrong."""
    if not isinstance(value, str):
        return Rate(float(value), None)  # range checked where the policy is read
    found = _TEXT.match(value)
    if found is None:
        raise ValueError(
            f"expected a number, or a number and a unit such as '10KiB/s' or '0.5 flows/s', "
            f"got {value!r}"
        )
    amount = float(found.group(1))
    if not math.isfinite(amount):
        raise ValueError(f"not a finite rate: {value!r}")
    return Rate(amount, found.group(2))


def in_source_unit(value: float | str, source_unit: str, bytes_per_unit: float | None) -> float:
    """The threshold in the source's unit. A byte rate is converted for a source that counts
    something else through `bytes_per_unit`; any other unit must be the source's own."""
    rate = parse_rate(value)
    if rate.unit is None or rate.unit == source_unit:
        return rate.amount
    if rate.unit not in BYTE_RATES:
        known = ", ".join(sorted(set(BYTE_RATES) | {source_unit}))
        raise ValueError(f"unit {rate.unit!r} is neither the source's nor a byte rate ({known})")
    in_bytes = rate.amount * BYTE_RATES[rate.unit]
    if source_unit == BYTES_PER_SECOND:
        return in_bytes
    if bytes_per_unit is None:
        raise ValueError(
            f"{value!r} is a byte rate, but the source counts {source_unit}: set "
            "traffic.bytes_per_unit, or write it in the source's unit"
        )
    return in_bytes / bytes_per_unit


@dataclass(frozen=True)
class UnitDefaults:
    min_pair_rate: str
    min_gain: str


COUNT_DEFAULTS = UnitDefaults(min_pair_rate="0.1", min_gain="1")
"""For a source that counts flows, requests or connections: a tenth of one a second is the
least worth a pair, one a second (weighted) the least worth a move."""
BYTE_DEFAULTS = UnitDefaults(min_pair_rate="1KiB/s", min_gain="10KiB/s")
"""For a source that counts bytes: about what a tenth of a flow a second carries, and ten
times that for a move, the same ratio as for counts."""


def unit_defaults(source_unit: str) -> UnitDefaults:
    return BYTE_DEFAULTS if source_unit == BYTES_PER_SECOND else COUNT_DEFAULTS
