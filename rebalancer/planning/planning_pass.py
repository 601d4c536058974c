"""One planning pass: the models being moved in and every budget spent so far, and the
bookkeeping of a move once it is accepted. The rules that judge a move read it; a joint move is
tried on a copy of it (`trial`) and the copy adopted when every pod of it was accepted.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from rebalancer.cluster.fit import Occupancy, rejection
from rebalancer.cluster.model import Pod, SnapshotIndexes, WorkloadRef
from rebalancer.cluster.scoring import SpreadWeights
from rebalancer.cluster.topology import SHARED, Domain, Location
from rebalancer.config.resolved import PlanningRules
from rebalancer.cost.model import CostModel
from rebalancer.planning.budget import Budget
from rebalancer.planning.floor import HaFloor
from rebalancer.planning.jobs import Job
from rebalancer.planning.landing import rank_of
from rebalancer.planning.nodes import NodeOrder, NoFit
from rebalancer.planning.protections import WorkloadSettling, surged
from rebalancer.planning.state import PlannerState, RecentMove, remembered
from rebalancer.planning.types import Move
from rebalancer.strategies.framework import Candidate, ClusterView

FINISHED = frozenset({"Succeeded", "Failed"})
"""A pod's phases that hold no capacity and restart nothing."""


@dataclass
class PlanningPass:
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
    settling: WorkloadSettling
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
    live: dict[WorkloadRef, int] = field(default_factory=dict)
    """Each workload's pods not finished, counted when first needed, as `settling`."""
    best_nodes: dict[tuple[object, ...], list[str]] = field(default_factory=dict)
    """The nodes the scheduler would score highest for a pod's replacement, by the pod, how it
    leaves, the steering and the occupancy's serial and version (see landing_odds.py)."""

    def live_pods(self, workload: WorkloadRef) -> int:
        if workload not in self.live:
            pods = self.indexes.pods_of(workload)
            self.live[workload] = sum(p.phase not in FINISHED for p in pods)
        return self.live[workload]

    def zone_of(self, pod_key: str) -> str | None:
        """The zone a candidate's pod is evicted from, which its per-zone limit counts."""
        return self.zone_names[self.view.cost.locations[pod_key]]

    def spent_reason(self, zone: str | None) -> str:
        """Why a candidate left when the budget ran out was not judged: the per-cycle limit,
        or else the per-zone limit of its pod's zone, as the budget's refusals word them."""
        limits = self.budget.limits
        if self.budget.exhausted():
            return f"per-cycle limit {limits.per_cycle} reached"
        return f"per-zone limit {limits.per_zone} reached ({zone})"

    def scopes(self, pod: Pod) -> dict[str, str]:
        scopes = {"node": pod.node_name or "", "namespace": pod.namespace}
        if pod.workload is not None:
            scopes["workload"] = str(pod.workload)
        zone = self.zone_of(pod.key)
        if zone is not None:
            scopes["zone"] = zone
        return scopes

    def surges(self, pod: Pod, candidate: Candidate) -> bool:
        """Whether this move is a surge: a Deployment's pod under `migrate.method: surge`, unless
        it is a job's, whose pods all go at once (a surge waits for its new pod to be Ready)."""
        return candidate.job is None and surged(pod, self.rules)

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
        origin = topology.named(self.cost.locations[pod.key])
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

    def trial(self) -> PlanningPass:
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

    def adopt(self, trial: PlanningPass) -> None:
        self.cost, self.occupancy, self.budget = trial.cost, trial.occupancy, trial.budget
        self.node_order = trial.node_order
        self.pdb_spent, self.moved_now = trial.pdb_spent, trial.moved_now
        self.failures_spent = trial.failures_spent
        self.anchored = trial.anchored


def _shared_domain(location: Location, target: Domain) -> Domain | None:
    """The narrowest domain, down to `target`'s level, that holds both `location` and `target`;
    None when they share nothing but the levels not in force."""
    depth = 0
    while depth < len(target.key) and location[depth] == target.key[depth]:
        depth += 1
    if all(value == SHARED for value in target.key[:depth]):
        return None
    return Domain(depth - 1, target.key[:depth])
