"""What the planner hands on: the moves it chose, and the candidates it skipped and why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import msgspec

from rebalancer.cluster.topology import Domain
from rebalancer.cost.figures import Figures


@dataclass(frozen=True)
class Move:
    pod: str
    workload: str | None
    origin: dict[str, str]
    target: Domain
    destination: dict[str, str]
    node: str
    """The node the fit check found room on; the scheduler may pick another in the domain."""
    target_labels: dict[str, str]
    """Node label -> value for each level down to the target: what steers the replacement."""
    controller: tuple[str, str] | None
    gain: float
    strategy: str
    reason: str
    uid: str = ""
    """The planned pod's UID, for the eviction to name that pod and no namesake; empty when the
    snapshot has none."""
    method: Literal["evict", "surge"] = "evict"
    """`surge`: made make-before-break (a Deployment's pod under `migrate.method: surge`)."""
    spread_before: int | None = None
    """How many domains of the HA floor's level the workload spanned before the rebalancer
    first moved it, which the floor keeps while the workload is being moved."""
    rank: str | None = None
    """The pod's rank in its job (`landing.rank_of`), which steers its replacement alone."""
    job: str | None = None
    """The non-elastic job this move is part of: all its moves are made in one cycle."""


SkipCategory = Literal[
    "protected",
    "settling",
    "cooldown",
    "persistence",
    "below-threshold",
    "limit",
    "pdb",
    "spread",
    "no-fit",
    "landing",
    "surge",
    "target",
]
"""A bounded name for why a candidate was skipped, for metric labels; the reason has details."""


class Skip(msgspec.Struct, frozen=True, gc=False):
    """A Struct, cheap to make: a cycle may skip most of tens of thousands of candidates."""

    pod: str
    reason: str
    strategy: str
    category: SkipCategory


@dataclass(frozen=True)
class Plan:
    moves: tuple[Move, ...]
    skipped: tuple[Skip, ...]
    before: Figures
    after: Figures
    candidates: int
