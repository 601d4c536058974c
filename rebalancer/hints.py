"""Placement hints: where the replacement of an evicted pod should land, until it has.

Eviction alone does not move a pod: the scheduler may put the replacement right back. So before a
migrate-mode eviction the controller records a hint for the pod's controller (its ReplicaSet,
StatefulSet or Job, which will create the replacement), and the admission webhook turns the hint
into node affinity on the next pod that controller creates. Hints live in a ConfigMap, so they
survive a controller restart, and they expire, so a stale one never steers a pod.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from urllib3.exceptions import HTTPError

from rebalancer.errors import SourceUnavailableError

HINTS_KEY = "hints.json"
_CONFLICT_ATTEMPTS = 5
_T = TypeVar("_T")


class Hint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str
    owner_kind: str
    owner_name: str
    """The evicted pod's controller, which creates the replacement."""
    workload: str
    domain: dict[str, str]
    """Node label -> value of every level down to the target, e.g. zone and rack labels."""
    required: bool = False
    weight: Annotated[int, Field(ge=1, le=100)] = 100
    expires: float
    """Unix seconds; after this the hint is dropped unused."""

    @property
    def owner(self) -> tuple[str, str, str]:
        return (self.namespace, self.owner_kind, self.owner_name)


class _Hints(BaseModel):
    hints: list[Hint] = []


@dataclass
class HintStore:
    """Hints as JSON in a ConfigMap; every change is written through at once."""

    api: client.ApiClient
    namespace: str
    name: str

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def _read(self) -> tuple[list[Hint], str | None]:
        core = client.CoreV1Api(self.api)
        try:
            config_map = core.read_namespaced_config_map(self.name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                return [], None
            raise SourceUnavailableError(f"hints ConfigMap: HTTP {error.status}") from None
        except (HTTPError, OSError) as error:
            raise SourceUnavailableError(f"hints ConfigMap: {type(error).__name__}") from None
        text = (config_map.data or {}).get(HINTS_KEY, "{}")
        try:
            hints = _Hints.model_validate_json(text).hints
        except ValidationError:
            raise SourceUnavailableError(f"hints ConfigMap: {HINTS_KEY} is not valid") from None
        version = config_map.metadata.resource_version if config_map.metadata else None
        return hints, version

    def _write(self, hints: Iterable[Hint], version: str | None) -> bool:
        """Optimistic concurrency: False when another writer came first (read again and retry)."""
        core = client.CoreV1Api(self.api)
        body = client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name=self.name, namespace=self.namespace, resource_version=version
            ),
            data={HINTS_KEY: _Hints(hints=list(hints)).model_dump_json()},
        )
        try:
            if version is None:
                core.create_namespaced_config_map(self.namespace, body)
            else:
                core.replace_namespaced_config_map(self.name, self.namespace, body)
        except ApiException as error:
            if error.status == 409:
                return False
            raise SourceUnavailableError(f"hints ConfigMap: HTTP {error.status}") from None
        except (HTTPError, OSError) as error:
            raise SourceUnavailableError(f"hints ConfigMap: {type(error).__name__}") from None
        return True

    def _update(self, change: Callable[[list[Hint]], tuple[list[Hint], _T]]) -> _T:
        """Read, change, write; again on a conflict (the webhook of another replica, say)."""
        with self._lock:
            for _attempt in range(_CONFLICT_ATTEMPTS):
                hints, version = self._read()
                changed, result = change(hints)
                if changed == hints or self._write(changed, version):
                    return result
        raise SourceUnavailableError(f"hints ConfigMap: {_CONFLICT_ATTEMPTS} write conflicts")

    def add(self, hint: Hint, now: float) -> None:
        self._update(lambda hints: ([*(h for h in hints if h.expires > now), hint], None))

    def take(self, owner: tuple[str, str, str], now: float) -> Hint | None:
        """The oldest live hint for this controller, removed so it steers exactly one pod."""

        def consume(hints: list[Hint]) -> tuple[list[Hint], Hint | None]:
            live = [h for h in hints if h.expires > now]
            match = next((h for h in live if h.owner == owner), None)
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
        with self._lock:
            return [h for h in self._read()[0] if h.expires > now]


def affinity_patch(pod: dict[str, Any], hint: Hint) -> list[dict[str, Any]]:
    """JSONPatch that adds the hint's domain as node affinity, keeping the pod's own rules.

    Preferred hints add a weighted preference. Required hints add the domain to every existing
    required term (terms are ORed, so each must carry it), or create the one term.
    """
    expressions = [
        {"key": label, "operator": "In", "values": [value]} for label, value in hint.domain.items()
    ]
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    if hint.required:
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        terms = required.get("nodeSelectorTerms") or [{}]
        terms = [
            {**term, "matchExpressions": [*(term.get("matchExpressions") or []), *expressions]}
            for term in terms
        ]
        node_affinity = {
            **node_affinity,
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
        }
    else:
        preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        term = {"weight": hint.weight, "preference": {"matchExpressions": expressions}}
        node_affinity = {
            **node_affinity,
            "preferredDuringSchedulingIgnoredDuringExecution": [*preferred, term],
        }
    operation = "replace" if "affinity" in (pod.get("spec") or {}) else "add"
    return [
        {
            "op": operation,
            "path": "/spec/affinity",
            "value": {**affinity, "nodeAffinity": node_affinity},
        }
    ]
