"""The routing benchmark counts the moves a run took to reach a crossing move by move: counted by
whole cycles, the moves a cycle made after the crossing came down would be charged too."""

from __future__ import annotations

from pathlib import Path

from bench.routing import _moves_to_reach
from rebalancer.config.policy import parse_policy
from rebalancer.simulator.results import CycleFigures, SimulationResult
from rebalancer.simulator.run import DEFAULT_POLICY, simulate
from rebalancer.simulator.scenario import load_scenario

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "scenarios"
CLEAN = {"pdb": 0, "capacity": 0, "spread": 0}


def _row(cycle: int, zone: float, steps: list[tuple[int, float]]) -> CycleFigures:
    return CycleFigures(
        cycle,
        {"zone": zone},
        zone,
        None,
        steps[-1][0] if steps else 0,
        0,
        0,
        CLEAN,
        steps=tuple((made, {"zone": after}) for made, after in steps),
    )


def test_moves_are_counted_up_to_the_one_that_reaches_the_crossing() -> None:
    run = SimulationResult(
        "t",
        "migrate",
        0,
        (
            _row(0, 100, []),
            _row(1, 70, [(0, 100), (1, 90), (2, 80), (3, 70)]),
            _row(2, 40, [(0, 70), (1, 50), (2, 45), (3, 40)]),
        ),
        "USD",
    )
    assert _moves_to_reach(run, 100) == 0
    assert _moves_to_reach(run, 80) == 2
    assert _moves_to_reach(run, 50) == 4  # three in cycle 1, one in cycle 2
    assert _moves_to_reach(run, 10) is None


def test_the_steps_of_a_simulated_cycle_end_where_the_cycle_does() -> None:
    policy = parse_policy(DEFAULT_POLICY, "built-in")
    scenario = load_scenario(EXAMPLES / "chatty-pair.yaml")
    plain = simulate(scenario, policy, cycles=6, mode="migrate", seed=0)
    stepped = simulate(scenario, policy, cycles=6, mode="migrate", seed=0, steps=True)
    assert [r.crossing for r in stepped.cycles] == [r.crossing for r in plain.cycles]
    assert sum(r.evictions for r in stepped.cycles) > 0
    for before, row in zip(stepped.cycles, stepped.cycles[1:], strict=False):
        assert row.steps[0] == (0, before.crossing)
        assert row.steps[-1] == (row.evictions, row.crossing)
