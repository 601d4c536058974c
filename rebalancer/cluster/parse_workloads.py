"""Deployment, StatefulSet and Job objects to Workloads: a Deployment's rollout and surge
strategy, a Job's failure budget under its backoff limits and pod failure policy."""

from __future__ import annotations

from typing import Any

from rebalancer.cluster.model import Workload, WorkloadRef
from rebalancer.cluster.parse_objects import parts
from rebalancer.cluster.wire import WireObject, WirePodFailurePolicy, WireStatus


def parse_workload(kind: str, item: WireObject) -> Workload:
    metadata, spec, status = parts(item)
    if kind == "Job":
        return _parse_job(item)
    replicas = 1 if spec.replicas is None else spec.replicas
    return Workload(
        WorkloadRef(kind, metadata.namespace or "default", metadata.name),
        replicas,
        metadata.annotations or {},
        paused=bool(spec.paused),
        rollout=_rollout(metadata.generation, status, replicas) if kind == "Deployment" else None,
        one_at_a_time=_one_at_a_time(spec.strategy) if kind == "Deployment" else None,
    )


DEFAULT_BACKOFF_LIMIT = 6
"""A Job's spec.backoffLimit when it sets none."""


def _parse_job(item: WireObject) -> Workload:
    """A Job's failure budget: an evicted pod fails, and counts against backoffLimit (default
    6), unless the first rule of its pod failure policy that an evicted pod matches says
    otherwise. Pods terminating and failures not yet counted are taken as failed already. How
    many pods it runs is left unknown (None), as before."""
    metadata, spec, status = parts(item)
    action = _eviction_action(spec.podFailurePolicy)
    ref = WorkloadRef("Job", metadata.namespace or "default", metadata.name)
    uncounted = status.uncountedTerminatedPods
    failed = (
        (status.failed or 0)
        + (status.terminating or 0)
        + len((uncounted.failed or []) if uncounted is not None else [])
    )
    left = limit = None
    if spec.backoffLimit is not None or spec.backoffLimitPerIndex is None:
        limit = DEFAULT_BACKOFF_LIMIT if spec.backoffLimit is None else spec.backoffLimit
        left = max(limit - failed, 0)
    per_index = spec.backoffLimitPerIndex
    if action in ("FailJob", "FailIndex"):
        left, per_index = (0, per_index) if action == "FailJob" else (left, 0)
    return Workload(
        ref,
        None,
        metadata.annotations or {},
        failures_left=left,
        failures_per_index=per_index,
        evictions_fail=action != "Ignore",
        backoff_limit=limit,
    )


_EVICTED_EXIT_CODES = frozenset({137, 143})
"""What an evicted container exits with: SIGKILL after the grace period, or SIGTERM."""


_SEVERITY = ("Ignore", "Count", "FailIndex", "FailJob")


def _eviction_action(policy: WirePodFailurePolicy | None) -> str:
    """What the Job controller does with an evicted pod under its pod failure policy: it takes
    the first rule that matches, `Count` when none does. An evicted pod surely carries the
    DisruptionTarget condition; its containers may exit with 137 or 143, so a rule on those
    codes may match first: the worst action that may apply is taken."""
    worst = "Ignore"
    for rule in (policy.rules or []) if policy is not None else []:
        surely = any(
            c.type == "DisruptionTarget" and c.status in ("", "True")
            for c in rule.onPodConditions or ()
        )
        codes = rule.onExitCodes
        maybe = codes is not None and (
            bool(_EVICTED_EXIT_CODES & set(codes.values or ()))
            if codes.operator == "In"
            else not set(codes.values or ()) >= _EVICTED_EXIT_CODES
        )
        action = rule.action if rule.action in _SEVERITY else "FailJob"  # unknown: the worst
        if surely or maybe:
            worst = max(worst, action, key=_SEVERITY.index)
        if surely:
            return worst
    return max(worst, "Count", key=_SEVERITY.index)


def _one_at_a_time(strategy: dict[str, Any] | None) -> str | None:
    """Why a Deployment's strategy says never to run an extra pod, or None."""
    strategy = strategy or {}
    if strategy.get("type") == "Recreate":
        return "strategy Recreate"
    rolling = strategy.get("rollingUpdate") or {}
    if str(rolling.get("maxSurge", "25%")).strip() in {"0", "0%"}:
        return "maxSurge 0"
    return None


def _rollout(generation: int | None, status: WireStatus, replicas: int) -> str | None:
    """Why a Deployment's rollout is under way, from its status; None when it is done (or its
    status says nothing, as in a snapshot file written by hand)."""
    observed = status.observedGeneration
    if generation is not None and observed is not None and observed < generation:
        return "its controller has not yet seen its latest spec"
    if status.updatedReplicas is not None and status.updatedReplicas < replicas:
        return f"{status.updatedReplicas} of {replicas} pods on the latest template"
    if status.replicas is not None and status.replicas > replicas:
        return f"{status.replicas} pods for {replicas} replicas"
    return None
