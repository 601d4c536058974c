"""The one place strategies are registered: name, args model and builder.

Registration is explicit, as in kubernetes-sigs/descheduler, so the set of strategies a policy can
name is visible here and nothing is discovered at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rebalancer.strategies import gang_consolidation, split_peers
from rebalancer.strategies.framework import Strategy, StrategyArgs


@dataclass(frozen=True)
class StrategySpec:
    name: str
    args_type: type[StrategyArgs]
    build: Callable[[StrategyArgs], Strategy]


STRATEGIES: dict[str, StrategySpec] = {
    spec.name: spec
    for spec in (
        StrategySpec(split_peers.PLUGIN_NAME, split_peers.SplitPeersArgs, split_peers.new),
        StrategySpec(
            gang_consolidation.PLUGIN_NAME,
            gang_consolidation.GangConsolidationArgs,
            gang_consolidation.new,
        ),
    )
}

__all__ = ["STRATEGIES", "StrategyArgs", "StrategySpec"]
