"""What the planner has won cannot be given back unnoticed: every run of every scenario in
examples/scenarios/ is made as `make bench-quality` makes it (seeded and limited in work, not
time, so it is deterministic) and held against the figures committed in
bench/results/quality.json. A run whose weighted cost at any checkpoint, or whose move count,
is worse by more than 1%, or that breaks a rule the committed run did not, fails. A change that
improves a figure commits the new figures (`make bench-quality`) with it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.quality import CHECKPOINTS, cost_at
from bench.runs import RUNS, run
from bench.suite import ROOT, SCENARIOS
from rebalancer.simulator.scenario import load_scenario

COMMITTED: dict[str, dict[str, Any]] = {
    entry["scenario"]: entry
    for entry in json.loads((ROOT / "bench" / "results" / "quality.json").read_text())
}
TOLERANCE = 0.01


def test_every_scenario_has_committed_figures() -> None:
    assert sorted(COMMITTED) == sorted(path.stem for path in SCENARIOS.glob("*.yaml"))


@pytest.mark.parametrize("name", RUNS)
@pytest.mark.parametrize("scenario", sorted(COMMITTED))
def test_no_run_is_worse_than_its_committed_figures(scenario: str, name: str) -> None:
    result = run(name, load_scenario(SCENARIOS / f"{scenario}.yaml"))
    committed = COMMITTED[scenario]["runs"][name]
    worse = []
    for checkpoint in CHECKPOINTS:
        was, now = committed["weighted_cost_at"][str(checkpoint)], cost_at(result, checkpoint)
        if now > was * (1 + TOLERANCE) + 1e-6:
            worse.append(f"weighted cost at cycle {checkpoint}: {now:.1f}, committed {was:.1f}")
    summary = result.summary()
    if summary["moves"] > committed["moves"] * (1 + TOLERANCE):
        worse.append(f"moves: {summary['moves']}, committed {committed['moves']}")
    for rule, count in summary["violations"].items():
        if count > committed["violations"][rule]:
            worse.append(f"{rule} violations: {count}, committed {committed['violations'][rule]}")
    assert not worse, f"{scenario} ({name}) is worse than committed: " + "; ".join(worse)
