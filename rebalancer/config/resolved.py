"""The policy resolved against one cycle's topology: the level names it gives turned into
indexes and the price into bytes, once, so the planner applies rules and never re-reads the
policy's sections."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.cluster.topology import Topology
from rebalancer.config.modes import Surge
from rebalancer.config.pacing import Limits
from rebalancer.config.policy import Policy
from rebalancer.config.rates import BYTES_PER_SECOND, in_source_unit, unit_defaults
from rebalancer.config.scope import Protections, Scope
from rebalancer.config.training_jobs import Jobs
from rebalancer.cost.figures import Price


def price_of(policy: Policy, topology: Topology) -> Price:
    return Price(
        per_gb_cross_zone=policy.price.per_gb_cross_zone,
        bytes_per_unit=policy.traffic.bytes_per_unit
        or (1.0 if policy.traffic.unit == BYTES_PER_SECOND else None),
        zone_level=topology.level_index(policy.topology.zone_level),
    )


@dataclass(frozen=True)
class ResolvedThresholds:
    """The policy's thresholds in the traffic source's unit, the unit's defaults filled in."""

    min_pair_rate: float
    min_gain: float
    min_gain_ratio: float


def thresholds_of(policy: Policy) -> ResolvedThresholds:
    given, unit = policy.thresholds, policy.traffic.unit
    defaults = unit_defaults(unit)

    def rate(value: float | str | None, default: str) -> float:
        return in_source_unit(
            default if value is None else value, unit, policy.traffic.bytes_per_unit
        )

    return ResolvedThresholds(
        min_pair_rate=rate(given.min_pair_rate, defaults.min_pair_rate),
        min_gain=rate(given.min_gain, defaults.min_gain),
        min_gain_ratio=given.min_gain_ratio,
    )


@dataclass(frozen=True)
class PlanningRules:
    """What the planner applies to every candidate."""

    scope: Scope
    protections: Protections
    thresholds: ResolvedThresholds
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
    predict_landing: bool = False
    """Move only where the scheduler would land the replacement in the target (with the hint
    among its scores when steered)."""
    surge: Surge | None = None
    """Set when Deployments are moved make-before-break: `migrate.method: surge`, in migrate
    mode or previewed in a dry run."""

    @classmethod
    def of(cls, policy: Policy, topology: Topology) -> PlanningRules:
        return cls(
            scope=policy.scope,
            protections=policy.protections,
            thresholds=thresholds_of(policy),
            limits=policy.limits,
            cooldown_seconds=policy.cooldown.per_workload_seconds,
            zone_level=topology.level_index(policy.topology.zone_level),
            spread_level=topology.level_index(policy.protections.min_spread.level),
            price=price_of(policy, topology),
            jobs=policy.jobs,
            steered=policy.mode != "evict",
            predict_landing=(
                policy.evict.predict_landing
                if policy.mode == "evict"
                else policy.migrate.predict_landing and not policy.migrate.required
            ),
            surge=(
                policy.migrate.surge
                if policy.migrate.method == "surge" and policy.mode != "evict"
                else None
            ),
        )
