"""topology-rebalancer: moves chatty pods closer together, by the traffic Prometheus observes.

The public names load on first use: `import rebalancer` (and every `python -m rebalancer.x`)
would otherwise pay for the whole planning stack, numpy and pydantic included.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rebalancer.config.policy import Policy, load_policy, parse_policy
    from rebalancer.errors import InputError, SourceUnavailableError
    from rebalancer.planning.cycle import CycleOutcome, plan_cycle

_HOMES = {
    "CycleOutcome": "rebalancer.planning.cycle",
    "InputError": "rebalancer.errors",
    "Policy": "rebalancer.config.policy",
    "SourceUnavailableError": "rebalancer.errors",
    "load_policy": "rebalancer.config.policy",
    "parse_policy": "rebalancer.config.policy",
    "plan_cycle": "rebalancer.planning.cycle",
}

__all__ = [
    "CycleOutcome",
    "InputError",
    "Policy",
    "SourceUnavailableError",
    "load_policy",
    "parse_policy",
    "plan_cycle",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'rebalancer' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
