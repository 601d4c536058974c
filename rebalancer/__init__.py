"""topology-rebalancer: moves chatty pods closer together, by the traffic Prometheus observes."""

from rebalancer.config.policy import Policy, load_policy, parse_policy
from rebalancer.errors import InputError, SourceUnavailableError
from rebalancer.planning.cycle import CycleOutcome, plan_cycle

__all__ = [
    "CycleOutcome",
    "InputError",
    "Policy",
    "SourceUnavailableError",
    "load_policy",
    "parse_policy",
    "plan_cycle",
]
