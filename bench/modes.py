"""Evict against migrate against surge, live: each scenario on a fresh local control plane (real
API server, scheduler and controllers, kwok nodes, real Prometheus), the controller cycling in one
mode for a fixed number of cycles, judged by the exporter's ground truth; a pod watch sampled
every 50 ms counts each Deployment's Ready pods. Beside each live drop, the simulator's for the
same scenario, policy, mode and cycles, so the simulated figures of bench-quality can be held
against the real scheduler. Run with `make bench-modes`; writes bench/results/modes.md and
modes.json."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from harness.trial import Method, TrialSummary, run_trial, scoped, with_method
from rebalancer.config.policy import Policy, load_policy
from rebalancer.simulator.results import SimulatedMode
from rebalancer.simulator.run import simulate
from rebalancer.simulator.scenario import Scenario, load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {
    "chatty-pair": "zone",
    "training-gang": "rack",
    "single-replica-pair": "zone",
    "sock-shop": "zone",
}
"""Each scenario, and the level whose crossing traffic it is about."""
MODES: tuple[tuple[SimulatedMode, Method], ...] = (
    ("evict", "evict"),
    ("migrate", "evict"),
    ("migrate", "surge"),
)
"""Each mode, and migrate.method: evict-then-steer, or make-before-break for Deployments."""


def simulated_drop(
    scenario: Scenario,
    policy: Policy,
    mode: SimulatedMode,
    method: Method,
    *,
    cycles: int,
    level: str,
) -> float:
    """The drop the simulator predicts for the same run: its scheduler, its landings."""
    result = simulate(scenario, with_method(policy, method), cycles=cycles, mode=mode, seed=0)
    before, after = result.cycles[0].crossing[level], result.cycles[-1].crossing[level]
    return (before - after) / before if before > 0 else 0.0


def table(summaries: list[TrialSummary], simulated_drops: list[float]) -> str:
    lines = [
        "| scenario | mode | level | crossing before (flows/s) | after | drop | moves "
        "| simulated drop | landed in target | elsewhere | not scheduled | PDB violations "
        "| spread violations | 50 ms samples below desired Ready | samples |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for summary, simulated in zip(summaries, simulated_drops, strict=True):
        figures = summary.as_dict()
        mode = summary.mode if summary.method == "evict" else f"{summary.mode} ({summary.method})"
        below = ", ".join(f"{k} {n}" for k, n in sorted(summary.below_desired.items())) or "0"
        lines.append(
            f"| {summary.scenario} | {mode} | {summary.level} "
            f"| {summary.before[summary.level]:.1f} | {summary.after[summary.level]:.1f} "
            f"| {summary.drop:.0%} | {summary.moves} | {simulated:.0%} | {summary.landed} "
            f"| {figures['landed_elsewhere']} | {figures['not_scheduled']} "
            f"| {len(summary.pdb_violations)} | {len(summary.spread_violations)} "
            f"| {below} | {summary.ready_samples} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    base = load_policy(ROOT / "examples" / "demo" / "live-policy.yaml")
    summaries, simulated = [], []
    with tempfile.TemporaryDirectory(prefix="bench-modes-") as workdir:
        for name, level in SCENARIOS.items():
            scenario = load_scenario(ROOT / "examples" / "scenarios" / f"{name}.yaml")
            policy = scoped(base, scenario)
            for mode, method in MODES:
                simulated.append(
                    simulated_drop(scenario, policy, mode, method, cycles=args.cycles, level=level)
                )
                print(f"{name}, {mode} mode ({method}), {args.cycles} cycles", flush=True)
                summaries.append(
                    run_trial(
                        scenario,
                        policy,
                        Path(workdir) / f"{name}-{mode}-{method}",
                        mode=mode,
                        cycles=args.cycles,
                        level=level,
                        method=method,
                    )
                )
    text = table(summaries, simulated)
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    heading = (
        f"# Evict against migrate against surge, live, {args.cycles} cycles each\n\n"
        "Written by `make bench-modes`. Crossing rates are the exporter's ground truth once the "
        "last cycle's replacements were Ready; landings are read off the API server. A pod "
        "watch sampled every 50 ms counts each Deployment's Ready pods (bound, Running, Ready, "
        "not terminating); a sample below the desired count is a moment of lost capacity. "
        "The simulated drop is the simulator's for the same scenario, policy, mode and cycles "
        "(seed 0), and each scenario's policy moves pods in its own namespaces.\n\n"
    )
    (args.results / "modes.md").write_text(heading + text + "\n")
    (args.results / "modes.json").write_text(
        json.dumps(
            [
                {**s.as_dict(), "simulated_drop": drop}
                for s, drop in zip(summaries, simulated, strict=True)
            ],
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {args.results / 'modes.md'} and modes.json")


if __name__ == "__main__":
    main()
