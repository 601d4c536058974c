"""The problem the yardsticks solve: where the pods start, the traffic the planner judges, and
the planner's rules the optima obey, so that capture is measured against what the planner may do.
Pure: the solvers (optimum.py, bound.py) are in the `sim` extra, this is not."""

from __future__ import annotations

from dataclasses import dataclass

from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Topology
from rebalancer.config.policy import Policy
from rebalancer.config.resolved import PlanningRules
from rebalancer.planning.budget import every_zone, zone_names
from rebalancer.planning.cycle import build_view, topology_of
from rebalancer.planning.jobs import job_key
from rebalancer.planning.protections import protection_reason
from rebalancer.simulator.cluster import SimulatedCluster
from rebalancer.simulator.scenario import Scenario


@dataclass(frozen=True)
class Rules:
    """The planner's rules the optimum also obeys, so that capture is measured against what the
    planner may do; the defaults are the unconstrained optimum's."""

    fixed: frozenset[str] = frozenset()
    """Pods that stay where they are: those the policy protects, which no plan may move."""
    soft_spread_hard: bool = False
    """ScheduleAnyway spread counted as hard, as the planner counts it by default."""
    spread_floor: tuple[int, int] | None = None
    """(level index, domains): a workload in several domains of the level keeps at least this
    many (or all it has, if fewer), the planner's HA floor."""
    floor_kinds: frozenset[str] = frozenset()
    """The workload kinds the floor holds for."""


@dataclass(frozen=True)
class FairProblem:
    """What the optima are solved for: the starting placement, the traffic the planner judges
    (a phased scenario's averaged over a period) and the planner's rules."""

    snapshot: Snapshot
    topology: Topology
    rates: dict[tuple[str, str], float]
    judged: Scenario
    fair: Rules
    planning: PlanningRules

    @classmethod
    def of(cls, cluster: SimulatedCluster, policy: Policy, scenario: Scenario) -> FairProblem:
        snapshot = cluster.snapshot
        topology = topology_of(policy, snapshot)
        rules = PlanningRules.of(policy, topology)
        indexes = snapshot.indexes()
        judged = scenario.averaged()
        traffic = cluster.traffic(judged)
        # Pods with no pair above the thresholds are never proposed: the planner leaves them be.
        counted = build_view(policy, snapshot, traffic, topology).cost.locations
        protected = frozenset(
            key
            for key, pod in snapshot.pods.items()
            if key not in counted or protection_reason(pod, snapshot, indexes, rules) is not None
        )
        floor = policy.protections.min_spread
        fair = Rules(
            fixed=protected,
            soft_spread_hard=policy.protections.honor_soft_spread,
            spread_floor=(rules.spread_level, floor.domains) if floor.domains > 1 else None,
            floor_kinds=frozenset(floor.kinds),
        )
        return cls(snapshot, topology, traffic.rates, judged, fair, rules)

    def moves_allowed(self, policy: Policy, cycles: int) -> int | None:
        """The most pods the limits let a run of `cycles` cycles move: none before a candidate
        has persisted, then per cycle the per-cycle limit or, when lower, the per-zone limit in
        every zone. None when a job's pods move as one eviction, or no limit caps a cycle."""
        limits = policy.limits
        jobs = self.planning.jobs
        if jobs.whole and any(job_key(pod, jobs) for pod in self.snapshot.pods.values()):
            return None
        # The zones as the planner's budget names them: none when a node's is unknown.
        locations = self.topology.node_locations.values()
        zones = every_zone(zone_names(self.topology, self.planning.zone_level, locations).values())
        caps = [cap for cap in (limits.per_cycle,) if cap is not None]
        if limits.per_zone is not None and zones:
            caps.append(limits.per_zone * len(zones))
        if not caps:
            return None
        return max(0, cycles - policy.persistence.cycles + 1) * min(caps)
