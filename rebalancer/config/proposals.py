"""The sections on which moves are proposed: the strategies that propose them, the thresholds
below which nothing is worth acting on, and the target placement the moves head for."""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import Field, ValidationInfo, field_validator, model_validator

from rebalancer.config.rates import parse_rate
from rebalancer.strategies.registry import STRATEGIES, StrategyArgs
from rebalancer.strict import Strict


class StrategyConfig(Strict):
    """One strategy by its registered name; its args are validated by the strategy's own model."""

    name: str
    """A registered strategy: `split-peers` or `gang-consolidation`."""
    enabled: bool = True
    """A disabled strategy is kept in the policy but proposes nothing."""
    args: StrategyArgs
    """The strategy's own arguments (below); omitted ones take their defaults."""

    @model_validator(mode="before")
    @classmethod
    def _args_default_to_the_strategy_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("args") is None:
            return {**data, "args": {}}
        return data

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r} (known: {', '.join(sorted(STRATEGIES))})")
        return name

    @field_validator("args", mode="before")
    @classmethod
    def _typed_args(cls, args: Any, info: ValidationInfo) -> Any:
        """Validate args with the named strategy's own model, so errors point into args."""
        name = info.data.get("name")
        if name is None:
            return StrategyArgs.model_construct()  # the name was refused; that error says why
        if isinstance(args, dict):
            return STRATEGIES[name].args_type.model_validate(args)
        return args


class Thresholds(Strict):
    """What is too little to act on: low-traffic workloads are left alone by these. Each rate
    is a number in the traffic source's unit, or a text with its unit: a byte rate ("10KiB/s",
    converted through `traffic.bytes_per_unit` for a source that counts something else) or the
    source's own ("0.5 flows/s")."""

    min_pair_rate: float | str | None = None
    """Pairs below this rate are dropped from the graph. Unset: 0.1 in the source's unit, or
    1KiB/s when it counts bytes (a tenth of a byte a second would filter nothing)."""
    min_gain: float | str | None = None
    """A move must save at least this much weighted traffic (rate x level weight). Unset: 1 in
    the source's unit, or 10KiB/s when it counts bytes."""
    min_gain_ratio: Annotated[float, Field(ge=0, le=1)] = 0.01
    """...and at least this share of the moving pod's own current weighted cost (its traffic x
    the weight of each level it crosses), so tiny improvements to a pod are left alone."""

    @field_validator("min_pair_rate", "min_gain", mode="before")
    @classmethod
    def _a_rate(cls, value: Any) -> Any:
        """Read as one type, so a bad value gets one message rather than one per member of the
        union (and true is no number here)."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"expected a number or a text such as '10KiB/s', got {value!r}")
        amount = parse_rate(value).amount
        if amount < 0 or not math.isfinite(amount):
            raise ValueError(f"expected a finite rate of at least 0, got {value!r}")
        return value


class Target(Strict):
    """A target placement the moves of the coming cycles head for. Greedy moves, each where
    the pod's peers are at that moment, gather a group of services where its first pod went;
    the best place for the group may be another, beside pods that cannot move. Each cycle a
    local search, under the planner's own rules, places the pods the policy may move, resuming
    from the last cycle's target so that consecutive cycles head the same way; the pods it
    covers are moved only toward it, each when its move pays, the rest by the strategies. In
    migrate mode (and its dry run) only: an evicted pod's replacement goes where the scheduler
    puts it, rarely into one chosen host."""

    enabled: bool = True
    """False: the strategies alone propose moves, each pod's where its peers are now."""
    level: str | None = None
    """The level whose domains the target places pods in, by name. Unset: the finest level any
    enabled strategy places at (split-peers' `down_to`, else its `level`)."""
