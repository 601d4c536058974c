"""The sections that pace the moves: eviction budgets per cycle, the cooldown that stops a
move being undone, and the persistence a move needs before it is made."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from rebalancer.strict import Strict

NonNegativeLimit = Annotated[int | None, Field(ge=0)]


class Limits(Strict):
    """Eviction budgets on top of PDBs; None means no limit at that scope."""

    per_cycle: NonNegativeLimit = 10
    """Evictions per cycle."""
    per_node: NonNegativeLimit = 2
    """Evictions per cycle from one node."""
    per_namespace: NonNegativeLimit = 5
    """Evictions per cycle in one namespace."""
    per_workload: NonNegativeLimit = 1
    """Evictions per cycle of one workload."""
    per_zone: NonNegativeLimit = 3
    """Evictions per cycle from one zone."""


class Cooldown(Strict):
    """Loop protection: a move is not undone while it is fresh.

    Pacing is the job of persistence and the limits; the cooldown only stops bounces, so a
    workload that needs several moves the same way (a gang packed into one rack) is not slowed.
    """

    per_workload_seconds: Annotated[float, Field(ge=0)] = 900
    """For this long after a workload was moved, none of its pods may leave the domain it was
    moved into, nor enter the one it was moved out of, and it moves no more pods than it has (no
    pod is moved twice). After replacements miss their target it also waits this long since
    its last move, doubling with each miss in a row."""
    memory_seconds: Annotated[float, Field(ge=0)] = 86400
    """How long a move is remembered. After its cooldown and until then, a move that would undo
    it waits `persistence.undo_cycles` rather than `persistence.cycles`: traffic that
    alternates pulls a workload back for less than a period at a time, and is not followed.
    It must also save twice what the move it undoes saved.
    A day, so a workload moved once stays put while its traffic keeps swinging; the state
    holds at most one day of moves."""

    @model_validator(mode="after")
    def _memory_covers_cooldown(self) -> Cooldown:
        if self.memory_seconds < self.per_workload_seconds:
            raise ValueError("memory_seconds must be at least per_workload_seconds")
        return self


class Persistence(Strict):
    cycles: Annotated[int, Field(ge=1)] = 3
    """A move must have been proposed this many consecutive cycles before it is made."""
    undo_cycles: Annotated[int, Field(ge=1)] = 8
    """A move that would undo a remembered one (see `cooldown.memory_seconds`) must have been
    proposed this many consecutive cycles, and at least `cycles`. Traffic that alternates with
    a period of up to this many cycles never pulls that long one way, so the workload is not
    moved back and forth; a lasting change moves it back after this many cycles."""
