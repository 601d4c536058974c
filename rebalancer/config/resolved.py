"""The policy resolved against one cycle's topology: the level names it gives turned into
indexes and the price into bytes, once, so the planner applies rules and never re-reads the
policy's sections."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.cluster.topology import Topology
from rebalancer.config.policy import Policy
from rebalancer.config.sections import Jobs, Limits, Protections, Scope, Surge, Thresholds
from rebalancer.cost.figures import Price


def price_of(policy: Policy, topology: Topology) -> Price:
    return Price(
        per_gb_cross_zone=policy.price.per_gb_cross_zone,
        bytes_per_unit=policy.traffic.bytes_per_unit
        or (1.0 if policy.traffic.unit == "bytes/s" else None),
        zone_level=topology.level_index(policy.topology.zone_level),
    )


@dataclass(frozen=True)
class PlanningRules:
    """What the planner applies to every candidate."""

    scope: Scope
    protections: Protections
    thresholds: Thresholds
    limits: Limits
    cooldown_seconds: float
    zone_level: int
    """The level per-zone limits count at."""
    spread_level: int
    """The level `protections.min_spread` counts domains at."""
    price: Price
    jobs: Jobs
    steered: bool
    """Whether replacements are steered to their targets (migrate mode, or its dry run)."""
    surge: Surge | None = None
    """Set when Deployments are moved make-before-break: `migrate.method: surge`, in migrate
    mode or previewed in a dry run."""

    @classmethod
    def of(cls, policy: Policy, topology: Topology) -> PlanningRules:
        return cls(
            scope=policy.scope,
            protections=policy.protections,
            thresholds=policy.thresholds,
            limits=policy.limits,
            cooldown_seconds=policy.cooldown.per_workload_seconds,
            zone_level=topology.level_index(policy.topology.zone_level),
            spread_level=topology.level_index(policy.protections.min_spread.level),
            price=price_of(policy, topology),
            jobs=policy.jobs,
            steered=policy.mode != "evict",
            surge=(
                policy.migrate.surge
                if policy.migrate.method == "surge" and policy.mode != "evict"
                else None
            ),
        )
