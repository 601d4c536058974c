"""What every strategy sees and returns.

Strategies only propose. Budgets, PDBs, fit and cooldowns are the planner's, so that a new strategy
cannot forget a safety check and two strategies cannot spend the same budget twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import msgspec
from pydantic import BaseModel, ConfigDict

from rebalancer.cluster.fit import Occupancy
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Domain, Topology
from rebalancer.cost.model import CostModel


class StrategyArgs(BaseModel):
    """Args shared by every strategy; each strategy extends it with its own, with defaults."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
    )

    level: str = "zone"
    """The topology level, by name, at which the strategy judges placements."""

    @property
    def finest(self) -> str:
        """The finest level, by name, the strategy places pods at."""
        return self.level

    def level_problems(self, names: Sequence[str]) -> list[str]:
        """What is wrong with the levels these args name, given the policy's levels in order
        from the widest; each problem starts with the field, for the policy's error."""
        if self.level not in names:
            return [f"level: unknown level {self.level!r} (levels: {', '.join(names)})"]
        return []


class Candidate(msgspec.Struct, frozen=True, gc=False):
    """A Struct: a strategy may propose one for most pods, and a Struct is made in C where a
    frozen dataclass runs Python code for each field."""

    pod: str
    target: Domain
    gain: float
    """Weighted traffic saved, judged on the placement the strategy saw."""
    reason: str
    strategy: str
    companions: tuple[tuple[str, Domain], ...] = ()
    """Pods that must move in the same cycle, each into its domain, for the gain to exist: a
    pair neither of whose domains has room for the other, moved together into a third. The
    planner makes all of these moves or none."""
    job: str | None = None
    """Set on the one candidate that moves a non-elastic job (planning/jobs.py): its moves
    count as one disruption, and the restart must pay (`jobs` in the policy)."""
    finest: int | None = None
    """The finest level, by index, the strategy places at, when finer than `target`'s: the
    planner moves the pods into the domain at that level, within `target`, where their peers
    save them most, when every rule allows it there, else into `target`. Worked out only for
    the few candidates a cycle tries, on the model with the cycle's earlier moves in it, so
    the candidate is ranked, and persists, as the move into `target`: narrowing all of a
    cycle's candidates up front took split-peers 25 times as long at 100,000 pods."""
    decided: Domain | None = None
    """Set on a candidate narrowed by the planner (`into`): the domain it was proposed for,
    which it persists as."""

    def into(self, inside: Domain) -> Candidate:
        """The same pods, all into `inside`, a domain within `target`, as decided for it."""
        return msgspec.structs.replace(
            self,
            target=inside,
            companions=tuple((pod, inside) for pod, _target in self.companions),
            finest=None,
            decided=self.target,
        )

    @property
    def targets(self) -> dict[str, Domain]:
        """Every pod this candidate moves, with its domain."""
        return {self.pod: self.target, **dict(self.companions)}

    @property
    def pods(self) -> tuple[str, ...]:
        """Every pod this candidate moves: what the planner asks of each of tens of thousands of
        candidates, without building `targets`."""
        return (
            (self.pod, *(pod for pod, _domain in self.companions))
            if self.companions
            else (self.pod,)
        )


@dataclass(frozen=True)
class ClusterView:
    """A read-only view of one cycle; the cost model is the planner's starting point."""

    snapshot: Snapshot
    topology: Topology
    cost: CostModel
    occupancy: Occupancy


class Strategy(Protocol):
    name: str

    def propose(self, view: ClusterView) -> list[Candidate]: ...
