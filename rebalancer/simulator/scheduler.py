"""The simulated scheduler: the default profile's filters and scores (`cluster.scoring`), ties
broken by a seeded random choice, so a run is repeatable."""

from __future__ import annotations

import random
from collections.abc import Mapping

from rebalancer.cluster.fit import Occupancy
from rebalancer.cluster.model import Pod, Snapshot
from rebalancer.cluster.scoring import Steering, best, scores


class Scheduler:
    def __init__(self, seed: int) -> None:
        self.random = random.Random(seed)

    def place(
        self,
        pod: Pod,
        snapshot: Snapshot,
        occupancy: Occupancy,
        *,
        within: Mapping[str, str],
        steering: Steering | None,
    ) -> str | None:
        """The node the pod goes to, or None (Pending) when no node would take it."""
        tied = best(scores(pod, snapshot, occupancy, within=within, steering=steering))
        return self.random.choice(tied) if tied else None
