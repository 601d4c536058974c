"""The yardsticks `make bench-quality` holds each run against (the fair and the unconstrained
optimum, or bounds on them, the fewest moves and the bound within the limits), kept in
bench/results/yardsticks.json under a key of all they depend on: the scenario as parsed, the
placement it starts from, the policy, the seed and the source of the modules that solve them.
Solving them is most of a full run's time (50 minutes), and a change to the planner changes none
of them, so a rerun after one takes minutes; a change to a scenario or a solver solves that
again, by its key."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from bench.suite import ROOT
from rebalancer.config.policy import Policy
from rebalancer.simulator.cluster import SimulatedCluster
from rebalancer.simulator.scenario import Scenario
from rebalancer.simulator.scheduler import Scheduler
from rebalancer.simulator.yardsticks import bound_within_limits, optima

CACHE = ROOT / "bench" / "results" / "yardsticks.json"
SOLVERS = ("fair", "optimum", "sequence", "bound", "bound_program", "bound_objective", "yardsticks")
"""The modules under rebalancer/simulator/ whose code decides a yardstick."""


def key(scenario: Scenario, policy: Policy, seed: int, within: int) -> str:
    """What the yardsticks of a run depend on, hashed: the placement the runs start from
    among them, which the simulated scheduler decides."""
    source = ROOT / "rebalancer" / "simulator"
    start = SimulatedCluster(scenario.in_phase(0), Scheduler(seed)).snapshot.pods
    content = {
        "start": sorted((pod, placed.node_name) for pod, placed in start.items()),
        "scenario": scenario.model_dump(mode="json"),
        "policy": policy.model_dump(mode="json"),
        "seed": seed,
        "within": within,
        "solvers": {name: (source / f"{name}.py").read_text() for name in SOLVERS},
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def solve(scenario: Scenario, policy: Policy, seed: int, within: int) -> dict[str, Any]:
    """The yardsticks, solved: from the placement every run of this seed starts at."""
    started = time.perf_counter()
    cluster = SimulatedCluster(scenario.in_phase(0), Scheduler(seed))
    fair, free = optima(cluster, policy, scenario)
    bound = None
    if fair is not None and not fair.exact:
        bound = bound_within_limits(
            scenario, policy, seed=seed, cycles=within, best=fair.weighted_cost
        )
    return {
        "scenario": scenario.name,
        "seed": seed,
        "fair_optimum": fair.weighted_cost if fair else None,
        "fair_optimum_is_exact": fair.exact if fair else None,
        "unconstrained_optimum": free.weighted_cost if free else None,
        "min_moves_to_optimum": fair.min_moves if fair else None,
        "bound_within_limits": bound,
        "seconds": round(time.perf_counter() - started, 2),
    }


class Cache:
    """The yardsticks solved so far, by key; what a scenario is solved again for replaces its
    earlier entries of the same seed, so the file holds no stale ones."""

    def __init__(self, path: Path = CACHE) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = (
            json.loads(path.read_text()) if path.exists() else {}
        )

    def get(self, found: str) -> dict[str, Any] | None:
        return self.entries.get(found)

    def put(self, found: str, entry: dict[str, Any]) -> None:
        stale = [
            other
            for other, known in self.entries.items()
            if (known["scenario"], known["seed"]) == (entry["scenario"], entry["seed"])
        ]
        for other in stale:
            del self.entries[other]
        self.entries[found] = entry
        self.path.write_text(json.dumps(self.entries, indent=2, sort_keys=True) + "\n")
