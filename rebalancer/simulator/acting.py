"""The simulator's moves, made on its cluster as the controller makes them: evictions through
the Eviction API's check, replacements steered as migrate mode steers them, and surges.

Apart from the loop (run.py), which decides what to make each cycle and what it remembers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rebalancer.cluster.model import Pod
from rebalancer.cluster.scoring import Steering
from rebalancer.config.policy import Policy
from rebalancer.planning.cycle import Acted
from rebalancer.planning.landing import expected_landing
from rebalancer.planning.types import Move
from rebalancer.simulator.cluster import SimulatedCluster, workload_key
from rebalancer.simulator.results import SimulatedMode
from rebalancer.simulator.scenario import WorkloadSpec


@dataclass
class Acting:
    """One simulated cycle's moves, made as the controller makes them."""

    cluster: SimulatedCluster
    policy: Policy
    mode: SimulatedMode
    by_key: dict[str, WorkloadSpec]
    now: float
    evicted: list[Acted] = field(default_factory=list)
    surged: list[Move] = field(default_factory=list)
    undone: list[str] = field(default_factory=list)
    """Workloads whose surge was undone, which back off as the controller's do."""
    moved: list[str] = field(default_factory=list)
    landed: int = 0
    refused: int = 0
    fresh: Counter[str] = field(default_factory=Counter)
    """Per workload, the replacements made this cycle that the simulator has Ready at once,
    which the API server would not count as healthy yet."""

    def make(self, moves: list[Move]) -> None:
        """One move, or all the moves of a job: those are evicted first and replaced after, as
        a job's pods all go at once and its ranks may take each other's room."""
        evicted = []
        for move in moves:
            old = self.cluster.snapshot.pods[move.pod]
            workload = self.by_key[workload_key(old)]
            if move.method == "surge":
                self._surge(move, workload, old)
            elif self._evicted(workload, move):
                evicted.append((move, workload, old))
        for move, workload, old in evicted:
            self._replace(move, workload, old)

    def _surge(self, move: Move, workload: WorkloadSpec, old: Pod) -> None:
        """Make-before-break: the new pod, steered as the required hint steers it, then the old
        one removed; a new pod outside the target is removed instead."""
        cluster = self.cluster
        steering = Steering(move.target_labels, True)
        new = cluster.replacement(workload, old, steering=steering)
        labels = cluster.snapshot.nodes[new.node_name].labels if new.node_name else {}
        if move.target_labels.items() <= labels.items():
            cluster.remove(move.pod)
            self.landed += 1
            self.surged.append(move)
            self.moved.append(workload.key)
        else:
            cluster.remove(new.key)
            self.undone.append(workload.key)

    def _evicted(self, workload: WorkloadSpec, move: Move) -> bool:
        """The Eviction API's check (replacements are not Ready before the next cycle), then the
        pod removed."""
        cluster = self.cluster
        if (
            len(cluster.ready_of(workload)) - self.fresh[workload.key] <= workload.promised_ready
            and workload.pdb is not None
        ):
            self.refused += 1
            return False
        cluster.remove(move.pod)
        return True

    def _replace(self, move: Move, workload: WorkloadSpec, old: Pod) -> None:
        if not workload.recreated:  # evicted for good (the planner protects such pods)
            self.evicted.append(Acted(move, None))
            self.moved.append(workload.key)
            return
        cluster, migrate = self.cluster, self.policy.migrate
        steering = None
        if self.mode == "migrate":
            steering = Steering(move.target_labels, migrate.required)
        new = cluster.replacement(workload, old, steering=steering)
        self.fresh[workload.key] += new.ready
        if new.node_name:
            self.landed += (
                move.target_labels.items() <= cluster.snapshot.nodes[new.node_name].labels.items()
            )
        hint = None
        if steering is not None:  # the hint the controller records before a migrate eviction
            hint = expected_landing(
                move,
                required=steering.required,
                weight=migrate.weight,
                expires=self.now + migrate.hint_ttl_seconds,
            )
        self.evicted.append(Acted(move, hint))
        self.moved.append(workload.key)
