"""Kubernetes quantities ("100m", "1.5Gi") in whole units, rounded up as the scheduler rounds.

The one module below the clients that imports the kubernetes package, for its pure
`parse_quantity`: the import contract names it as its only exception.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from kubernetes.utils import parse_quantity

REFUSED = (ValueError, TypeError, InvalidOperation)
"""What `whole_units` raises for a value that is no quantity."""
_LARGEST = Decimal(10) ** 24
"""More than any node has of anything (a yottabyte, 10^21 cores): a quantity past it, below
zero, or not finite ("Infinity", "1e999999"), is refused rather than counted."""


def whole_units(raw: str | int | float, scale: int) -> int:
    """A quantity in whole units of 1/`scale` (millicores at 1000), rounded up, as the
    scheduler's `MilliValue()` and `Value()` round: the API server keeps 1.5 bytes of memory as
    "1500m", and truncated to 1 byte a pod would count as smaller than the scheduler counts it."""
    return _scaled_text(raw, scale) if type(raw) is str else _scaled(raw, scale)


_SYNTAX = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?", re.ASCII
)
"""A quantity as the API server reads one (resource.ParseQuantity): parse_quantity also takes
spaces, underscores and non-ASCII digits (" 5", "1_000"), which no API object holds."""


def _scaled(raw: Any, scale: int) -> int:
    if isinstance(raw, str) and not _SYNTAX.fullmatch(raw):
        raise ValueError(f"not a quantity: {raw!r}")
    value = Decimal(parse_quantity(raw))  # type: ignore[no-untyped-call]
    if not value.is_finite() or not 0 <= value <= _LARGEST:  # the API server refuses negatives
        raise ValueError(f"quantity out of range: {raw!r}")
    return math.ceil(value * scale)


_scaled_text = functools.lru_cache(maxsize=4096)(_scaled)
"""Requests and capacities repeat the same few texts ("100m", "128Mi") across a cluster; each
is parsed once per scale. Errors are not cached."""
