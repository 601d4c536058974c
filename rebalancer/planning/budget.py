"""Eviction budgets on top of PDBs: how many moves a cycle may make per node, namespace, workload
and zone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from rebalancer.cluster.topology import Location, Topology
from rebalancer.config.pacing import Limits


@dataclass
class Budget:
    """Counts planned evictions at every scope a limit applies to."""

    limits: Limits
    zones: frozenset[str] = frozenset()
    """The zones the candidates' pods are in; empty when one of them is in no known zone."""
    used: Counter[tuple[str, str]] = field(default_factory=Counter)
    total: int = 0

    def exhausted(self) -> bool:
        return self.limits.per_cycle is not None and self.total >= self.limits.per_cycle

    def spent_in_every_zone(self) -> bool:
        """With the default limits and three zones (3 x 3 = 9 < 10 per cycle) this, not the
        per-cycle limit, is what ends a cycle; without it the loop would go on judging every
        candidate that no zone has room for."""
        per_zone = self.limits.per_zone
        return (
            per_zone is not None
            and bool(self.zones)
            and all(self.used[("zone", zone)] >= per_zone for zone in self.zones)
        )

    def copy(self) -> Budget:
        return Budget(self.limits, self.zones, Counter(self.used), self.total)

    def refusal(self, scopes: dict[str, str]) -> str | None:
        if self.exhausted():  # only a joint move's later pods get here with the budget spent
            return f"per-cycle limit {self.limits.per_cycle} reached"
        limits = {
            "node": self.limits.per_node,
            "namespace": self.limits.per_namespace,
            "workload": self.limits.per_workload,
            "zone": self.limits.per_zone,
        }
        for scope, value in scopes.items():
            limit = limits[scope]
            if limit is not None and self.used[(scope, value)] >= limit:
                return f"per-{scope} limit {limit} reached ({value})"
        return None

    def spend(self, scopes: dict[str, str]) -> None:
        self.total += 1
        for scope, value in scopes.items():
            self.used[(scope, value)] += 1

    def refusal_once(self, scopes: Iterable[tuple[str, str]]) -> str | None:
        """`refusal` for one disruption that touches all these scopes: a job moved whole."""
        if self.exhausted():
            return f"per-cycle limit {self.limits.per_cycle} reached"
        for scope, value in scopes:
            message = self.refusal({scope: value})
            if message is not None:
                return message
        return None

    def spend_once(self, scopes: Iterable[tuple[str, str]]) -> None:
        """One disruption, counted once at each scope it touches."""
        self.total += 1
        for key in scopes:
            self.used[key] += 1


def zone_names(
    topology: Topology, level: int, locations: Iterable[Location]
) -> dict[Location, str | None]:
    """Each location's zone, named as limits and reasons name it; None where it is unknown.
    Worked out per location: a cluster has far fewer of those (one per node) than pods."""
    names: dict[Location, str | None] = {}
    for location in set(locations):
        zone = topology.domain_of(location, level)
        names[location] = None if zone is None else "/".join(zone.key)
    return names


def every_zone(names: Iterable[str | None]) -> frozenset[str]:
    """The zones named, or none at all when one is unknown: no zone limit holds such a pod
    back, so the zones' limits cannot end the cycle."""
    zones = set(names)
    return frozenset() if None in zones else frozenset(zone for zone in zones if zone is not None)
