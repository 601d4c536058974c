"""Where the controller's policy and loop-protection state live between cycles and restarts.

Both are ConfigMaps because a restart must not reset cooldowns and persistence streaks, and a
policy change must apply without one. The policy is read again at every cycle (one GET); a change
that does not validate is refused with an Event and a log line, and the last good policy stays.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from pydantic import ValidationError

from rebalancer.clients.configmaps import DataStore
from rebalancer.clients.events import EventRecorder
from rebalancer.clients.kube_api import ApiClient
from rebalancer.config.policy import Policy, parse_policy
from rebalancer.errors import InputError, SourceUnavailableError
from rebalancer.planning.state import PlannerState

POLICY_KEY = "policy.yaml"
STATE_KEY = "state.json"
STATE_BYTES = 900 * 1024
"""What the state may take of the 1 MiB of data the API server lets a ConfigMap hold, the rest
left for the object's metadata."""
ReloadResult = Literal["loaded", "unchanged", "rejected", "missing"]
_log = logging.getLogger(__name__)


@dataclass
class FixedPolicy:
    """A policy given once: `--policy FILE` for local runs (a bad file stops the start), the demo
    and tests. The holder may swap `policy` between cycles."""

    policy: Policy
    generation: int = 1

    def current(self) -> tuple[Policy, ReloadResult]:
        return self.policy, "unchanged"


@dataclass
class ConfigMapPolicy:
    """The policy in a ConfigMap's `policy.yaml`, re-read every cycle, last good one kept."""

    api: ApiClient
    namespace: str
    name: str
    recorder: EventRecorder
    policy: Policy = field(default_factory=Policy)
    generation: int = 0
    """How many policies have been accepted since start (0: the built-in defaults)."""
    _seen_version: str | None = None

    def __post_init__(self) -> None:
        label = f"policy ConfigMap {self.namespace}/{self.name}"
        self._store = DataStore(self.api, "ConfigMap", self.namespace, self.name, label)

    def current(self) -> tuple[Policy, ReloadResult]:
        namespace, name = self.namespace, self.name
        stored = self._store.read()
        if stored is None:
            if self._seen_version != "missing":
                _log.warning(
                    "policy ConfigMap %s/%s not found: using %s policy",
                    namespace,
                    name,
                    "the last good" if self.generation else "the safe default (dry-run)",
                )
            self._seen_version = "missing"
            return self.policy, "missing"
        if stored.version == self._seen_version:
            return self.policy, "unchanged"
        self._seen_version = stored.version
        text = stored.data.get(POLICY_KEY, "")
        try:
            policy = parse_policy(text, f"ConfigMap {namespace}/{name} {POLICY_KEY}")
        except InputError as error:
            _log.error("policy rejected, keeping the last good one: %s", error)
            self.recorder.record(
                "ConfigMap",
                namespace,
                name,
                reason="PolicyRejected",
                message=str(error),
                warning=True,
            )
            return self.policy, "rejected"
        self.policy = policy
        self.generation += 1
        _log.info("policy loaded (generation %d, mode %s)", self.generation, policy.mode)
        return policy, "loaded"


@dataclass
class ConfigMapState:
    """Planner state (cooldowns, persistence streaks) as JSON in a ConfigMap the controller owns."""

    api: ApiClient
    namespace: str
    name: str

    def __post_init__(self) -> None:
        self._store = DataStore(self.api, "ConfigMap", self.namespace, self.name, "state ConfigMap")

    def load(self) -> PlannerState:
        stored = self._store.read()
        if stored is None:
            return PlannerState()
        try:
            return PlannerState.model_validate_json(stored.data.get(STATE_KEY, "{}"))
        except ValidationError:
            # Unreadable state must not unlock evictions: refuse to act until it is fixed.
            raise SourceUnavailableError(
                f"state ConfigMap {self.namespace}/{self.name}: {STATE_KEY} is not valid"
            ) from None

    def save(self, state: PlannerState) -> None:
        text = state.stored()
        if len(text.encode()) > STATE_BYTES:
            text = self._fitted(state)
        self._store.put({STATE_KEY: text})

    def _fitted(self, state: PlannerState) -> str:
        """The state without its least promising streaks, as stored; an error if even that is
        too large. Called only when the whole state is too large, so a save serializes once."""
        fitted = state.within(STATE_BYTES)
        text = fitted.stored()
        where = f"state ConfigMap {self.namespace}/{self.name}"
        size = len(text.encode())
        if size > STATE_BYTES:
            raise SourceUnavailableError(
                f"{where}: {size // 1024} KiB without persistence streaks, more than the "
                f"{STATE_BYTES // 1024} KiB kept for it"
            )
        _log.warning(
            "%s: kept the %d most promising of %d persistence streaks, to fit in %d KiB",
            where,
            len(fitted.streaks),
            len(state.streaks),
            STATE_BYTES // 1024,
        )
        return text
