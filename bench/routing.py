"""Routing against moving, on the scenario suite in examples/scenarios/: the cross-zone traffic
before, and after 20 cycles of moves only (the plan ignores routing), routing only (the
trafficDistribution changes the plan recommends, made as if each Service were patched, and no
move), and both (routing changes made, and moves planned on the traffic they leave). Also the
prediction: the crossing the plan says PreferSameZone leaves, against the crossing the simulator
routes once the change is made. Run with `make bench-routing`; writes bench/results/routing.md
and routing.json."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import suite
from rebalancer.config.policy import Policy, parse_policy
from rebalancer.config.resolved import price_of
from rebalancer.planning.cycle import routing_advice, service_calls, topology_of
from rebalancer.simulator.cluster import SimulatedCluster
from rebalancer.simulator.measures import measure
from rebalancer.simulator.results import SimulationResult
from rebalancer.simulator.run import DEFAULT_POLICY, simulate
from rebalancer.simulator.scenario import load_scenario
from rebalancer.simulator.scheduler import Scheduler

AROUND = "routing: {plan_around: true}\n"
"""Moves planned on the traffic as the recommended routing sends it, for the runs that set it."""


def _zone(result: SimulationResult, cycle: int = -1) -> float:
    return result.cycles[cycle].crossing["zone"]


def _moves_to_reach(result: SimulationResult, crossing: float) -> int | None:
    """The moves a run had made when its cross-zone traffic first came down to `crossing`,
    counted move by move within a cycle (the run measured with `steps`); None if it never
    did. Counting whole cycles would charge the moves made after it got there."""
    made = 0
    for row in result.cycles:
        if not row.steps and row.crossing["zone"] <= crossing + 1e-9:
            return made  # the start
        for step, after in row.steps:
            if after["zone"] <= crossing + 1e-9:
                return made + step
        made += row.evictions
    return None


def prediction(path: Path, policy: Policy, seed: int) -> dict[str, Any]:
    """The crossing the first plan predicts once its recommended routing is made, and the
    crossing the simulator routes then; and the zones some Service's clients have no endpoint
    in."""
    cluster = SimulatedCluster(load_scenario(path).in_phase(0), Scheduler(seed))
    cluster.refresh_services()
    topology = topology_of(policy, cluster.snapshot)
    calls = service_calls(policy, cluster.snapshot, cluster.traffic())
    advice = routing_advice(policy, calls, price_of(policy, topology))
    today = measure(cluster, policy).crossing["zone"]
    predicted = max(0.0, today - sum(a.kept_local for a in advice))
    for item in advice:
        if item.recommended is not None:
            cluster.distributions[item.service] = item.recommended
    routed = measure(cluster, policy).crossing["zone"]
    return {
        "predicted": predicted,
        "simulated": routed,
        "error": abs(predicted - routed) / routed if routed > 1e-9 else abs(predicted),
        "zones_without_endpoint": sorted(
            {f"{a.service}: {z}" for a in advice for z in a.zones_without_endpoint}
        ),
        "routed_calls": any(a.crossing_today > 0 for a in advice),
    }


def measure_scenario(path: Path, cycles: int, seed: int) -> dict[str, Any]:
    moves_only = parse_policy(DEFAULT_POLICY, "built-in")
    policy = parse_policy(DEFAULT_POLICY + AROUND, "planned around routing")
    scenario = load_scenario(path)
    started = time.perf_counter()
    runs = {
        "moves only": simulate(scenario, moves_only, cycles=cycles, mode="migrate", seed=seed),
        "routing only": simulate(
            scenario, policy, cycles=cycles, mode="migrate", seed=seed, moves=False, routing=True
        ),
        "both": simulate(
            scenario, policy, cycles=cycles, mode="migrate", seed=seed, routing=True, steps=True
        ),
    }
    before = _zone(runs["both"], 0)
    rows = {
        name: {
            "crossing_zone": _zone(result),
            "reduction": (before - _zone(result)) / before if before > 1e-9 else 0.0,
            "moves": result.summary()["moves"],
            "routing_changes": result.summary()["routing_changes"],
            "violations": result.summary()["violations"],
        }
        for name, result in runs.items()
    }
    found = prediction(path, policy, seed)
    judged = found["routed_calls"] and not found["zones_without_endpoint"]
    matched = _moves_to_reach(runs["both"], rows["moves only"]["crossing_zone"])
    return {
        "scenario": scenario.name,
        "crossing_zone_before": before,
        "runs": rows,
        "prediction": found,
        "both_moves_to_reach_moves_only": matched,
        "target_met": (matched is not None and matched <= rows["moves only"]["moves"] / 2)
        if judged
        else None,
        "seconds": round(time.perf_counter() - started, 2),
    }


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| scenario | crossing zone before | moves only (moves) | routing only (changes) "
        "| both (moves, changes) | predicted / simulated after routing (error) "
        "| zones with clients but no endpoint | both: moves to reach moves only "
        "| at most half the moves |",
        "|---|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for result in results:
        runs, found = result["runs"], result["prediction"]
        alone, routing, both = runs["moves only"], runs["routing only"], runs["both"]
        met = result["target_met"]
        missing = found["zones_without_endpoint"]
        lines.append(
            f"| {result['scenario']} | {result['crossing_zone_before']:.1f} "
            f"| {alone['crossing_zone']:.1f} ({alone['moves']}) "
            f"| {routing['crossing_zone']:.1f} ({routing['routing_changes']}) "
            f"| {both['crossing_zone']:.1f} ({both['moves']}, {both['routing_changes']}) "
            f"| {found['predicted']:.1f} / {found['simulated']:.1f} ({found['error']:.1%}) "
            f"| {len(missing)} | {result['both_moves_to_reach_moves_only']} "
            f"| {'n/a' if met is None else 'yes' if met else 'no'} |"
        )
    return "\n".join(lines)


def main() -> None:
    args = suite.arguments(__doc__.splitlines()[0], 20)
    results = suite.measure_each(args, measure_scenario)
    heading = (
        f"# Routing against moving, {args.cycles} cycles, seed {args.seed}\n\n"
        "Written by `make bench-routing`. Traffic crossing zones (the scenario's unit) before "
        f"and after {args.cycles} cycles in migrate mode: moves only (the default policy, no "
        "routing change), routing only (the recommended trafficDistribution changes "
        "made from the cycle they are recommended in, no move), and both (with "
        "`routing.plan_around: true` for the last two). The prediction is the "
        "first plan's: the crossing it says remains once its recommended routing is made, "
        "against the crossing the simulator routes then. The target: with both, the cross-zone "
        "traffic comes down to where moves only left it after at most half as many moves (the "
        "moves made up to the one after which it does, counted move by move within a cycle). It "
        "is judged only where Service calls cross "
        "zones and every Service has an endpoint in each of its clients' zones; the column "
        "before it counts (Service, zone) pairs with clients but no endpoint, where routing "
        "cannot keep the calls local (routing.json names them).\n\n"
    )
    suite.write(args, "routing", heading, table(results), results)


if __name__ == "__main__":
    main()
