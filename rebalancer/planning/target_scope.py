"""Which pods a target placement's search may move: by the same protections and settling the
planner's rules apply (planning/rules.py), so the target never heads for a move they refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rebalancer.cluster.model import Snapshot, SnapshotIndexes
from rebalancer.cluster.topology import DomainKey, Location, Topology
from rebalancer.config.resolved import PlanningRules
from rebalancer.planning.jobs import job_key
from rebalancer.planning.protections import WorkloadSettling, protection_reason


@dataclass
class TargetScope:
    """Which pods the search may move, each judged when first asked: at 100,000 pods most
    never are. Not protected, its workload settled, in a known domain, and not a rank of a
    job, which is moved whole or not at all (planning/jobs.py)."""

    snapshot: Snapshot
    topology: Topology
    rules: PlanningRules
    indexes: SnapshotIndexes
    found: Mapping[str, Location]
    level: int
    settling: WorkloadSettling
    judged: dict[str, bool] = field(default_factory=dict)

    def __contains__(self, key: str) -> bool:
        known = self.judged.get(key)
        if known is None:
            known = self.judged[key] = self._movable(key)
        return known

    def origin(self, key: str) -> DomainKey:
        """The key of the pod's domain where the cycle found it."""
        domain = self.topology.domain_of(self.found[key], self.level)
        assert domain is not None  # a pod in an unknown domain is never in the scope
        return domain.key

    def _movable(self, key: str) -> bool:
        pod, location = self.snapshot.pods.get(key), self.found.get(key)
        if pod is None or location is None or self.topology.domain_of(location, self.level) is None:
            return False  # gone, or without traffic now (a pod the last target placed, say)
        rules = self.rules
        if protection_reason(pod, self.snapshot, self.indexes, rules) is not None:
            return False
        if rules.jobs.whole and job_key(pod, rules.jobs) is not None:
            return False
        workload = pod.workload
        return workload is None or self.settling.reason(workload) is None
