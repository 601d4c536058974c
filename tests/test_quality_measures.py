"""The quality benchmark's measures of a run under traffic phases: a new phase's traffic may cost
more with nothing moved, which is no rise; settling counts the cycles a phase kept moving."""

from __future__ import annotations

from bench.quality import _highest_rise, _settling
from rebalancer.simulator.results import CycleFigures, SimulationResult
from rebalancer.simulator.scenario import parse_scenario

PHASED = parse_scenario(
    "name: t\nworkloads: [{name: a, replicas: 2}, {name: b, replicas: 2}]\nphase_cycles: 3\n"
    "traffic_phases: [[{source: a, destination: b, rate: 1}], [{source: b, destination: a, "
    "rate: 2}]]\n",
    "t",
)


def _run(costs: list[float], evictions: list[int]) -> SimulationResult:
    rows = tuple(
        CycleFigures(n, {}, cost, None, moved, 0, 0, {"pdb": 0, "capacity": 0, "spread": 0})
        for n, (cost, moved) in enumerate(zip(costs, evictions, strict=True))
    )
    return SimulationResult("t", "migrate", 0, rows, "USD")


def test_a_rise_counts_only_within_a_phase() -> None:
    # Phases: cycles 0-2, 3-5, 6-8. The jump at cycle 3 is the new phase's traffic; the one at
    # cycle 5 is a move that made its phase worse.
    run = _run([100, 80, 80, 200, 150, 165, 90, 90, 90], [0, 1, 0, 0, 1, 1, 0, 0, 0])
    assert abs(_highest_rise(PHASED, run) - 0.10) < 1e-9


def test_settling_is_the_most_cycles_a_phase_kept_moving() -> None:
    run = _run([100] * 9, [1, 1, 0, 0, 1, 1, 0, 0, 0])
    assert _settling(PHASED, run) == 3  # cycles 3, 4, 5: moves in 4 and 5
    steady = PHASED.model_copy(update={"traffic_phases": ()})
    assert _settling(steady, run) is None
    assert _highest_rise(steady, _run([100, 80, 88], [0, 1, 0])) == 0.1
