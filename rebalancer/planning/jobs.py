"""Non-elastic jobs: recognised from their pods, and each one's candidates merged into a single
move of the whole job.

An NCCL ring, an MPI job or a parameter-server job restarts whole when one pod goes, so moving
its pods one per cycle restarts it once per move. Here the strategies' proposals for a job's pods
become one joint candidate per job (the best of a search on the job alone and of each
strategy's proposals taken together), which the planner makes all at once or not at all, counts
as one disruption, and makes only when the saving over the job's remaining run pays for the
restart (`jobs` in the policy). Pure: the snapshot, the cost model and the candidates in,
candidates out.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import msgspec

from rebalancer.cluster.model import Pod, WorkloadRef
from rebalancer.cluster.topology import Domain
from rebalancer.config.resolved import PlanningRules
from rebalancer.config.training_jobs import Jobs
from rebalancer.planning.job_search import JobSearch, search_job
from rebalancer.planning.protections import protection_reason
from rebalancer.planning.types import SkipCategory
from rebalancer.strategies.framework import Candidate, ClusterView

TRAINING_KINDS = frozenset(
    {"PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "MXJob"}
)
"""Kubeflow training jobs: their pods are ranks of one job, whatever traffic says."""
ELASTIC_ANNOTATION = "topology-rebalancer.io/elastic"
"""`"true"` on a pod: its job survives losing it (torchrun elastic, Horovod elastic), so its
pods are moved one by one."""
JOB_ANNOTATION = "topology-rebalancer.io/job"
"""A job's name on its pods, of any owner (a StatefulSet of MPI ranks, several Jobs): they are
one non-elastic job."""
EXPECTED_END_ANNOTATION = "topology-rebalancer.io/expected-end"
"""An RFC 3339 time when the job is expected to finish, for the restart's worth."""
_GAIN_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Job:
    """One non-elastic job with a candidate this cycle."""

    key: str
    """`namespace/name`: the group label's value, else the owner's name."""
    owners: tuple[WorkloadRef, ...]
    """Its owners, whose pods all restart with the job (a Job's count as failed), and whose
    last move tells when the rebalancer last restarted it."""
    cost: float
    """Its weighted traffic now, each pair counted once."""
    ends: float | None
    """Unix seconds from the expected-end annotation of any of its pods; None when none says."""
    stays: str | None = None
    """Why no set of its pods' moves was found, when none was: its candidate is then only its
    best proposal, for the plan to say why the job stays."""


def job_key(pod: Pod, settings: Jobs) -> str | None:
    """The job a pod is a rank of, or None for pods of other owners and elastic pods."""
    workload = pod.workload
    if workload is None or pod.annotations.get(ELASTIC_ANNOTATION, "").lower() == "true":
        return None
    declared = pod.annotations.get(JOB_ANNOTATION)
    if declared:
        return f"{pod.namespace}/{declared}"
    if workload.kind != "Job" and workload.kind not in TRAINING_KINDS:
        return None
    for label in settings.group_labels:
        value = pod.labels.get(label)
        if value:
            return f"{pod.namespace}/{value}"
    return f"{pod.namespace}/{workload.name}"


def whole_jobs(
    view: ClusterView,
    candidates: list[Candidate],
    rules: PlanningRules,
    last_moved: Mapping[str, float],
    now: float,
) -> tuple[list[Candidate], dict[str, Job]]:
    """The candidates with every non-elastic job's replaced by one candidate for the whole job,
    and those jobs by key. A job is non-elastic when it is a Kubeflow kind or its pods talk to
    each other; a Job of independent shards keeps its candidates as they were. A job restarted
    too recently, or for which no set of moves gains, keeps only its best proposal, for the
    plan to say why it stays."""
    settings = rules.jobs
    pods = view.snapshot.pods
    keyed = {pod: job_key(pods[pod], settings) for c in candidates for pod in c.pods}
    if not any(keyed.values()):
        return candidates, {}
    members = _members(view, settings, {key for key in keyed.values() if key})
    jobs = {
        key: _job(view, key, pods_of)
        for key, pods_of in members.items()
        if _non_elastic(view, pods_of)
    }
    kept: list[Candidate] = []
    proposed: dict[str, list[Candidate]] = defaultdict(list)
    for candidate in candidates:
        # Any pod of a job makes the candidate the job's, its companion's too: a pair with
        # a rank in it would otherwise move that rank on its own, a restart by the back door.
        key = next((k for pod in candidate.pods if (k := keyed[pod]) in jobs), None)
        if key is not None:
            proposed[key].append(candidate)
        else:
            kept.append(candidate)
    indexes = view.snapshot.indexes()
    for key, job_candidates in sorted(proposed.items()):
        movable = [
            pod
            for pod in members[key]
            if protection_reason(pods[pod], view.snapshot, indexes, rules) is None
        ]
        merged = None
        # Not searched where it would be refused anyway: restarted lately, or unsteered.
        held = (
            not rules.steered or _restarted_since(jobs[key], settings, last_moved, now) is not None
        )
        if not held:
            merged = _job_move(view, key, movable, job_candidates, rules)
        if merged is None:  # the best proposal alone, for the plan to say why it stays
            leading = max(job_candidates, key=lambda c: (c.gain, c.pod))
            merged = msgspec.structs.replace(leading, job=key, finest=None)
            if not held:
                stays = "no set of moves of its pods that may move gains and fits"
                jobs[key] = dataclasses.replace(jobs[key], stays=stays)
        kept.append(merged)
    return kept, jobs


def _members(view: ClusterView, settings: Jobs, keys: set[str]) -> dict[str, list[str]]:
    """Every pod with traffic of each of these jobs: a job's cost counts all its ranks, not only
    those proposed, and its owners may have no candidate at all (a parameter server's)."""
    members: dict[str, list[str]] = defaultdict(list)
    pods = view.snapshot.pods
    for pod in view.cost.locations:
        key = job_key(pods[pod], settings)
        if key in keys:
            members[key].append(pod)
    return members


def _non_elastic(view: ClusterView, members: list[str]) -> bool:
    pods = view.snapshot.pods
    if any(
        JOB_ANNOTATION in pods[pod].annotations
        or ((workload := pods[pod].workload) is not None and workload.kind in TRAINING_KINDS)
        for pod in members
    ):
        return True
    inside = set(members)
    peers = view.cost.peers
    return any(peer in inside for pod in members for peer in peers[pod])


def _job(view: ClusterView, key: str, members: list[str]) -> Job:
    cost, pods = view.cost, view.snapshot.pods
    inside = set(members)
    total = 0.0
    for pod in members:
        here = cost.locations[pod]
        for peer, rate in cost.peers[pod].items():
            if peer in inside and peer < pod:
                continue  # counted from the other end
            total += rate * view.topology.distance(here, cost.locations[peer])
    owners = sorted(
        {w for pod in members if (w := pods[pod].workload) is not None},
        key=lambda ref: (ref.kind, ref.namespace, ref.name),
    )
    return Job(key, tuple(owners), total, _expected_end(pods[pod] for pod in members))


def _expected_end(pods: Iterable[Pod]) -> float | None:
    """The earliest end any pod announces; an annotation that is not a time is ignored, as the
    assumed remaining run then holds."""
    ends = []
    for pod in pods:
        text = pod.annotations.get(EXPECTED_END_ANNOTATION)
        if not text:
            continue
        try:
            when = datetime.datetime.fromisoformat(text)
        except ValueError:
            continue
        if when.tzinfo is None:
            when = when.replace(tzinfo=datetime.UTC)
        ends.append(when.timestamp())
    return min(ends, default=None)


def _job_move(
    view: ClusterView,
    key: str,
    movable: list[str],
    proposed: list[Candidate],
    rules: PlanningRules,
) -> Candidate | None:
    """The job's pods' targets as one candidate (see `search_job`), or None when no set of
    moves gains."""
    levels = sorted({target.level for c in proposed for target in c.targets.values()})
    honor_soft = rules.protections.honor_soft_spread
    topology = view.topology
    # Searched down to each level in turn: a search's work spread over hosts too can stop
    # short of where one over racks alone gets (a 16-rank ring on four racks does).
    options = [search_job(view, movable, levels[: n + 1], honor_soft) for n in range(len(levels))]
    # Each strategy's own proposals for the job, taken together, compete with the search: a
    # gang packed into fewest racks can gain more than the search reaches within its work.
    for strategy in sorted({c.strategy for c in proposed}):
        options.append(_proposed(view, movable, [c for c in proposed if c.strategy == strategy]))
    best: tuple[float, dict[str, Domain]] | None = None
    checker = JobSearch(view, movable, levels, honor_soft, [0])
    for found in options:
        moved = {
            pod: domain
            for pod, domain in found.items()
            if topology.domain_of(view.cost.locations[pod], domain.level) != domain
        }
        gain = view.cost.joint_gain(moved) if moved else 0.0
        better = gain > _GAIN_TOLERANCE and (best is None or gain > best[0] + _GAIN_TOLERANCE)
        if better and checker.fits(moved):
            best = (gain, moved)
    if best is None:
        return None
    gain, moved = best
    first, *rest = moved
    leading = max(proposed, key=lambda c: c.gain)
    return Candidate(
        pod=first,
        target=moved[first],
        gain=gain,
        reason=f"job {key} moved whole ({len(moved)} of its pods); {leading.reason}",
        strategy=leading.strategy,
        companions=tuple((pod, moved[pod]) for pod in rest),
        job=key,
    )


def _proposed(
    view: ClusterView, movable: list[str], proposed: list[Candidate]
) -> dict[str, Domain]:
    """One strategy's proposals for the job's movable pods taken together: each pod to its
    best target, pods added in order of their own gain while the joint gain grows."""
    allowed = set(movable)
    best: dict[str, tuple[float, Domain]] = {}
    for candidate in proposed:
        share = candidate.gain / len(candidate.pods)
        for pod, target in candidate.targets.items():
            if pod in allowed and (pod not in best or share > best[pod][0]):
                best[pod] = (share, target)
    chosen: dict[str, Domain] = {}
    joint = 0.0
    for pod, (_gain, target) in sorted(best.items(), key=lambda item: (-item[1][0], item[0])):
        trial = {**chosen, pod: target}
        gain = view.cost.joint_gain(trial)
        if gain > joint + _GAIN_TOLERANCE:
            chosen, joint = trial, gain
    return chosen


def _restarted_since(
    job: Job, settings: Jobs, last_moved: Mapping[str, float], now: float
) -> float | None:
    """Seconds since the rebalancer last moved the job, when that is within the interval."""
    since = [now - last_moved[key] for key in map(str, job.owners) if key in last_moved]
    if since and min(since) < settings.min_interval_seconds:
        return min(since)
    return None


def job_refusal(
    job: Job, gain: float, settings: Jobs, last_moved: Mapping[str, float], now: float
) -> tuple[SkipCategory, str] | None:
    """Why the job may not be restarted now: restarted too recently, or the saving over its
    remaining run does not pay for the restart."""
    since = _restarted_since(job, settings, last_moved, now)
    if since is not None:
        return "cooldown", (
            f"job {job.key} restarted {since:.0f}s ago; "
            f"not again within {settings.min_interval_seconds:.0f}s"
        )
    remaining = settings.remaining_seconds if job.ends is None else job.ends - now
    share = settings.worth_share(remaining)
    if share is None:
        return "below-threshold", (
            f"job {job.key} ends in {max(remaining, 0):.0f}s, before a restart would pay"
        )
    if job.cost <= 0 or gain < share * job.cost:
        saved = gain / job.cost if job.cost > 0 else 0.0
        return "below-threshold", (
            f"job {job.key}: saves {saved:.1%} of its traffic, below the {share:.1%} a restart "
            f"costs over its remaining {remaining:.0f}s"
        )
    return None
