"""The HA floor: a workload keeps the number of domains the policy asks for, or all it had
before the rebalancer moved it, if fewer. Judged with the other pods wherever the caller says
they are: the cycle's model with its moves so far, or a placement being searched for, which
then never needs a move the planner would refuse for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from rebalancer.cluster.model import Pod, SnapshotIndexes
from rebalancer.cluster.topology import Domain, Location, Topology
from rebalancer.config.resolved import PlanningRules
from rebalancer.planning.state import PlannerState


@dataclass(frozen=True)
class HaFloor:
    rules: PlanningRules
    topology: Topology
    indexes: SnapshotIndexes
    state: PlannerState
    now: float
    found: Mapping[str, Location]
    """Where the cycle found the pods: this cycle's own moves do not lower the floor."""

    def refusal(self, pod: Pod, target: Domain, where: Mapping[str, Location]) -> str | None:
        """Why moving `pod` into `target` breaks the floor, with the other pods at `where`; a
        workload in one zone that is being moved into another whole is not held half-way
        because its first move spread it."""
        floor = self.rules.protections.min_spread
        if floor.domains <= 1 or pod.workload is None or pod.workload.kind not in floor.kinds:
            return None
        topology = self.topology
        level = self.rules.spread_level
        siblings = [p for p in self.indexes.pods_of(pod.workload) if p.key in where]
        after = {
            topology.domain_of(
                topology.location_within(target) if sibling.key == pod.key else where[sibling.key],
                level,
            )
            for sibling in siblings
        }
        required = min(floor.domains, self.before(str(pod.workload), siblings))
        if len(after) < required:
            return f"workload would span {len(after)} {floor.level}s, below {required}"
        return None

    def before(self, workload: str, siblings: list[Pod]) -> int:
        """The workload's spread before the rebalancer moved it: remembered while it is being
        moved, else as the cycle found it."""
        remembered_spread = self.state.spread_remembered(workload, self.now)
        if remembered_spread is not None:
            return remembered_spread
        level = self.rules.spread_level
        return len({self.topology.domain_of(self.found[p.key], level) for p in siblings})

    def baseline(self, pod: Pod, where: Mapping[str, Location]) -> int | None:
        """What a move of `pod` records as its workload's spread before it was moved."""
        if pod.workload is None:
            return None
        siblings = [p for p in self.indexes.pods_of(pod.workload) if p.key in where]
        return self.before(str(pod.workload), siblings)
