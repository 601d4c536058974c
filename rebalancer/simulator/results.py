"""A simulation's figures, cycle by cycle, as a table or JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from rebalancer.planning.report import rounded
from rebalancer.planning.types import Move

SimulatedMode = Literal["evict", "migrate"]


@dataclass(frozen=True)
class Optimum:
    weighted_cost: float
    min_moves: int | None
    """Fewest moves that reach `weighted_cost`: pods off their current node, or on small
    problems moves made one at a time, each fitting as made; None if not proven."""
    exact: bool = True
    """False: the exact program was out of reach and `weighted_cost` is the domain-level lower
    bound, which no placement goes below, so capture measured against it is conservative."""


Violations = dict[str, int]
"""{pdb, capacity, spread}: counts of broken rules; a correct run keeps all three at zero."""


@dataclass(frozen=True)
class CycleFigures:
    cycle: int
    crossing: dict[str, float]
    """Traffic crossing each level once the cycle's replacements run (level 0: before any)."""
    weighted_cost: float
    monthly_cost: float | None
    evictions: int
    landed_in_target: int
    refused_by_pdb: int
    violations: Violations
    moved: tuple[str, ...] = ()
    """The scenario workloads (namespace/name) the cycle evicted pods of, once each."""
    rerouted: int = 0
    """Services whose trafficDistribution the cycle changed (simulate with routing changes)."""
    average_cost: float | None = None
    """With traffic phases: the weighted cost of the cycle's placement under the phases'
    traffic averaged over a period, which does not change with the phase in force."""
    steps: tuple[tuple[int, dict[str, float]], ...] = ()
    """When asked (`simulate(steps=True)`): before the cycle's first move and after each (a
    job's moves as one), in the order made, the moves made so far in the cycle and the crossing
    then, as a controller evicting them one by one passes through it."""


@dataclass(frozen=True)
class SimulationResult:
    scenario: str
    mode: SimulatedMode
    seed: int
    cycles: tuple[CycleFigures, ...]
    """Cycle 0 is the starting placement; then one row per cycle run."""
    currency: str
    optimum: Optimum | None = None
    """The best placement from the start (asked for and computable), or None."""
    optimum_asked: bool = False
    moves: tuple[tuple[Move, float], ...] = ()
    """Every eviction with its time, for loop checks; the figures above are per cycle."""
    unconstrained: Optimum | None = None
    """The best placement with no rule of the planner's (protections, soft spread, HA floor)
    held: how much those rules cost."""

    def summary(self) -> dict[str, Any]:
        first, last = self.cycles[0], self.cycles[-1]
        violations: Violations = dict.fromkeys(("pdb", "capacity", "spread"), 0)
        for row in self.cycles:
            for rule, count in row.violations.items():
                violations[rule] += count
        return {
            "weighted_cost_before": first.weighted_cost,
            "weighted_cost_after": last.weighted_cost,
            "monthly_cost_before": first.monthly_cost,
            "monthly_cost_after": last.monthly_cost,
            "crossing_before": first.crossing,
            "crossing_after": last.crossing,
            "moves": sum(row.evictions for row in self.cycles),
            "routing_changes": sum(row.rerouted for row in self.cycles),
            "landed_in_target": sum(row.landed_in_target for row in self.cycles),
            "refused_by_pdb": sum(row.refused_by_pdb for row in self.cycles),
            "violations": violations,
            **(
                {
                    "optimal_weighted_cost": self.optimum and self.optimum.weighted_cost,
                    "min_moves_to_optimum": self.optimum and self.optimum.min_moves,
                    "optimum_is_exact": self.optimum and self.optimum.exact,
                    "unconstrained_weighted_cost": self.unconstrained
                    and self.unconstrained.weighted_cost,
                }
                if self.optimum_asked
                else {}
            ),
        }


def result_json(result: SimulationResult) -> dict[str, Any]:
    return {
        "scenario": result.scenario,
        "mode": result.mode,
        "seed": result.seed,
        "currency": result.currency,
        "cycles": rounded([dataclasses.asdict(row) for row in result.cycles]),
        "summary": rounded(result.summary()),
    }


def result_table(result: SimulationResult) -> str:
    levels = list(result.cycles[0].crossing)
    header = ["cycle", *(f"{level} x" for level in levels), "cost", "per month", "moves"]
    header += ["landed", "violations"]
    lines = ["  ".join(f"{name:>10}" for name in header)]
    for row in result.cycles:
        monthly = "-" if row.monthly_cost is None else f"{row.monthly_cost:.2f}"
        cells = [str(row.cycle), *(f"{row.crossing[level]:.1f}" for level in levels)]
        cells += [f"{row.weighted_cost:.1f}", monthly, str(row.evictions)]
        cells += [str(row.landed_in_target), str(sum(row.violations.values()))]
        lines.append("  ".join(f"{cell:>10}" for cell in cells))
    summary = result.summary()
    lines += ["", f"{'':24}{'before':>12}{'after':>12}"]
    lines.append(
        f"{'weighted cost':<24}{summary['weighted_cost_before']:>12.1f}"
        f"{summary['weighted_cost_after']:>12.1f}"
    )
    for level in levels:
        lines.append(
            f"{'crossing ' + level:<24}{summary['crossing_before'][level]:>12.1f}"
            f"{summary['crossing_after'][level]:>12.1f}"
        )
    if result.optimum_asked:
        best = result.optimum
        lines.append(
            "optimum: not computable here"
            if best is None
            else f"{'optimum':<24}{best.weighted_cost:>24.1f}  (min moves {best.min_moves})"
            if best.exact
            else f"{'lower bound':<24}{best.weighted_cost:>24.1f}  (the exact optimum out of reach)"
        )
        if result.unconstrained is not None:
            lines.append(
                f"{'unconstrained optimum':<24}{result.unconstrained.weighted_cost:>24.1f}"
                "  (no protection, soft spread or HA floor held)"
            )
    lines.append(
        f"moves {summary['moves']}, landed in target {summary['landed_in_target']}, "
        f"refused by PDB {summary['refused_by_pdb']}, violations {summary['violations']}"
        + (f", routing changes {summary['routing_changes']}" if summary["routing_changes"] else "")
    )
    return "\n".join(lines)
