"""The figures every report is made of: total traffic, traffic crossing each level, weighted cost
and what it bills, with the running sums behind them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Topology

SECONDS_PER_MONTH = 30.4375 * 24 * 3600
"""An average month (365.25 / 12 days), the period cloud bills are read in."""


@dataclass(frozen=True)
class Price:
    per_gb_cross_zone: float
    bytes_per_unit: float | None
    """Bytes per unit of rate; None when the unit cannot be converted, so no cost is claimed."""
    zone_level: int

    def monthly(self, cross_zone_rate: float) -> float | None:
        """What a month of this cross-zone rate bills; None when the unit is not bytes."""
        if self.bytes_per_unit is None:
            return None
        gigabytes = cross_zone_rate * self.bytes_per_unit * SECONDS_PER_MONTH / 1e9
        return gigabytes * self.per_gb_cross_zone


class WorkloadPairFigure(msgspec.Struct, frozen=True, gc=False):
    """A Struct, made in C: a plan's figures hold one per pair of workloads that talk, twice."""

    workloads: tuple[str, str]
    rate: float
    weighted_cost: float


@dataclass(frozen=True)
class Figures:
    total: float
    crossing: dict[str, float]
    weighted_cost: float
    monthly_cross_zone_cost: float | None
    by_workload_pair: tuple[WorkloadPairFigure, ...] = ()


@dataclass
class Tally:
    """Running sums: traffic by the widest level it crosses (crossing a level means crossing
    every level below it), and rate and cost per pair of workloads."""

    weights: list[float]
    """Cost per unit of rate by widest split; the last entry, 0, is for pods that share all."""
    names: dict[str, str]
    """Pod -> its workload's name, read once."""
    split_at: list[float] = field(default_factory=list)
    total: float = 0.0
    weighted: float = 0.0
    pairs: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.split_at:
            self.split_at = [0.0] * len(self.weights)

    def count(self, a: str, b: str, rate: float, split: int, sign: float) -> None:
        cost = sign * rate * self.weights[split]
        self.split_at[split] += sign * rate
        self.total += sign * rate
        self.weighted += cost
        name_a, name_b = self.names[a], self.names[b]
        figure = self.pairs.setdefault(
            (name_a, name_b) if name_a <= name_b else (name_b, name_a), [0.0, 0.0]
        )
        figure[0] += sign * rate
        figure[1] += cost

    def copy(self) -> Tally:
        pairs = {key: list(figure) for key, figure in self.pairs.items()}
        return Tally(
            self.weights, self.names, list(self.split_at), self.total, self.weighted, pairs
        )

    def figures(self, topology: Topology, price: Price) -> Figures:
        levels = topology.levels
        # A re-count subtracts what it adds elsewhere: rounding may leave -1e-16 where 0 is meant.
        crossing = {
            level.name: max(0.0, sum(self.split_at[: index + 1]))
            for index, level in enumerate(levels)
        }
        monthly = price.monthly(crossing[levels[price.zone_level].name])
        breakdown = tuple(
            WorkloadPairFigure(pair, rate, cost)
            for pair, (rate, cost) in sorted(self.pairs.items(), key=lambda item: -item[1][1])
        )
        return Figures(self.total, crossing, max(0.0, self.weighted), monthly, breakdown)


def workload_name(snapshot: Snapshot, pod_key: str) -> str:
    pod = snapshot.pods[pod_key]
    return str(pod.workload) if pod.workload else f"Pod/{pod_key}"
