"""The one eviction path: every eviction goes through the Eviction API here, so
PodDisruptionBudgets always hold: the planned moves, and the release of a replacement left Pending.

Dry-run is not a branch in the planner: it is this module sending the same Eviction with
`dryRun: ["All"]`, so the API server itself judges the PDB and a dry run reports exactly the
refusals a real run would meet, and evicts nothing. Every eviction names the UID of the pod that
was judged, where the snapshot had one, as a precondition, and every eviction sent or refused is
an Event on the pod.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rebalancer.clients.events import EventRecorder
from rebalancer.clients.hints import HintStore
from rebalancer.config.modes import Migrate
from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.landing import Hint, expected_landing
from rebalancer.planning.types import Move

EvictionResult = Literal[
    "evicted", "would-evict", "refused-by-pdb", "cancelled", "failed", "surged", "would-surge"
]
"""How a move was acted on. `cancelled`: the cluster changed between planning and evicting, so
the move was not sent; `surged` / `would-surge`: a surge migration was started (or would be),
with nothing evicted."""
_log = logging.getLogger(__name__)
_REPLACED = "the pod was replaced by another of the same name since it was planned"


@dataclass(frozen=True)
class Outcome:
    move: Move
    result: EvictionResult
    detail: str = ""
    hint: Hint | None = None
    """In migrate mode, the hint recorded for the replacement of an evicted pod."""


def _names_the_uid_precondition(error: ApiException) -> bool:
    """A Conflict for the UID precondition, not another one: "the UID in the precondition (...)
    does not match the UID in record" (older servers: "Precondition failed: UID in
    precondition")."""
    text = str(error.body or "").lower()
    return "uid in" in text and "precondition" in text


def _domain(move: Move) -> str:
    return ", ".join(f"{level}={value}" for level, value in move.destination.items())


@dataclass(frozen=True)
class Steering:
    """Migrate mode: a hint is recorded before each eviction, for the webhook to apply."""

    hints: HintStore
    settings: Migrate
    clock: Callable[[], float]

    def hint_for(self, move: Move) -> Hint | None:
        return expected_landing(
            move,
            required=self.settings.required,
            weight=self.settings.weight,
            expires=self.clock() + self.settings.hint_ttl_seconds,
        )


class EvictionExecutor:
    """Sends one policy/v1 Eviction per move; in dry-run with dryRun=All; in migrate mode after
    recording where the replacement should go."""

    def __init__(
        self,
        api: client.ApiClient,
        recorder: EventRecorder,
        dry_run: bool,
        steering: Steering | None = None,
    ) -> None:
        if dry_run and steering is not None:
            raise ValueError("a dry run records no hints")
        self.core = client.CoreV1Api(api)
        self.recorder = recorder
        self.dry_run = dry_run
        self.steering = steering

    def execute(
        self, moves: tuple[Move, ...], still_allowed: Callable[[], bool] = lambda: True
    ) -> list[Outcome]:
        """Evict in order; stop at once when `still_allowed` turns false (leadership lost). A
        job's moves are all checked again before its first is sent, and none is sent if one
        no longer holds or its first eviction fails: a job moved in part restarts for less
        than it was planned for. Once one has gone, the rest follow."""
        outcomes: list[Outcome] = []
        held: dict[str, str | None] = {}
        sent: set[str] = set()  # jobs of which an eviction went out: the rest follows
        failed_first: dict[str, str] = {}
        for move in moves:
            if not still_allowed():
                _log.warning(
                    "no longer allowed to act: %d moves not sent", len(moves) - len(outcomes)
                )
                break
            if move.job is not None and move.job not in held:
                held[move.job] = self._job_outdated([m for m in moves if m.job == move.job])
            reason = held.get(move.job) if move.job is not None else None
            if reason is None and move.job is not None and move.job in failed_first:
                reason = f"its first eviction failed ({failed_first[move.job]})"
            if reason is not None:
                namespace, name = move.pod.split("/", 1)
                message = f"job {move.job} not moved: {reason}"
                self.recorder.record(
                    "Pod",
                    namespace,
                    name,
                    reason="EvictionCancelled",
                    message=f"{message}; not sent",
                )
                outcomes.append(Outcome(move, "cancelled", message))
                continue
            outcome = self._evict(move)
            outcomes.append(outcome)
            if move.job is not None and move.job not in sent:
                if outcome.result in ("evicted", "would-evict"):
                    sent.add(move.job)
                else:  # nothing of the job went: keep it whole, for a later cycle
                    failed_first[move.job] = f"{move.pod}: {outcome.detail or outcome.result}"
        return outcomes

    def _job_outdated(self, moves: list[Move]) -> str | None:
        for move in moves:
            outdated = self._outdated(move)
            if outdated is not None:
                return f"{move.pod}: {outdated}"
        return None

    def _evict(self, move: Move) -> Outcome:
        namespace, name = move.pod.split("/", 1)
        outdated = self._outdated(move)
        if outdated is not None:
            self.recorder.record(
                "Pod", namespace, name, reason="EvictionCancelled", message=f"{outdated}; not sent"
            )
            return Outcome(move, "cancelled", outdated)
        body = self._eviction(namespace, name, move.uid)
        why = f"{move.strategy}: {move.reason}; gain {move.gain:.4g}; target {_domain(move)}"
        hint = None
        if self.steering is not None:
            hint = self.steering.hint_for(move)
            if hint is None:
                return Outcome(move, "failed", "no controller to steer the replacement")
            try:
                self.steering.hints.add(hint, self.steering.clock())
            except SourceUnavailableError as error:
                return Outcome(move, "failed", f"hint not recorded: {error}")
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body)
        except ApiException as error:
            self._withdraw(hint)
            if error.status == 409 and _names_the_uid_precondition(error):
                self.recorder.record(
                    "Pod",
                    namespace,
                    name,
                    reason="EvictionCancelled",
                    message=f"{_REPLACED}: the API server refused the eviction",
                )
                return Outcome(move, "cancelled", f"{_REPLACED} (HTTP 409)")
            if error.status == 429:
                # The PDB refuses now; a later cycle may try again. Never fall back to delete.
                self.recorder.record(
                    "Pod",
                    namespace,
                    name,
                    reason="EvictionRefused",
                    message=f"the PodDisruptionBudget refused ({why})",
                )
                return Outcome(move, "refused-by-pdb", "HTTP 429")
            detail = f"HTTP {error.status} {error.reason}"
            self.recorder.record(
                "Pod",
                namespace,
                name,
                reason="EvictionFailed",
                message=f"{detail} ({why})",
                warning=True,
            )
            return Outcome(move, "failed", detail)
        except (HTTPError, OSError) as error:
            self._withdraw(hint)
            return Outcome(move, "failed", type(error).__name__)
        if self.dry_run:
            self.recorder.record("Pod", namespace, name, reason="WouldEvict", message=why)
            return Outcome(move, "would-evict")
        self.recorder.record("Pod", namespace, name, reason="EvictedForLocality", message=why)
        return Outcome(move, "evicted", hint=hint)

    def _eviction(self, namespace: str, name: str, uid: str) -> client.V1Eviction:
        """Every eviction this controller sends: the mode's dry-run flag, and the UID of the pod
        it judged, so the API server refuses (409) to evict a namesake made since."""
        return client.V1Eviction(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=client.V1DeleteOptions(
                dry_run=["All"] if self.dry_run else None,
                preconditions=client.V1Preconditions(uid=uid) if uid else None,
            ),
        )

    def release(self, pod_key: str, uid: str) -> str | None:
        """Evict a replacement left Pending by a required hint past its expiry, so its
        controller makes a new one with no hint left to bind it; what was done, for the log, or
        None when nothing was left to do. The API server lets a Pending pod be evicted whatever
        its PDB says (it serves nothing), so the controller needs no right to delete pods."""
        namespace, name = pod_key.split("/", 1)
        try:
            pod = self.core.read_namespaced_pod(name, namespace)
            if pod.spec is not None and pod.spec.node_name:
                return None  # bound in the meantime
            if uid and pod.metadata is not None and pod.metadata.uid != uid:
                return None  # a namesake made since: not the pod judged
            self.core.create_namespaced_pod_eviction(
                name, namespace, self._eviction(namespace, name, uid)
            )
        except ApiException as error:
            return None if error.status == 404 else f"not released: HTTP {error.status}"
        except (HTTPError, OSError) as error:
            return f"not released: {type(error).__name__}"
        message = "Pending past its required placement hint's expiry; its controller makes another"
        if self.dry_run:
            self.recorder.record("Pod", namespace, name, reason="WouldRelease", message=message)
            return "would be released (dry-run)"
        self.recorder.record("Pod", namespace, name, reason="Released", message=message)
        return "released"

    def _outdated(self, move: Move) -> str | None:
        """Why the move no longer holds, read again just before it is sent: the plan was made on
        a snapshot, and nodes may have been drained, deleted or relabelled since (a long cycle,
        a slow eviction before this one). The node the fit check found room on must still be
        in the target, Ready and schedulable; when it is not, the next cycle plans again."""
        namespace, name = move.pod.split("/", 1)
        try:
            pod = self.core.read_namespaced_pod(name, namespace)
            node = self.core.read_node(move.node)
        except ApiException as error:
            if error.status == 404:
                return "the pod or its planned node is gone"
            return f"cannot check the plan again: HTTP {error.status}"
        except (HTTPError, OSError) as error:
            return f"cannot check the plan again: {type(error).__name__}"
        if move.uid and pod.metadata is not None and pod.metadata.uid != move.uid:
            return _REPLACED
        if pod.metadata is not None and pod.metadata.deletion_timestamp is not None:
            return "the pod is already terminating"
        labels = (node.metadata.labels if node.metadata else None) or {}
        if not move.target_labels.items() <= labels.items():
            return f"node {move.node} is no longer in {_domain(move)}"
        conditions = (node.status.conditions if node.status else None) or []
        ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
        if not ready or (node.spec is not None and node.spec.unschedulable):
            return f"node {move.node} is not Ready and schedulable any more"
        return None

    def _withdraw(self, hint: Hint | None) -> None:
        """No eviction, no replacement: the hint must not steer some later pod instead."""
        if hint is not None and self.steering is not None:
            try:
                self.steering.hints.take(hint.owner, self.steering.clock(), hint.rank)
            except SourceUnavailableError as error:
                _log.warning("hint of %s not withdrawn (it expires anyway): %s", hint.owner, error)
