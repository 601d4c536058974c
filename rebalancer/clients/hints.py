"""Placement hints in a ConfigMap, so they survive a controller restart.

Eviction alone does not move a pod: the scheduler may put the replacement right back. So before a
migrate-mode eviction the controller records a hint for the pod's controller, and the admission
webhook turns the hint into node affinity on the next pod that controller creates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from rebalancer.clients.configmaps import DataStore, Stored
from rebalancer.clients.kube_api import ApiClient
from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.landing import Hint, hint_for

HINTS_KEY = "hints.json"
HINT_CALL_SECONDS = 1.0
"""Per API call: a review waits for at most one hint read before it is answered unchanged."""
_T = TypeVar("_T")


class _Hints(BaseModel):
    hints: list[Hint] = []


@dataclass
class HintStore:
    """Hints as JSON in a ConfigMap; every change is written through at once."""

    api: ApiClient
    namespace: str
    name: str

    def __post_init__(self) -> None:
        self._store = DataStore(
            self.api,
            "ConfigMap",
            self.namespace,
            self.name,
            "hints ConfigMap",
            request_timeout=HINT_CALL_SECONDS,
        )

    def _update(self, change: Callable[[list[Hint]], tuple[list[Hint], _T]]) -> _T:
        """Read, change, write; again on a conflict (the webhook of another replica, or another
        review here). No lock is held across the calls: one slow answer must not hold up every
        other review, and the write at the version read settles any race."""

        def changed(stored: Stored | None) -> tuple[dict[str, str] | None, _T]:
            hints = self._hints(stored)
            kept, result = change(hints)
            data = (
                None
                if kept == hints
                else {HINTS_KEY: _Hints(hints=kept).model_dump_json(exclude_none=True)}
            )
            return data, result

        return self._store.update(changed)

    @staticmethod
    def _hints(stored: Stored | None) -> list[Hint]:
        text = stored.data.get(HINTS_KEY, "{}") if stored is not None else "{}"
        try:
            return _Hints.model_validate_json(text).hints
        except ValidationError:
            raise SourceUnavailableError(f"hints ConfigMap: {HINTS_KEY} is not valid") from None

    def add(self, hint: Hint, now: float) -> None:
        self._update(lambda hints: ([*(h for h in hints if h.expires > now), hint], None))

    def take(self, owner: tuple[str, str, str], now: float, rank: str | None = None) -> Hint | None:
        """The oldest live hint for this controller that may steer a pod of this rank (a hint
        with a rank steers only that rank), removed so it steers exactly one pod."""

        def consume(hints: list[Hint]) -> tuple[list[Hint], Hint | None]:
            live = [h for h in hints if h.expires > now]
            match = hint_for(live, owner, rank)
            if match is not None:
                live.remove(match)
            return live, match

        return self._update(consume)

    def withdraw_unless(self, awaited: Callable[[Hint], bool], now: float) -> list[Hint]:
        """Remove the live hints that nothing awaits (and the expired ones); return those
        withdrawn."""

        def keep(hints: list[Hint]) -> tuple[list[Hint], list[Hint]]:
            live = [h for h in hints if h.expires > now]
            return [h for h in live if awaited(h)], [h for h in live if not awaited(h)]

        return self._update(keep)

    def pending(self, now: float) -> list[Hint]:
        return [h for h in self._hints(self._store.read()) if h.expires > now]
