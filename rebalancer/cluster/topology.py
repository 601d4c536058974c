"""Where each node sits in the network, and what it costs to talk across that distance.

Domains are hierarchical: a rack is identified by its zone *and* its rack label, because on-premises
clusters often reuse rack names in every zone. A node that lacks a level's label is never guessed
into a domain: its domain is unknown from that level down, it is reported, and it is never a target.

A level whose label no node carries at all (a region on kind, k3s and most on-premises clusters)
is not in force: every node shares its one domain, so it separates nothing and hides none of the
narrower levels, and it is never written into a placement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

import msgspec
from pydantic import BaseModel, ConfigDict, Field

DomainKey = tuple[str, ...]
"""A domain at level i: the label values of levels 0..i, widest first."""

Location = tuple[str | None, ...]
"""Where a pod is, one label value per level; None where unknown (missing label, or not decided)."""

ZONE_LABEL = "topology.kubernetes.io/zone"
"""The well-known zone label: kube-proxy and the EndpointSlice controller read a node's zone from
it, whatever levels a policy plans with."""
SHARED = "*"
"""The value of every node at a level not in force. No label value can be `*` (values start with
a letter or digit), so it never stands for a real domain."""


class TopologyLevel(BaseModel):
    """One level of the network hierarchy, from a node label."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
    )

    name: Annotated[str, Field(min_length=1, pattern=r"^[a-z0-9][a-z0-9-]*$")]
    """How strategies, limits and metrics refer to the level, for example `rack`."""
    label: Annotated[str, Field(min_length=1)]
    """The node label whose value names a node's domain at this level."""
    weight: Annotated[float, Field(gt=0)]
    """Cost of one unit of traffic whose endpoints first differ at this level."""


class Domain(msgspec.Struct, frozen=True, gc=False):
    """A domain at one level, such as rack r2 of zone b. A Struct: split-peers makes one per
    candidate and the planner looks nodes up by them, and a Struct is made and hashed in C."""

    level: int
    key: DomainKey

    def describe(self, levels: tuple[TopologyLevel, ...]) -> dict[str, str]:
        named = zip(levels, self.key, strict=False)
        return {level.name: value for level, value in named if value != SHARED}

    @property
    def name(self) -> str:
        """For people: the label values, widest first, without the levels not in force."""
        return "/".join(value for value in self.key if value != SHARED)

    def node_labels(self, levels: tuple[TopologyLevel, ...]) -> dict[str, str]:
        """The node labels a node in this domain carries: what a placement may require."""
        named = zip(levels, self.key, strict=False)
        return {level.label: value for level, value in named if value != SHARED}


@dataclass
class Topology:
    levels: tuple[TopologyLevel, ...]
    node_locations: dict[str, Location]
    missing_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Node name -> names of the levels in force whose label it lacks (its narrower levels are
    then unknown too, but it has their labels, so they are not named)."""
    nodes_by_domain: dict[Domain, list[str]] = field(default_factory=dict)
    not_in_force: frozenset[int] = frozenset()
    """Levels whose label no node carries."""

    @classmethod
    def from_node_labels(
        cls, levels: tuple[TopologyLevel, ...], node_labels: Mapping[str, Mapping[str, str]]
    ) -> Topology:
        carried = {
            index
            for index, level in enumerate(levels)
            if any(labels.get(level.label) for labels in node_labels.values())
        }
        absent = frozenset(range(len(levels))) - carried
        topology = cls(levels=levels, node_locations={}, not_in_force=absent)
        for node_name in sorted(node_labels):
            labels = node_labels[node_name]
            location: list[str | None] = []
            missing = []
            for index, level in enumerate(levels):
                value = SHARED if index in absent else labels.get(level.label) or None
                if value is None:
                    missing.append(level.name)
                # Below a missing level the hierarchy is broken, so narrower values mean nothing.
                location.append(value if not location or location[-1] else None)
            topology.node_locations[node_name] = tuple(location)
            if missing:
                topology.missing_labels[node_name] = tuple(missing)
            for index in range(len(levels)):
                if location[index] is None:
                    break
                key = tuple(value for value in location[: index + 1] if value is not None)
                topology.nodes_by_domain.setdefault(Domain(index, key), []).append(node_name)
        return topology

    def coverage(self) -> list[tuple[TopologyLevel, int, int]]:
        """Per level: how many nodes sit in a domain there, and how many domains there are."""
        rows = []
        for index, level in enumerate(self.levels):
            domains = [nodes for d, nodes in self.nodes_by_domain.items() if d.level == index]
            rows.append((level, sum(len(nodes) for nodes in domains), len(domains)))
        return rows

    def in_force(self) -> list[TopologyLevel]:
        return [level for index, level in enumerate(self.levels) if index not in self.not_in_force]

    def level_index(self, name: str) -> int:
        for index, level in enumerate(self.levels):
            if level.name == name:
                return index
        raise KeyError(name)

    def domain_of(self, location: Location, level: int) -> Domain | None:
        prefix = location[: level + 1]
        if any(value is None for value in prefix):
            return None
        return Domain(level, tuple(value for value in prefix if value is not None))

    def named(self, location: Sequence[str | None]) -> dict[str, str]:
        """A location, or a domain's key, as the values known by level name, without the levels
        not in force: how moves are remembered and compared."""
        return {
            level.name: value
            for level, value in zip(self.levels, location, strict=False)
            if value is not None and value != SHARED
        }

    def domains_at(self, level: int) -> list[Domain]:
        return sorted((d for d in self.nodes_by_domain if d.level == level), key=lambda d: d.key)

    def distance(self, a: Location, b: Location) -> float:
        """The weight of the widest level at which a and b differ (unknown counts as different)."""
        split = first_split(a, b)
        return self.levels[split].weight if split < len(self.levels) else 0.0

    def location_within(self, domain: Domain) -> Location:
        """What is known of a pod once it is planned into `domain`: nothing below that level,
        but the levels not in force, which every node shares."""
        below = range(len(domain.key), len(self.levels))
        return domain.key + tuple(SHARED if i in self.not_in_force else None for i in below)


def first_split(a: Location, b: Location) -> int:
    """The widest level at which a and b are in different (or unknown) domains, as an index;
    the number of levels when they share every one. They differ at every level below it. A
    function, not a method, because the per-edge loops call it millions of times."""
    for index, (value_a, value_b) in enumerate(zip(a, b, strict=True)):
        if value_a is None or value_a != value_b:
            return index
    return len(a)
