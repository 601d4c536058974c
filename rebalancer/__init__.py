"""topology-rebalancer: moves chatty pods closer together, by the traffic Prometheus observes."""

from rebalancer.engine import CycleOutcome, plan_cycle
from rebalancer.errors import InputError, SourceUnavailableError
from rebalancer.policy import Policy, load_policy, parse_policy

__all__ = [
    "CycleOutcome",
    "InputError",
    "Policy",
    "SourceUnavailableError",
    "load_policy",
    "parse_policy",
    "plan_cycle",
]
