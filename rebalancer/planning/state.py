"""Loop protection that must outlive a cycle (and, in the controller, a restart): streaks,
cooldowns, landings awaited and missed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from rebalancer.cluster.topology import Domain
from rebalancer.config.pacing import Cooldown
from rebalancer.planning.landing import Judged, Landing
from rebalancer.planning.surge import SurgeRecord
from rebalancer.planning.types import Move
from rebalancer.strategies.framework import Candidate


class RecentMove(BaseModel):
    """A move remembered: what a later move of the same workload may not undo within the
    cooldown, and undoes after it only when proposed for longer.

    Domains are level name -> value, down to the level the move targeted, so a policy that
    renames or reorders its levels cannot make an old move match the wrong domain.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: str
    left: dict[str, str]
    """The domain the pod left, at the depth of `entered`."""
    entered: dict[str, str]
    at: float
    """Unix seconds."""
    gain: float | None = None
    """What the move was predicted to save (a move of a joint one: its share); None in state
    written before it was kept."""

    def undone_by(self, location: dict[str, str], target: dict[str, str]) -> bool:
        """True if moving a pod from `location` to `target` takes it out of the domain this move
        entered, or puts it into the one this move left: the two halves of a bounce."""
        takes_out = _inside(location, self.entered) and not _inside(target, self.entered)
        return takes_out or self.puts_back(location, target)

    def puts_back(self, location: dict[str, str], target: dict[str, str]) -> bool:
        """True if moving a pod from `location` to `target` puts it into the domain this move
        left: back where the workload was."""
        return _overlap(target, self.left) and not _inside(location, self.left)


def _inside(place: dict[str, str], domain: dict[str, str]) -> bool:
    return domain.items() <= place.items()


def _overlap(first: dict[str, str], second: dict[str, str]) -> bool:
    """Whether the domains can share a node: they agree on every level both name."""
    return all(second[name] == value for name, value in first.items() if name in second)


SPREAD_MEMORY_SECONDS = 3600.0
"""How long after its last move a workload's spread before the rebalancer moved it is kept: long
enough to relocate a workload pod by pod at the default pace, short enough that a workload its
owners later spread out is held to its new spread."""


class SpreadMemory(BaseModel):
    """A workload's spread before the rebalancer moved it, for the HA floor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    domains: int
    at: float
    """Unix seconds of the workload's latest move."""


class PlannerState(BaseModel):
    """Loop protection that must outlive a cycle (and, in the controller, a restart).

    `streaks` counts consecutive cycles in which a move was proposed; `last_moved` holds when each
    workload was last moved, as Unix seconds, for the back-off after missed landings.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    streaks: dict[str, int] = {}
    last_moved: dict[str, float] = {}
    recent_moves: list[RecentMove] = []
    """Moves still remembered (`cooldown.memory_seconds`), oldest first."""
    landings: list[Landing] = []
    """Replacements awaited (in migrate mode their hints, in evict mode the planned domain)
    and not yet judged."""
    misses: dict[str, int] = {}
    """Workload -> replacements in a row that did not land in their target; each doubles the
    workload's cooldown."""
    spread_before: dict[str, SpreadMemory] = {}
    """Workload -> its spread before the rebalancer first moved it: a workload in one zone
    being moved into another whole spans two on the way, and the floor must not hold it there."""

    surges: list[SurgeRecord] = []
    """Surge migrations under way, each at its last step recorded (before the step is made)."""
    target: dict[str, tuple[str, ...]] | None = None
    """Pod -> the key of the domain the last cycle's target placement put it in, where it does
    not run: the next search resumes from it, so the moves of consecutive cycles head the same
    way."""

    def stored(self, indent: int | None = None) -> str:
        """As the state ConfigMap (or `plan --state`) holds it. Fields left at None are left
        out: every such field defaults to None, and a controller from before a field was added
        (its models forbid unknown keys) still reads state written since, a rollback included,
        where the field is unset."""
        return self.model_dump_json(indent=indent, exclude_none=True)

    def with_surge(self, record: SurgeRecord) -> PlannerState:
        """The record added, or put in place of the one of the same pod."""
        kept = [r for r in self.surges if r.pod != record.pod]
        return self.model_copy(update={"surges": [*kept, record]})

    def surge_ended(self, record: SurgeRecord, *, landed: bool, now: float) -> PlannerState:
        """The record dropped, and the workload's misses cleared if the new pod runs in the
        target, or counted one more if the surge was undone, as for a landing."""
        surges = [r for r in self.surges if r.pod != record.pod]
        return self.model_copy(update={"surges": surges}).surge_result(
            record.workload, landed=landed, now=now
        )

    def surge_result(self, workload: str, *, landed: bool, now: float) -> PlannerState:
        """A miss backs the workload off from now (a surge that did not even start too)."""
        misses, last_moved = dict(self.misses), dict(self.last_moved)
        _count_landing(misses, workload, landed)
        if not landed:
            last_moved[workload] = now
        return self.model_copy(update={"misses": misses, "last_moved": last_moved})

    def spread_remembered(self, workload: str, now: float) -> int | None:
        memory = self.spread_before.get(workload)
        if memory is None or now - memory.at >= SPREAD_MEMORY_SECONDS:
            return None
        return memory.domains

    def with_landings(self, judged: Iterable[Judged], pending: list[Landing]) -> PlannerState:
        misses = dict(self.misses)
        for item in judged:
            _count_landing(misses, item.landing.hint.workload, item.result == "landed-in-target")
        return self.model_copy(update={"landings": pending, "misses": misses})

    def awaiting(self, landings: Iterable[Landing]) -> PlannerState:
        return self.model_copy(update={"landings": [*self.landings, *landings]})

    def observe(self, candidates: Iterable[Candidate]) -> PlannerState:
        """Advance streaks: proposed again means one more cycle, absent means back to zero.
        Kept best first (by gain, as the planner takes them), so a state too large for its
        store loses its least promising streaks first (see `within`)."""
        streaks: dict[str, int] = {}
        for candidate in sorted(candidates, key=_by_gain):
            key = streak_key(candidate)
            if key not in streaks:
                streaks[key] = self.streaks.get(key, 0) + 1
        return self.model_copy(update={"streaks": streaks})

    def within(self, max_bytes: int) -> PlannerState:
        """The state as it fits in `max_bytes` of `stored()` JSON, with the least promising
        streaks dropped as needed: a large cluster proposes a streak per candidate, tens of
        thousands, and a streak lost only delays its move. Then, if need be, pods of the
        target: one lost is placed afresh by the next search. Still too large if the rest is."""
        size = len(self.stored().encode())
        if size <= max_bytes:
            return self
        keys = list(self.streaks)
        kept = len(keys)
        while size > max_bytes and kept:
            kept -= 1
            # `"key":count` and its comma
            size -= len(json.dumps(keys[kept]).encode()) + len(str(self.streaks[keys[kept]])) + 2
        target = self.target or {}
        pods = sorted(target)
        placed = len(pods)
        while size > max_bytes and placed:
            placed -= 1
            # `"pod":["value",...]` and its comma
            entry = {pods[placed]: target[pods[placed]]}
            size -= len(json.dumps(entry, separators=(",", ":")).encode()) - 2 + 1
        return self.model_copy(
            update={
                "streaks": {key: self.streaks[key] for key in keys[:kept]},
                "target": {pod: target[pod] for pod in pods[:placed]} or None,
            }
        )

    def record_moves(self, moves: Iterable[Move], now: float, cooldown: Cooldown) -> PlannerState:
        """Remember the moves, and forget those made `cooldown.memory_seconds` ago or more."""
        last_moved = dict(self.last_moved)
        recent = [m for m in self.recent_moves if now - m.at < cooldown.memory_seconds]
        spread = {
            workload: memory
            for workload, memory in self.spread_before.items()
            if now - memory.at < SPREAD_MEMORY_SECONDS
        }
        for move in moves:
            if move.workload is not None:
                last_moved[move.workload] = now
                kept = remembered(move, now)
                # Past its cooldown, the same move again says all the older one did: one day's
                # moves stay few. Within it, each counts towards the workload's moves.
                same = (kept.workload, kept.left, kept.entered)
                recent = [
                    m
                    for m in recent
                    if (m.workload, m.left, m.entered) != same
                    or now - m.at < cooldown.per_workload_seconds
                ]
                recent.append(kept)
                if move.spread_before is not None:
                    spread[move.workload] = SpreadMemory(domains=move.spread_before, at=now)
        return self.model_copy(
            update={"last_moved": last_moved, "recent_moves": recent, "spread_before": spread}
        )


def _count_landing(misses: dict[str, int], workload: str, landed: bool) -> None:
    """A landing in the target clears the workload's misses in a row; anything else adds one."""
    if landed:
        misses.pop(workload, None)
    else:
        misses[workload] = misses.get(workload, 0) + 1


def by_workload(moves: Iterable[RecentMove]) -> dict[str, list[RecentMove]]:
    """Remembered moves grouped by workload, in the order given: read for every pod judged, so
    not scanned whole each time."""
    grouped: dict[str, list[RecentMove]] = {}
    for move in moves:
        grouped.setdefault(move.workload, []).append(move)
    return grouped


def remembered(move: Move, at: float) -> RecentMove:
    """The move as the state remembers it, from `at` (Unix seconds)."""
    assert move.workload is not None
    left = {name: move.origin[name] for name in move.destination if name in move.origin}
    return RecentMove(
        workload=move.workload, left=left, entered=move.destination, at=at, gain=move.gain
    )


def _by_gain(candidate: Candidate) -> float:
    return -candidate.gain


def streak_key(candidate: Candidate) -> str:
    """One key per proposal; a joint move persists only as the same set of moves, a job's as
    long as the job is proposed to move, wherever to. A one-pod candidate skips sorting its one
    move: a cycle observes tens of thousands of candidates."""
    if candidate.job is not None:
        return f"job {candidate.job}"
    decided = candidate.decided
    if not candidate.companions:
        return _move_key(candidate.pod, decided or candidate.target)
    return "+".join(
        _move_key(pod, decided or target) for pod, target in sorted(candidate.targets.items())
    )


def _move_key(pod: str, target: Domain) -> str:
    return f"{pod}->{target.level}:{'/'.join(target.key)}"
