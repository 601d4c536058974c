"""Plan quality against the best placement possible, on the scenario suite in
examples/scenarios/: no rebalancing, a naive baseline (one pass evicting every pod with any
cross-zone flow), the rebalancer in evict and in migrate mode for 10 cycles with the built-in
simulation policy, the same migrate run unpaced (persistence 1, no cooldown, no limits: what the
strategies would do given the moves), and the optimum (HiGHS). Run with `make bench-quality`;
writes bench/results/quality.md and quality.json."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rebalancer.config.policy import parse_policy
from rebalancer.simulator.results import result_json
from rebalancer.simulator.run import DEFAULT_POLICY, naive_baseline, simulate
from rebalancer.simulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "examples" / "scenarios"
UNPACED = """
persistence: {cycles: 1}
cooldown: {per_workload_seconds: 0}
limits: {per_cycle: null, per_node: null, per_namespace: null, per_workload: null, per_zone: null}
"""
"""Pacing off, to tell how much of a shortfall is the strategies and how much the safety pace."""


def _captured(before: float, after: float, best: float | None) -> float | None:
    """Share of the achievable reduction (before minus the optimum) that was captured."""
    if best is None:
        return None
    if before - best <= 1e-9:
        return 1.0 if after <= before + 1e-9 else 0.0
    return (before - after) / (before - best)


def measure_scenario(path: Path, cycles: int, seed: int) -> dict[str, Any]:
    scenario = load_scenario(path)
    policy = parse_policy(DEFAULT_POLICY, "built-in")
    started = time.perf_counter()
    runs = {
        "naive": naive_baseline(scenario, policy, seed=seed),
        "evict": simulate(scenario, policy, cycles=cycles, mode="evict", seed=seed),
        "migrate": simulate(
            scenario, policy, cycles=cycles, mode="migrate", seed=seed, optimum=True
        ),
        "migrate, unpaced": simulate(
            scenario,
            parse_policy(DEFAULT_POLICY + UNPACED, "unpaced"),
            cycles=cycles,
            mode="migrate",
            seed=seed,
        ),
    }
    seconds = time.perf_counter() - started
    best = runs["migrate"].optimum
    before = runs["migrate"].summary()["weighted_cost_before"]
    rows = {}
    for name, result in runs.items():
        summary = result.summary()
        rows[name] = {
            "weighted_cost_after": summary["weighted_cost_after"],
            "captured": _captured(
                before, summary["weighted_cost_after"], best and best.weighted_cost
            ),
            "moves": summary["moves"],
            "violations": summary["violations"],
            "json": result_json(result)["summary"],
        }
    return {
        "scenario": scenario.name,
        "weighted_cost_before": before,
        "optimal_weighted_cost": best.weighted_cost if best else None,
        "min_moves_to_optimum": best.min_moves if best else None,
        "runs": rows,
        "seconds": round(seconds, 2),
    }


def _ratio(moves: int, fewest: int | None) -> float | None:
    """Moves used per move the optimum needs; undefined when it needs none or is unknown."""
    return moves / fewest if fewest else None


def _number(value: float | None, pattern: str = "{:.1f}") -> str:
    return "n/a" if value is None else pattern.format(value)


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| scenario | cost before | optimum | min moves | run | cost after | captured | moves "
        "| moves / min | violations (pdb/capacity/spread) |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for result in results:
        fewest = result["min_moves_to_optimum"]
        for name, run in result["runs"].items():
            v = run["violations"]
            lines.append(
                f"| {result['scenario']} | {result['weighted_cost_before']:.1f} "
                f"| {_number(result['optimal_weighted_cost'])} "
                f"| {_number(result['min_moves_to_optimum'], '{}')} | {name} "
                f"| {run['weighted_cost_after']:.1f} | {_number(run['captured'], '{:.0%}')} "
                f"| {run['moves']} | {_number(_ratio(run['moves'], fewest), '{:.2f}')} "
                f"| {v['pdb']}/{v['capacity']}/{v['spread']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    results = []
    for path in sorted(SCENARIOS.glob("*.yaml")):
        print(f"{path.stem} ...", flush=True)
        results.append(measure_scenario(path, args.cycles, args.seed))
    text = table(results)
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    heading = (
        f"# Plan quality against the optimum, {args.cycles} cycles, seed {args.seed}\n\n"
        "Written by `make bench-quality`. Weighted cost is traffic x the weight of the widest "
        "level it crosses. Captured is (cost before - cost after) / (cost before - optimum). "
        "The optimum keeps the pods the policy protects where they are.\n\n"
    )
    (args.results / "quality.md").write_text(heading + text + "\n")
    (args.results / "quality.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.results / 'quality.md'} and quality.json")


if __name__ == "__main__":
    main()
