"""From the strategies' candidates to a short, safe plan.

The planner is greedy on gain and re-judges each candidate against a model that already contains
every move picked before it, so two moves never claim the same gain and the predicted cost can only
fall. Every safety rule is applied here, once, for all strategies: protections, budgets, PDBs, HA
spread, cooldowns, persistence and the scheduler's fit in the target domain. What it refuses is
reported with the reason, so a dry-run tells the operator exactly why a pod stayed.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from rebalancer.cluster.fit import Occupancy, rejection
from rebalancer.cluster.model import (
    Pod,
    SnapshotIndexes,
    WorkloadRef,
)
from rebalancer.cluster.scoring import SpreadWeights, Steering, best, scores, surely_inside
from rebalancer.cluster.topology import SHARED, Domain, Location, Topology
from rebalancer.config.resolved import PlanningRules
from rebalancer.cost.model import CostModel, Worth
from rebalancer.planning.budget import Budget, every_zone, zone_names
from rebalancer.planning.floor import HaFloor
from rebalancer.planning.jobs import Job, job_refusal
from rebalancer.planning.landing import rank_of
from rebalancer.planning.narrowing import narrower
from rebalancer.planning.nodes import NodeOrder, NoFit
from rebalancer.planning.prejudged import Prejudged
from rebalancer.planning.protections import (
    protection_reason,
    surge_refusal,
    surged,
    unsettled_reason,
)
from rebalancer.planning.state import PlannerState, RecentMove, remembered, streak_key
from rebalancer.planning.target import STRATEGY as TARGET_PLACEMENT
from rebalancer.planning.target import Target
from rebalancer.planning.types import Move, Plan, Skip, SkipCategory
from rebalancer.strategies.framework import Candidate, ClusterView

_GAIN_TOLERANCE = 1e-9
_UNDO_GAIN = 2.0
"""A move that undoes a remembered one must save this many times what that one saved. Moves
picked greedily, each worth a little as the others left the cluster, otherwise trade a workload
back and forth while the traffic stays as it was (see docs/design.md)."""
INDEX_FAILURES = "batch.kubernetes.io/job-index-failure-count"
"""On a pod of a Job with backoffLimitPerIndex: how often its index has failed."""
_MAX_BACKOFF_DOUBLINGS = 5


@dataclass
class _Cycle:
    """One planning pass: the model being moved in, and every budget spent so far."""

    view: ClusterView
    rules: PlanningRules
    state: PlannerState
    now: float
    persistence_required: int
    undo_required: int
    """Of a move that would undo a remembered one, past its cooldown."""
    min_gain: float
    cost: CostModel
    occupancy: Occupancy
    node_order: NodeOrder
    """Of `occupancy`'s nodes."""
    budget: Budget
    indexes: SnapshotIndexes
    earlier_moves: Mapping[str, list[RecentMove]]
    """The state's recent moves by workload: read for every candidate, so not scanned whole."""
    zone_names: Mapping[Location, str | None]
    """Of the candidates' pods' locations."""
    spread_weights: SpreadWeights
    floor: HaFloor
    pdb_spent: Counter[str] = field(default_factory=Counter)
    failures_spent: Counter[WorkloadRef] = field(default_factory=Counter)
    """Evictions planned per Job: each is a failed pod against its backoffLimit."""
    moved_now: dict[str, list[RecentMove]] = field(default_factory=dict)
    """This cycle's moves by workload, which later moves in it may not undo either."""
    anchored: dict[str, list[Domain]] = field(default_factory=dict)
    """Pod -> domains it may not leave this cycle, because a peer moved in to join it there:
    a client and its server that each move toward the other would cross and stay split."""
    surging: frozenset[str] = frozenset()
    """Workloads with a surge under way (from the state): not moved again until it ends."""
    jobs: Mapping[str, Job] = field(default_factory=dict)
    """The non-elastic jobs whose candidates were merged, by key."""
    settling: dict[WorkloadRef, str | None] = field(default_factory=dict)
    """Each workload's `unsettled_reason`, worked out when a pod of it is first judged: with the
    default limits a cycle judges a few dozen candidates, so counting every pod's workload up
    front would be mostly wasted."""
    live: dict[WorkloadRef, int] = field(default_factory=dict)
    """Each workload's pods not finished, counted when first needed, as `settling`."""

    def live_pods(self, workload: WorkloadRef) -> int:
        if workload not in self.live:
            pods = self.indexes.pods_of(workload)
            self.live[workload] = sum(p.phase not in _FINISHED for p in pods)
        return self.live[workload]

    def settling_reason(self, workload: WorkloadRef) -> str | None:
        if workload not in self.settling:
            self.settling[workload] = unsettled_reason(
                self.indexes.pods_of(workload), self.view.snapshot.workloads.get(workload)
            )
        return self.settling[workload]

    def zone_of(self, pod_key: str) -> str | None:
        """The zone a candidate's pod is evicted from, which its per-zone limit counts."""
        return self.zone_names[self.view.cost.locations[pod_key]]

    def refusal(
        self, pod: Pod, candidate: Candidate, target: Domain, worth: Worth
    ) -> tuple[SkipCategory, str] | None:
        """The first rule that forbids moving `pod` into `target` now, cheapest checks first;
        `worth` is the whole candidate's."""
        protected = protection_reason(pod, self.view.snapshot, self.indexes, self.rules)
        if protected is not None:
            return "protected", protected
        if pod.workload is not None:
            # Whatever the method now: a surge under way holds its Deployment.
            if str(pod.workload) in self.surging:
                return "surge", "a surge of its Deployment is under way"
            if self.surges(pod, candidate):
                refused = surge_refusal(pod, self.view.snapshot, self.rules)
                if refused is None and str(pod.workload) in self.moved_now:
                    refused = "another pod of its Deployment is surged this cycle"
                if refused is not None:
                    return "surge", refused
            settling = self.settling_reason(pod.workload)
            if settling is not None:
                return "settling", f"workload still settling: {settling}"
            held = self.cooldown_refusal(pod, target, this_cycle=candidate.job is None)
            if held is not None:
                return "cooldown", held
        seen = self.state.streaks.get(streak_key(candidate), 0)
        if seen < self.persistence_required:
            return "persistence", (
                f"proposed {seen} of {self.persistence_required} consecutive cycles"
            )
        undone = [] if pod.workload is None else self.undone(str(pod.workload), pod.key, target)
        if undone and seen < self.undo_required:
            latest = undone[-1]
            return "persistence", (
                f"proposed {seen} of {self.undo_required} consecutive cycles, as it would "
                f"undo its move into {'/'.join(latest.entered.values())} "
                f"{self.now - latest.at:.0f}s ago"
            )
        # Relative to the pod's own cost, not the cluster's: a cluster-wide share would grow with
        # the cluster until no single move could clear it.
        threshold = max(self.min_gain, self.rules.thresholds.min_gain_ratio * worth.cost)
        gain = worth.gain
        if gain <= 0 or gain < threshold:
            return "below-threshold", f"gain {gain:.3g} below threshold {threshold:.3g}"
        if undone and pod.key != candidate.pod and candidate.job is None:
            return "persistence", (
                f"would undo its move into {'/'.join(undone[-1].entered.values())}: a pod is "
                "never taken along by another's move out of where its workload was moved"
            )
        dearest = max(undone, key=lambda move: move.gain or 0.0, default=None)
        saved = gain / len(candidate.pods)  # each move of a joint one records its share
        if dearest is not None and dearest.gain is not None and saved <= _UNDO_GAIN * dearest.gain:
            return "persistence", (
                f"would undo its move into {'/'.join(dearest.entered.values())}, which saved "
                f"{dearest.gain:.3g}, for less than twice that ({saved:.3g})"
            )
        checks: tuple[tuple[SkipCategory, Callable[[], str | None]], ...] = (
            # A job's limits are checked once, for all its pods, in `attempt`.
            ("limit", lambda: None if candidate.job else self.budget.refusal(self.scopes(pod))),
            ("pdb", lambda: self.pdb_refusal(pod, candidate)),
            # A job's restart fails all of its pods: counted once, in `attempt`.
            ("limit", lambda: None if candidate.job else self.failure_refusal(pod)),
            ("spread", lambda: self.floor.refusal(pod, target, self.cost.locations)),
        )
        for category, check in checks:
            reason = check()
            if reason is not None:
                return category, reason
        for joined in self.anchored.get(pod.key, ()):
            if target.key[: len(joined.key)] != joined.key:
                return "cooldown", f"a peer moved to join it in {joined.name} this cycle"
        return None

    def cooldown_refusal(self, pod: Pod, target: Domain, *, this_cycle: bool = True) -> str | None:
        """A workload may keep moving the same way, but not undo a recent move nor move more pods
        in one cooldown than it has (a pod moved again so soon is churn: a replacement
        refined within the domain it was just moved into waits), and after missed landings it
        waits, doubling the wait with each miss in a row. `this_cycle`: this cycle's moves
        count too; not among a job's own moves, which are planned as one."""
        assert pod.workload is not None
        workload = str(pod.workload)
        cooldown = self.rules.cooldown_seconds
        misses = self.state.misses.get(workload, 0)
        last = self.state.last_moved.get(workload)
        if misses and last is not None:
            doublings = min(misses - 1, _MAX_BACKOFF_DOUBLINGS)
            remaining = cooldown * 2**doublings - (self.now - last)
            if remaining > 0:
                return (
                    f"backing off {remaining:.0f}s more after {misses} replacement(s) "
                    "missed their target"
                )
        recents = [
            *self.earlier_moves.get(workload, ()),
            *(self.moved_now.get(workload, ()) if this_cycle else ()),
        ]
        since = self.now - cooldown
        undone = self._undone(recents, pod.key, target, since=since)
        if undone:
            recent = undone[-1]
            entered = "/".join(recent.entered.values())
            remaining = cooldown - (self.now - recent.at)
            return f"would undo its move into {entered}; cooldown {remaining:.0f}s more"
        fresh = [m.at for m in recents if m.at > since]
        if fresh and len(fresh) >= self.live_pods(pod.workload):
            remaining = cooldown - (self.now - min(fresh))
            return (
                f"moved {len(fresh)} pods in this cooldown, as many as it has; "
                f"{remaining:.0f}s more"
            )
        return None

    def undone(self, workload: str, pod: str, target: Domain) -> list[RecentMove]:
        """The remembered moves of the workload that moving `pod` into `target` undoes, oldest
        first."""
        return self._undone(self.earlier_moves.get(workload, ()), pod, target, since=None)

    def _undone(
        self, moves: Iterable[RecentMove], pod: str, target: Domain, *, since: float | None
    ) -> list[RecentMove]:
        """Those of `moves` (made after `since`, when given) that the move undoes."""
        moves = [move for move in moves if since is None or move.at > since]
        if not moves:
            return []
        topology = self.view.topology
        location = _describe(topology, self.cost.locations[pod])
        destination = target.describe(topology.levels)
        return [move for move in moves if move.undone_by(location, destination)]

    def spent_reason(self, pod_key: str) -> str:
        """Why a candidate left when the budget ran out was not judged: the per-cycle limit,
        or else the per-zone limit of its pod's zone, as `refusal` words them."""
        limits = self.budget.limits
        if self.budget.exhausted():
            return f"per-cycle limit {limits.per_cycle} reached"
        return f"per-zone limit {limits.per_zone} reached ({self.zone_of(pod_key)})"

    def scopes(self, pod: Pod) -> dict[str, str]:
        scopes = {"node": pod.node_name or "", "namespace": pod.namespace}
        if pod.workload is not None:
            scopes["workload"] = str(pod.workload)
        zone = self.zone_of(pod.key)
        if zone is not None:
            scopes["zone"] = zone
        return scopes

    def accept(
        self, pod: Pod, candidate: Candidate, target: Domain, gain: float, node: str
    ) -> Move:
        if candidate.job is None:  # a job's moves are spent once, in `attempt`
            self.budget.spend(self.scopes(pod))
        if not self.surges(pod, candidate):  # a surge disrupts nothing
            for pdb in self.indexes.pdbs_for(pod):
                self.pdb_spent[pdb.name] += 1
            if pod.workload is not None and pod.workload.kind == "Job" and not candidate.job:
                self.failures_spent[pod.workload] += 1
        self.occupancy.reserve(pod, node)
        self.node_order.reserved(node)
        topology = self.view.topology
        origin = _describe(topology, self.cost.locations[pod.key])
        self.cost.move(pod.key, target)
        together = candidate.targets if candidate.companions else {}
        for peer in self.cost.peers.get(pod.key, {}):
            if peer in together:
                continue  # moved by the same candidate, which placed the two deliberately
            shared = _shared_domain(self.cost.locations[peer], target)
            if shared is not None:
                self.anchored.setdefault(peer, []).append(shared)
        move = Move(
            pod=pod.key,
            workload=str(pod.workload) if pod.workload else None,
            origin=origin,
            target=target,
            destination=target.describe(topology.levels),
            node=node,
            target_labels=target.node_labels(topology.levels),
            controller=(
                (pod.controller_kind, pod.controller_name)
                if pod.controller_kind and pod.controller_name
                else None
            ),
            gain=gain,
            strategy=candidate.strategy,
            reason=candidate.reason,
            uid=pod.uid,
            method="surge" if self.surges(pod, candidate) else "evict",
            spread_before=self.floor.baseline(pod, self.cost.locations),
            rank=rank_of(pod.labels, pod.annotations),
            job=candidate.job,
        )
        if move.workload is not None:
            self.moved_now.setdefault(move.workload, []).append(remembered(move, self.now))
        return move

    def attempt(self, candidate: Candidate, worth: Worth) -> list[Move] | tuple[SkipCategory, str]:
        """All of the candidate's moves, or why not. A joint move is tried on a copy of the
        cycle's models and budgets, so a refusal of its last pod undoes nothing by hand."""
        targets = candidate.targets
        failing: Counter[WorkloadRef] = Counter()
        scopes: dict[tuple[str, str], None] = {}
        if candidate.job is not None:
            refused = self.job_refusal(candidate, worth)
            if refused is not None:
                return refused
            stays = self.jobs[candidate.job].stays
            if stays is not None:
                lead = self.view.snapshot.pods[candidate.pod]
                protected = protection_reason(lead, self.view.snapshot, self.indexes, self.rules)
                if protected is not None:
                    return "protected", protected
                return "no-fit", f"job {candidate.job}: {stays}"
            costs = self.restart_failures(self.jobs[candidate.job], targets)
            if isinstance(costs, str):
                return "limit", costs
            failing = costs
            pods = self.view.snapshot.pods
            scopes = dict.fromkeys(item for p in targets for item in self.scopes(pods[p]).items())
            over = self.budget.refusal_once(scopes)
            if over is not None:
                return "limit", over
        if len(targets) > 1 and candidate.job is None:
            # The rules only tighten as pods are accepted, so a pod they refuse now would be
            # refused in the trial too: judged first, before a trial copies the cycle's models
            # (milliseconds each at 100,000 pods).
            for pod_key, target in targets.items():
                pod = self.view.snapshot.pods[pod_key]
                refused = self.refusal(pod, candidate, target, worth)
                if refused is not None:
                    category, reason = refused
                    return category, reason if pod_key == candidate.pod else f"{pod_key}: {reason}"
        trial = self if len(targets) == 1 and candidate.job is None else self.trial()
        if candidate.job is not None:  # all its pods go at once: each leaves room for others
            for pod_key in targets:
                trial.occupancy.release(self.view.snapshot.pods[pod_key])
        share = worth.gain / len(targets)  # the moves' gains must add up to the cost they save
        moves = []
        for pod_key, target in targets.items():
            pod = self.view.snapshot.pods[pod_key]
            placed = trial.place(pod, candidate, target, worth)
            if isinstance(placed, tuple):
                category, reason = placed
                return category, reason if pod_key == candidate.pod else f"{pod_key}: {reason}"
            moves.append(trial.accept(pod, candidate, target, share, placed))
        if candidate.job is not None:
            trial.budget.spend_once(scopes)
            trial.failures_spent.update(failing)
            # Each evicted pod holds its room until it is gone: later candidates may not count
            # on it, only the job's own replacements, which wait for it.
            for pod_key in targets:
                pod = self.view.snapshot.pods[pod_key]
                assert pod.node_name is not None  # protection_reason: running on a known node
                trial.occupancy.hold(pod.requests, pod.node_name)
                trial.node_order.reserved(pod.node_name)
        if trial is not self:
            self.adopt(trial)
        return moves

    def attempt_narrowed(self, candidate: Candidate) -> list[Move] | None:
        """The candidate's moves into the finer domain within its target where they save most
        and every rule allows them (`narrower`); None: there is none, and the candidate is
        tried as proposed."""
        for inside in narrower(self.cost, self.view.topology, candidate):
            narrowed = candidate.into(inside)
            attempted = self.attempt(narrowed, self.cost.worth(narrowed.targets))
            if not isinstance(attempted, tuple):
                return attempted
        return None

    def attempt_widened(self, candidate: Candidate, widest: int) -> list[Move] | None:
        """A target placement's move whose replacement would land outside its domain, made
        into the narrowest domain around it, down to level `widest`, where it would land, of
        those holding none of the moving pods yet (the scheduler's spreading can outweigh a
        hint to one crowded host, not to its rack); None: there is none."""
        if candidate.strategy != TARGET_PLACEMENT:
            return None
        locations = self.cost.locations
        there = candidate.target
        for level in range(there.level - 1, widest - 1, -1):
            wider = Domain(level, there.key[: level + 1])
            if any(locations[pod][: level + 1] == wider.key for pod in candidate.pods):
                break
            widened = candidate.into(wider)
            attempted = self.attempt(widened, self.cost.worth(widened.targets))
            if not isinstance(attempted, tuple):
                return attempted
        return None

    def place(
        self, pod: Pod, candidate: Candidate, target: Domain, worth: Worth
    ) -> str | tuple[SkipCategory, str]:
        """The node `pod` would go to in `target`, or why it may not move there."""
        refusal = self.refusal(pod, candidate, target, worth)
        if refusal is not None:
            return refusal
        node = self.node_in(pod, target)
        if isinstance(node, NoFit):
            return "no-fit", node.reason
        if self.rules.predict_landing:
            elsewhere = self.landing_refusal(pod, candidate, target)
            if elsewhere is not None:
                return "landing", elsewhere
        return node

    def landing_refusal(self, pod: Pod, candidate: Candidate, target: Domain) -> str | None:
        """The replacement goes where the scheduler's default profile scores highest: in evict
        mode unsteered, in migrate mode with the hint's preferred affinity as one score among
        the others, picking one of the best at random. A pod is moved only where more than half
        of those nodes lie in the target: elsewhere, or on a coin flip, the move is a disruption
        for nothing, or for worse. An evicted pod's own room counts as free: the conservative
        side, as a replacement then tends to go back where it was (a pod's grace period may yet
        hold it). A surge keeps the old pod until the new one is Ready, so its room stays
        taken."""
        occupancy = self.occupancy
        here = None if self.surges(pod, candidate) else occupancy.placement.get(pod.key)
        steering = (
            Steering(target.node_labels(self.view.topology.levels), required=False)
            if self.rules.steered
            else None
        )
        inside = self.view.topology.nodes_by_domain.get(target, [])
        snapshot = self.view.snapshot
        if here is not None:
            occupancy.release(pod)
        try:
            if steering is not None and surely_inside(
                pod, snapshot, occupancy, steering, inside, weights=self.spread_weights
            ):
                return None
            scored = scores(pod, snapshot, occupancy, within={}, steering=steering)
        finally:
            if here is not None:
                occupancy.reserve(pod, here)
        tied = best(scored)
        members = set(inside)
        landed_inside = sum(name in members for name in tied)
        if tied and 2 * landed_inside > len(tied):
            return None
        outside = next((name for name in tied if name not in members), None)
        if landed_inside:
            hinted = " with the hint" if steering is not None else ""
            odds = (
                f"{landed_inside} of the {len(tied)} nodes the scheduler scores highest{hinted} "
                f"lie there, {outside} among the rest"
            )
            if steering is not None:
                return (
                    f"its replacement, steered to {target.name}, would land there at best by "
                    f"a coin flip: {odds}"
                )
            return (
                f"evicted, its replacement would land in {target.name} at best by a coin "
                f"flip: {odds}"
            )
        where = f"on {outside}" if outside is not None else "nowhere (no node would take it)"
        if steering is not None:
            return (
                f"its replacement, steered to {target.name}, would still land {where}, where "
                "the scheduler scores highest with the hint among its scores"
            )
        return (
            f"evicted, its replacement would land {where}, outside {target.name}, where the "
            "scheduler scores highest (evict mode steers nothing)"
        )

    def job_refusal(self, candidate: Candidate, worth: Worth) -> tuple[SkipCategory, str] | None:
        """A job is restarted at most once in `jobs.min_interval_seconds`, and only when the
        saving over its remaining run pays for the restart."""
        assert candidate.job is not None
        job = self.jobs[candidate.job]
        if not self.rules.steered:
            return "protected", (
                f"job {job.key}: a job is restarted only where its pods are steered (migrate "
                "mode); evicted, they land wherever the scheduler puts them"
            )
        return job_refusal(job, worth.gain, self.rules.jobs, self.state.last_moved, self.now)

    def trial(self) -> _Cycle:
        occupancy = self.occupancy.copy()
        return dataclasses.replace(
            self,
            cost=self.cost.copy(),
            occupancy=occupancy,
            node_order=self.node_order.over(occupancy),
            budget=self.budget.copy(),
            pdb_spent=Counter(self.pdb_spent),
            failures_spent=Counter(self.failures_spent),
            moved_now={workload: list(moves) for workload, moves in self.moved_now.items()},
            anchored={pod: list(domains) for pod, domains in self.anchored.items()},
        )

    def adopt(self, trial: _Cycle) -> None:
        self.cost, self.occupancy, self.budget = trial.cost, trial.occupancy, trial.budget
        self.node_order = trial.node_order
        self.pdb_spent, self.moved_now = trial.pdb_spent, trial.moved_now
        self.failures_spent = trial.failures_spent
        self.anchored = trial.anchored

    def failure_refusal(self, pod: Pod) -> str | None:
        """An evicted pod of a Job counts as failed: the Job itself would fail past its
        backoffLimit, or the pod's index past backoffLimitPerIndex."""
        if pod.workload is None or pod.workload.kind != "Job":
            return None
        job = self.view.snapshot.workloads.get(pod.workload)
        if job is None or not job.evictions_fail:
            return None
        left = job.failures_left
        if left is not None and self.failures_spent[pod.workload] + 1 > left:
            return (
                f"Job {pod.workload.name} allows {left} more failed pod(s) before it fails, and "
                "an evicted pod counts as failed"
            )
        per_index = job.failures_per_index
        if per_index is not None and _index_failures(pod, per_index) + 1 > per_index:
            return f"its index would fail for good past backoffLimitPerIndex {per_index}"
        return None

    def restart_failures(self, job: Job, moved: Mapping[str, Domain]) -> Counter[WorkloadRef] | str:
        """The failed pods a job's restart costs each of its Jobs, or why a Job cannot afford
        them. The ranks left behind abort when a peer goes (NCCL, MPI): under restartPolicy
        Never they fail too, so all the pods count (the evicted ones not where a pod failure
        policy ignores evictions); under OnFailure their containers restart in place, which
        the Job controller counts against backoffLimit instead."""
        failing: Counter[WorkloadRef] = Counter()
        for owner in job.owners:
            workload = self.view.snapshot.workloads.get(owner)
            if owner.kind != "Job" or workload is None:
                continue
            pods = [p for p in self.indexes.pods_of(owner) if p.phase not in _FINISHED]
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
            if left is not None and self.failures_spent[owner] + len(pods) > left:
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

    def surges(self, pod: Pod, candidate: Candidate) -> bool:
        """Whether this move is a surge: a Deployment's pod under `migrate.method: surge`, unless
        it is a job's, whose pods all go at once (a surge waits for its new pod to be Ready)."""
        return candidate.job is None and surged(pod, self.rules)

    def pdb_refusal(self, pod: Pod, candidate: Candidate) -> str | None:
        """A surge evicts nothing and keeps as many pods Ready as desired throughout, so it
        needs no disruption allowed unless the policy says so (surge.zero_disruption_pdb)."""
        surge = self.rules.surge
        if surge is not None and surge.zero_disruption_pdb and self.surges(pod, candidate):
            return None
        pdbs = self.indexes.pdbs_for(pod)
        if len(pdbs) > 1:
            return "more than one PDB selects the pod (the Eviction API refuses it)"
        if not pdbs:
            return None
        pdb = pdbs[0]
        if not pdb.status_observed:
            return f"PDB {pdb.name} status not yet observed"
        if pdb.disruptions_allowed - self.pdb_spent[pdb.name] < 1:
            return f"PDB {pdb.name} allows no more disruptions"
        return None

    def node_in(self, pod: Pod, target: Domain) -> str | NoFit:
        """The least loaded node in the target domain that the scheduler would accept."""
        reasons: Counter[str] = Counter()
        nodes = self.view.snapshot.nodes
        for _negative_score, node_name in self.node_order.of(target):
            if node_name == pod.node_name:
                continue
            refusal = rejection(
                pod, nodes[node_name], self.occupancy, self.rules.protections.honor_soft_spread
            )
            if refusal is None:
                return node_name
            reasons[refusal] += 1
        if not reasons:
            return NoFit("no usable node in the target domain")
        reason, _count = reasons.most_common(1)[0]
        return NoFit(f"no node in the target domain fits ({reason})")


def plan(
    view: ClusterView,
    candidates: list[Candidate],
    rules: PlanningRules,
    state: PlannerState,
    *,
    now: float,
    persistence_required: int,
    undo_required: int | None = None,
    jobs: Mapping[str, Job] | None = None,
    target: Target | None = None,
) -> Plan:
    """Pick safe moves by largest gain; `state` must already have observed these candidates.
    `undo_required`: the persistence of a move that would undo a remembered one, past its
    cooldown (at least `persistence_required`). `target`: the cycle's target placement, which
    other strategies' moves of the pods it places may not contradict."""
    snapshot, topology = view.snapshot, view.topology
    price = rules.price
    tally = view.cost.tally(snapshot)
    before = tally.figures(topology, price)
    thresholds = rules.thresholds
    occupancy = view.occupancy.copy()
    indexes = snapshot.indexes()
    zones = zone_names(
        topology,
        rules.zone_level,
        (view.cost.locations[pod] for candidate in candidates for pod in candidate.pods),
    )
    cycle = _Cycle(
        view=view,
        rules=rules,
        state=state,
        now=now,
        persistence_required=persistence_required,
        undo_required=max(undo_required or 0, persistence_required),
        min_gain=thresholds.min_gain,
        cost=view.cost.copy(),
        occupancy=occupancy,
        node_order=NodeOrder(topology, snapshot.nodes, occupancy),
        budget=Budget(rules.limits, every_zone(zones.values())),
        zone_names=zones,
        spread_weights=SpreadWeights.of(snapshot),
        indexes=indexes,
        floor=HaFloor(rules, topology, indexes, state, now, view.cost.locations),
        earlier_moves=_by_workload(state.recent_moves),
        surging=frozenset(record.workload for record in state.surges),
        jobs=jobs or {},
    )
    moves: list[Move] = []
    skipped: dict[str, Skip] = {}
    heap = [(-c.gain, index, c) for index, c in enumerate(candidates)]
    heapq.heapify(heap)
    prejudged = Prejudged.of(view.cost, candidates)

    def skip(candidate: Candidate, category: SkipCategory, reason: str) -> None:
        if candidate.pod not in skipped:  # the first reason found for a pod is the one reported
            skipped[candidate.pod] = Skip(candidate.pod, reason, candidate.strategy, category)

    while heap and not (cycle.budget.exhausted() or cycle.budget.spent_in_every_zone()):
        _negative_gain, index, candidate = heapq.heappop(heap)
        if any(pod in cycle.cost.moved for pod in candidate.pods):
            continue
        worth = prejudged.get(index)
        if worth is None or not cycle.cost.untouched(candidate.pod):
            worth = cycle.cost.worth(candidate.targets)
        if heap and worth.gain < -heap[0][0] - _GAIN_TOLERANCE:
            heapq.heappush(heap, (-worth.gain, index, candidate))  # outdated by earlier picks
            continue
        if target is not None and (elsewhere := _elsewhere(target, candidate)) is not None:
            if not any(pod in target.places for pod in candidate.pods):
                skip(candidate, "target", elsewhere)  # else the target's own move says why
            continue
        narrowed = cycle.attempt_narrowed(candidate)
        attempted = cycle.attempt(candidate, worth) if narrowed is None else narrowed
        if target is not None and isinstance(attempted, tuple) and attempted[0] == "landing":
            attempted = cycle.attempt_widened(candidate, target.widest) or attempted
        if isinstance(attempted, tuple):
            skip(candidate, *attempted)
            continue
        moves.extend(attempted)
        for move in attempted:
            skipped.pop(move.pod, None)
    for _negative_gain, _index, candidate in heap:
        if not any(pod in cycle.cost.moved for pod in candidate.pods):
            skip(candidate, "limit", cycle.spent_reason(candidate.pod))
    return Plan(
        moves=tuple(moves),
        skipped=tuple(sorted(skipped.values(), key=lambda s: s.pod)),
        before=before,
        after=cycle.cost.retally(tally, view.cost).figures(topology, price),
        candidates=len(candidates),
    )


_FINISHED = frozenset({"Succeeded", "Failed"})


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


def _elsewhere(target: Target, candidate: Candidate) -> str | None:
    """Why another strategy's candidate may not move its pods: the target placement moves one
    of them, and only its own moves, each into the pod's domain there, head for it (a wider
    move would be narrowed elsewhere), or keeps one where others are to join it."""
    if candidate.strategy == TARGET_PLACEMENT or candidate.job is not None:
        return None
    for pod in candidate.pods:
        host = target.places.get(pod)
        if host is not None:
            return f"the target placement puts {pod} on {host.name}"
        if pod in target.anchors:
            return f"the target placement keeps {pod} where it is, for others to join"
    return None


def _shared_domain(location: Location, target: Domain) -> Domain | None:
    """The narrowest domain, down to `target`'s level, that holds both `location` and `target`;
    None when they share nothing but the levels not in force."""
    depth = 0
    while depth < len(target.key) and location[depth] == target.key[depth]:
        depth += 1
    if all(value == SHARED for value in target.key[:depth]):
        return None
    return Domain(depth - 1, target.key[:depth])


def _by_workload(moves: Iterable[RecentMove]) -> dict[str, list[RecentMove]]:
    grouped: dict[str, list[RecentMove]] = {}
    for move in moves:
        grouped.setdefault(move.workload, []).append(move)
    return grouped


def _describe(topology: Topology, location: tuple[str | None, ...]) -> dict[str, str]:
    return {
        level.name: value
        for level, value in zip(topology.levels, location, strict=True)
        if value is not None and value != SHARED
    }
