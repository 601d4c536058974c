"""The runs every scenario of the suite is measured by, in one place: `make bench-quality`,
`make bench-compare` and the quality guard of `make test` (tests/test_quality_guard.py) run the
same ones, so a figure committed by one is what the others hold a change against."""

from __future__ import annotations

from rebalancer.config.policy import Policy, parse_policy
from rebalancer.simulator.results import SimulationResult
from rebalancer.simulator.run import DEFAULT_POLICY, simulate
from rebalancer.simulator.scenario import Scenario
from rebalancer.simulator.yardsticks import naive_baseline

UNPACED = """
persistence: {cycles: 1, undo_cycles: 1}
cooldown: {per_workload_seconds: 0, memory_seconds: 0}
limits: {per_cycle: null, per_node: null, per_namespace: null, per_workload: null, per_zone: null}
"""
"""Pacing off, to tell how much of a shortfall is the strategies and how much the safety pace."""
CYCLES = 30
"""The cycles each run lasts."""
RUNS = ("naive", "evict", "migrate", "migrate, unpaced")


def default_policy() -> Policy:
    """The built-in simulation policy: the controller's safety defaults."""
    return parse_policy(DEFAULT_POLICY, "built-in")


def run(name: str, scenario: Scenario, *, cycles: int = CYCLES, seed: int = 0) -> SimulationResult:
    """One of `RUNS` on the scenario: deterministic for a seed (work-limited, never timed)."""
    policy = default_policy()
    if name == "naive":
        return naive_baseline(scenario, policy, seed=seed)
    if name == "evict":
        return simulate(scenario, policy, cycles=cycles, mode="evict", seed=seed)
    if name == "migrate":
        return simulate(scenario, policy, cycles=cycles, mode="migrate", seed=seed)
    if name == "migrate, unpaced":
        unpaced = parse_policy(DEFAULT_POLICY + UNPACED, "unpaced")
        return simulate(scenario, unpaced, cycles=cycles, mode="migrate", seed=seed)
    raise ValueError(f"no run named {name!r}: one of {', '.join(RUNS)}")
