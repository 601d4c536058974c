"""What an eviction costs a Job: an evicted pod of a Job counts as failed, and a job's restart
fails or restarts the ranks it leaves behind. Judged against the Job's backoffLimit and
backoffLimitPerIndex as the Job controller counts them, so no move makes a Job fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from rebalancer.cluster.model import Pod, WorkloadRef
from rebalancer.cluster.topology import Domain
from rebalancer.cost.model import Worth
from rebalancer.planning.jobs import Job, job_refusal
from rebalancer.planning.planning_pass import FINISHED, PlanningPass
from rebalancer.planning.types import SkipCategory
from rebalancer.strategies.framework import Candidate

INDEX_FAILURES = "batch.kubernetes.io/job-index-failure-count"
"""On a pod of a Job with backoffLimitPerIndex: how often its index has failed."""


def restart_refusal(
    cycle: PlanningPass, candidate: Candidate, worth: Worth
) -> tuple[SkipCategory, str] | None:
    """A job is restarted at most once in `jobs.min_interval_seconds`, and only when the
    saving over its remaining run pays for the restart."""
    assert candidate.job is not None
    job = cycle.jobs[candidate.job]
    if not cycle.rules.steered:
        return "protected", (
            f"job {job.key}: a job is restarted only where its pods are steered (migrate "
            "mode); evicted, they land wherever the scheduler puts them"
        )
    return job_refusal(job, worth.gain, cycle.rules.jobs, cycle.state.last_moved, cycle.now)


def failure_refusal(cycle: PlanningPass, pod: Pod) -> str | None:
    """An evicted pod of a Job counts as failed: the Job itself would fail past its
    backoffLimit, or the pod's index past backoffLimitPerIndex."""
    if pod.workload is None or pod.workload.kind != "Job":
        return None
    job = cycle.view.snapshot.workloads.get(pod.workload)
    if job is None or not job.evictions_fail:
        return None
    left = job.failures_left
    if left is not None and cycle.failures_spent[pod.workload] + 1 > left:
        return (
            f"Job {pod.workload.name} allows {left} more failed pod(s) before it fails, and "
            "an evicted pod counts as failed"
        )
    per_index = job.failures_per_index
    if per_index is not None and _index_failures(pod, per_index) + 1 > per_index:
        return f"its index would fail for good past backoffLimitPerIndex {per_index}"
    return None


def restart_failures(
    cycle: PlanningPass, job: Job, moved: Mapping[str, Domain]
) -> Counter[WorkloadRef] | str:
    """The failed pods a job's restart costs each of its Jobs, or why a Job cannot afford
    them. The ranks left behind abort when a peer goes (NCCL, MPI): under restartPolicy
    Never they fail too, so all the pods count (the evicted ones not where a pod failure
    policy ignores evictions); under OnFailure their containers restart in place, which
    the Job controller counts against backoffLimit instead."""
    failing: Counter[WorkloadRef] = Counter()
    for owner in job.owners:
        workload = cycle.view.snapshot.workloads.get(owner)
        if owner.kind != "Job" or workload is None:
            continue
        pods = [p for p in cycle.indexes.pods_of(owner) if p.phase not in FINISHED]
        evicted = [p for p in pods if p.key in moved]
        staying = [p for p in pods if p.key not in moved]
        if any(p.restart_policy == "OnFailure" for p in pods):
            refused = _restarts_refusal(job, owner.name, workload.backoff_limit, staying)
            if refused is not None:
                return refused
            pods, what = evicted, f"the {len(evicted)} pods it evicts"
        elif workload.evictions_fail:
            what = f"all {len(pods)} pods"
        else:
            pods, what = staying, f"the {len(staying)} pods it leaves"
        left = workload.failures_left
        if left is not None and cycle.failures_spent[owner] + len(pods) > left:
            return (
                f"job {job.key}: its restart fails {what} of Job {owner.name}, which "
                f"allows {left} more failed pod(s) before it fails"
            )
        per_index = workload.failures_per_index
        if per_index is not None and any(
            _index_failures(p, per_index) + 1 > per_index for p in pods
        ):
            return (
                f"job {job.key}: its restart would fail an index of Job {owner.name} for "
                f"good (backoffLimitPerIndex {per_index})"
            )
        failing[owner] = len(pods)
    return failing


def _restarts_refusal(job: Job, name: str, limit: int | None, staying: list[Pod]) -> str | None:
    """Under restartPolicy OnFailure the Job controller fails a Job once the restarts of its
    running and pending pods' containers reach backoffLimit (pass it, at 0). A restart adds
    one to each pod it leaves; the evicted pods' replacements start from none."""
    if limit is None:
        return None
    counted = [p for p in staying if p.phase in ("Running", "Pending")]
    after = sum(p.restarts for p in counted) + len(counted)
    if after < limit or (limit == 0 and after == 0):
        return None
    return (
        f"job {job.key}: its restart restarts the containers of the {len(counted)} pods of Job "
        f"{name} it leaves, {after} restarts in all, and the Job fails at backoffLimit {limit} "
        "(restartPolicy OnFailure)"
    )


def _index_failures(pod: Pod, per_index: int) -> int:
    """How often the pod's index has failed; the limit itself when the count is unreadable,
    so that on doubt the index is taken to have no failure left."""
    failed = pod.annotations.get(INDEX_FAILURES, "0")
    return int(failed) if failed.isdigit() else per_index
