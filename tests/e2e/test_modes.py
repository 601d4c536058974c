"""The migrate-mode promise, live: on a chatty pair split across zones and a training gang
spread over racks, migrate cuts the crossing traffic by 80% or more and lands 90% of its
replacements where it sent them, while evict mode, run for as many cycles beside it, is shown for
comparison. In both modes no PDB is broken and the HA ledger keeps its zone spread. On Sock Shop,
a microservice system of 27 pods, the live drop is the simulator's, within 20 points."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.trial import TrialSummary, run_trial, scoped
from rebalancer.config.policy import Mode, load_policy
from rebalancer.simulator.run import simulate
from rebalancer.simulator.scenario import load_scenario

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).parents[2] / "examples"
CYCLES = 5


def _trial(name: str, level: str, mode: Mode, workdir: Path) -> TrialSummary:
    scenario = load_scenario(EXAMPLES / "scenarios" / f"{name}.yaml")
    summary = run_trial(
        scenario,
        scoped(load_policy(EXAMPLES / "demo" / "live-policy.yaml"), scenario),
        workdir / mode,
        mode=mode,
        cycles=CYCLES,
        level=level,
    )
    print(summary.as_dict())
    assert summary.invariant_polls > 0  # the watch really looked, or "no violation" means nothing
    assert summary.pdb_violations == []
    assert summary.spread_violations == []
    return summary


@pytest.mark.parametrize(("name", "level"), [("chatty-pair", "zone"), ("training-gang", "rack")])
def test_migrate_pulls_the_traffic_together_and_lands_its_moves(
    name: str, level: str, tmp_path: Path
) -> None:
    _trial(name, level, "evict", tmp_path)  # the same checks; its figures are for comparison
    migrate = _trial(name, level, "migrate", tmp_path)
    assert migrate.moves > 0
    assert migrate.drop >= 0.8
    assert migrate.landed / migrate.judged >= 0.9
    # The simulator, on the same scenario and policy, must tell the same story as the real
    # control plane: it is the instant stand-in for this test.
    simulated = simulate(
        load_scenario(EXAMPLES / "scenarios" / f"{name}.yaml"),
        load_policy(EXAMPLES / "demo" / "live-policy.yaml"),
        cycles=CYCLES,
        mode="migrate",
        seed=0,
    ).summary()
    before, after = simulated["crossing_before"][level], simulated["crossing_after"][level]
    print(f"simulated: {level} {before:.1f} -> {after:.1f}, moves {simulated['moves']}")
    assert (before - after) / before == pytest.approx(migrate.drop, abs=0.2)


def test_a_microservice_system_moves_live_as_simulated(tmp_path: Path) -> None:
    """Sock Shop (14 services and its load generator, 27 pods, PDBs), split by the default
    scheduler over three zones: the controller's migrate cycles on the real control plane drop
    its cross-zone traffic by what the simulator predicts, within 20 points, and land where
    they aim."""
    scenario = load_scenario(EXAMPLES / "scenarios" / "sock-shop.yaml")
    policy = scoped(load_policy(EXAMPLES / "demo" / "live-policy.yaml"), scenario)
    live = _trial("sock-shop", "zone", "migrate", tmp_path)
    simulated = simulate(scenario, policy, cycles=CYCLES, mode="migrate", seed=0).summary()
    before, after = simulated["crossing_before"]["zone"], simulated["crossing_after"]["zone"]
    print(f"simulated: zone {before:.1f} -> {after:.1f}, moves {simulated['moves']}")
    assert live.moves > 0 and before - after > 0
    assert live.landed / live.judged >= 0.9
    assert (before - after) / before == pytest.approx(live.drop, abs=0.2)
