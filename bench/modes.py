"""Evict against migrate against surge, live: each scenario on a fresh local control plane (real
API server, scheduler and controllers, kwok nodes, real Prometheus), the controller cycling in one
mode for a fixed number of cycles, judged by the exporter's ground truth; a pod watch sampled
every 50 ms counts each Deployment's Ready pods. Run with `make bench-modes`; writes
bench/results/modes.md and modes.json."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from harness.trial import Method, TrialSummary, run_trial
from rebalancer.config.policy import Mode, load_policy
from rebalancer.simulator.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = {"chatty-pair": "zone", "training-gang": "rack", "single-replica-pair": "zone"}
"""Each scenario, and the level whose crossing traffic it is about."""
MODES: tuple[tuple[Mode, Method], ...] = (
    ("evict", "evict"),
    ("migrate", "evict"),
    ("migrate", "surge"),
)
"""Each mode, and migrate.method: evict-then-steer, or make-before-break for Deployments."""


def table(summaries: list[TrialSummary]) -> str:
    lines = [
        "| scenario | mode | level | crossing before (flows/s) | after | drop | moves "
        "| landed in target | elsewhere | not scheduled | PDB violations | spread violations "
        "| 50 ms samples below desired Ready | samples |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for summary in summaries:
        figures = summary.as_dict()
        mode = summary.mode if summary.method == "evict" else f"{summary.mode} ({summary.method})"
        below = ", ".join(f"{k} {n}" for k, n in sorted(summary.below_desired.items())) or "0"
        lines.append(
            f"| {summary.scenario} | {mode} | {summary.level} "
            f"| {summary.before[summary.level]:.1f} | {summary.after[summary.level]:.1f} "
            f"| {summary.drop:.0%} | {summary.moves} | {summary.landed} "
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
    policy = load_policy(ROOT / "examples" / "demo" / "live-policy.yaml")
    summaries = []
    with tempfile.TemporaryDirectory(prefix="bench-modes-") as workdir:
        for name, level in SCENARIOS.items():
            scenario = load_scenario(ROOT / "examples" / "scenarios" / f"{name}.yaml")
            for mode, method in MODES:
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
    text = table(summaries)
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    heading = (
        f"# Evict against migrate against surge, live, {args.cycles} cycles each\n\n"
        "Written by `make bench-modes`. Crossing rates are the exporter's ground truth once the "
        "last cycle's replacements were Ready; landings are read off the API server. A pod "
        "watch sampled every 50 ms counts each Deployment's Ready pods (bound, Running, Ready, "
        "not terminating); a sample below the desired count is a moment of lost capacity.\n\n"
    )
    (args.results / "modes.md").write_text(heading + text + "\n")
    (args.results / "modes.json").write_text(
        json.dumps([s.as_dict() for s in summaries], indent=2) + "\n"
    )
    print(f"wrote {args.results / 'modes.md'} and modes.json")


if __name__ == "__main__":
    main()
