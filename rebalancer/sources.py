"""Where the controller's policy and loop-protection state live between cycles and restarts.

Both are ConfigMaps because a restart must not reset cooldowns and persistence streaks, and a
policy change must apply without one. The policy is read again at every cycle (one GET); a change
that does not validate is refused with an Event and a log line, and the last good policy stays.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError
from urllib3.exceptions import HTTPError

from rebalancer.errors import InputError, SourceUnavailableError
from rebalancer.executor import EventRecorder
from rebalancer.planner import PlannerState
from rebalancer.policy import Policy, parse_policy

POLICY_KEY = "policy.yaml"
STATE_KEY = "state.json"
ReloadResult = Literal["loaded", "unchanged", "rejected", "missing"]
_log = logging.getLogger(__name__)


def parse_reference(reference: str, what: str) -> tuple[str, str]:
    namespace, _, name = reference.partition("/")
    if not namespace or not name:
        raise InputError(f"{what}: expected NAMESPACE/NAME, got {reference!r}")
    return namespace, name


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

    api: client.ApiClient
    namespace: str
    name: str
    recorder: EventRecorder
    policy: Policy = field(default_factory=Policy)
    generation: int = 0
    """How many policies have been accepted since start (0: the built-in defaults)."""
    _seen_version: str | None = None

    def current(self) -> tuple[Policy, ReloadResult]:
        core = client.CoreV1Api(self.api)
        try:
            config_map = core.read_namespaced_config_map(self.name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                if self._seen_version != "missing":
                    _log.warning(
                        "policy ConfigMap %s/%s not found: using %s policy",
                        self.namespace,
                        self.name,
                        "the last good" if self.generation else "the safe default (dry-run)",
                    )
                self._seen_version = "missing"
                return self.policy, "missing"
            raise SourceUnavailableError(
                f"policy ConfigMap {self.namespace}/{self.name}: HTTP {error.status}"
            ) from None
        except (HTTPError, OSError) as error:
            raise SourceUnavailableError(
                f"policy ConfigMap {self.namespace}/{self.name}: {type(error).__name__}"
            ) from None
        version = config_map.metadata.resource_version if config_map.metadata else None
        if version == self._seen_version:
            return self.policy, "unchanged"
        self._seen_version = version
        text = (config_map.data or {}).get(POLICY_KEY, "")
        try:
            policy = parse_policy(text, f"ConfigMap {self.namespace}/{self.name} {POLICY_KEY}")
        except InputError as error:
            _log.error("policy rejected, keeping the last good one: %s", error)
            self.recorder.record(
                "ConfigMap",
                self.namespace,
                self.name,
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

    api: client.ApiClient
    namespace: str
    name: str

    def load(self) -> PlannerState:
        core = client.CoreV1Api(self.api)
        try:
            config_map = core.read_namespaced_config_map(self.name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                return PlannerState()
            raise SourceUnavailableError(f"state ConfigMap: HTTP {error.status}") from None
        except (HTTPError, OSError) as error:
            raise SourceUnavailableError(f"state ConfigMap: {type(error).__name__}") from None
        text = (config_map.data or {}).get(STATE_KEY, "{}")
        try:
            return PlannerState.model_validate_json(text)
        except ValidationError:
            # Unreadable state must not unlock evictions: refuse to act until it is fixed.
            raise SourceUnavailableError(
                f"state ConfigMap {self.namespace}/{self.name}: {STATE_KEY} is not valid"
            ) from None

    def save(self, state: PlannerState) -> None:
        core = client.CoreV1Api(self.api)
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=self.name, namespace=self.namespace),
            data={STATE_KEY: state.model_dump_json()},
        )
        try:
            try:
                core.replace_namespaced_config_map(self.name, self.namespace, body)
            except ApiException as error:
                if error.status != 404:
                    raise
                core.create_namespaced_config_map(self.namespace, body)
        except ApiException as error:
            raise SourceUnavailableError(f"state ConfigMap: HTTP {error.status}") from None
        except (HTTPError, OSError) as error:
            raise SourceUnavailableError(f"state ConfigMap: {type(error).__name__}") from None
