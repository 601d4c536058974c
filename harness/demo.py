"""`make demo`: the rebalancer live, on the local control plane, in about two minutes.

The cluster is 3 zones x 2 racks x 2 kwok nodes, with the real API server, scheduler and
controllers. It runs a shop frontend in zone a that talks hard to its cart in zone b, a training
gang, a ledger spread over the zones on purpose, and a quiet agent. The controller runs one
dry-run cycle, then migrate cycles. After each cycle it prints the true traffic crossing zones and
racks (from the exporter, not from the rebalancer's own model), the moves, and where the
replacements landed. It ends with a before/after summary and a plot. Ctrl-C stops everything.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from harness.paths import EXAMPLES
from harness.trial import Trial, TrialCycle, live_trial
from rebalancer.config.policy import load_policy
from rebalancer.simulator.plots import plot_over_cycles
from rebalancer.simulator.scenario import load_scenario


def _print(row: TrialCycle) -> None:
    print(
        f"{row.cycle:>5}  {row.mode:<8} {row.crossing['zone']:>10.1f} {row.crossing['rack']:>10.1f}"
        f" {len(row.planned):>6}  {row.landed:>6} {row.elsewhere:>9}   {row.result}"
    )
    for move in row.planned:
        print(f"{'':7}{move.pod} -> {move.destination} ({move.strategy})")


def _cycles(trial: Trial, cycles: int) -> list[TrialCycle]:
    rows = [trial.cycle(0, "dry-run")]
    _print(rows[0])
    for number in range(1, cycles + 1):
        rows.append(trial.cycle(number, "migrate"))
        _print(rows[-1])
        if not rows[-1].attempted:
            break
    return rows


def run(workdir: Path, cycles: int) -> list[TrialCycle]:
    """Run the demo; returns one row of figures per cycle, the first the dry run."""
    shutil.rmtree(workdir, ignore_errors=True)  # a fresh cluster each time, as on a new machine
    workdir.mkdir(parents=True)
    scenario = load_scenario(EXAMPLES / "scenarios" / "demo.yaml")
    policy = load_policy(EXAMPLES / "demo" / "live-policy.yaml")
    print("starting the local control plane (the first run builds it, which takes minutes)")
    print("then loading the demo scenario and waiting for Prometheus to see its traffic")
    with live_trial(scenario, policy, workdir) as trial:
        print(
            f"\nPrometheus: {trial.controller.prometheus_url}"
            f"   kubeconfig: {trial.cluster.kubeconfig}\n"
        )
        print("cycle  mode      zone-flows rack-flows  moves  landed elsewhere   result")
        rows = _cycles(trial, cycles)
    _summary(rows, workdir / "demo.png")
    return rows


def _summary(rows: list[TrialCycle], plot: Path) -> None:
    first, last = rows[0].crossing, rows[-1].crossing
    moves = sum(len(row.planned) for row in rows if row.mode != "dry-run")
    landed = sum(row.landed for row in rows)
    print("\n              before      after")
    print(f"zone flows/s  {first['zone']:>8.1f} {last['zone']:>10.1f}")
    print(f"rack flows/s  {first['rack']:>8.1f} {last['rack']:>10.1f}")
    print(f"moves: {moves}, landed in the planned domain: {landed}")
    plot_over_cycles(
        [row.cycle for row in rows],
        {
            "crossing zones": [row.crossing["zone"] for row in rows],
            "crossing racks": [row.crossing["rack"] for row in rows],
        },
        plot,
        title="topology-rebalancer demo: traffic crossing the network",
        xlabel="cycle (0: dry-run)",
        ylabel="flows/s (ground truth)",
    )
    print(f"plot: {plot.resolve()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(".demo"))
    parser.add_argument("--cycles", type=int, default=6, help="migrate cycles at most")
    args = parser.parse_args()
    try:
        run(args.workdir, args.cycles)
    except KeyboardInterrupt:
        print("\nstopped; every process of the demo has been ended")
        sys.exit(130)


if __name__ == "__main__":
    main()
