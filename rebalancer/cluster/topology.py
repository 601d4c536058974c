"""Where each node sits in the network, and what it costs to talk across that distance.

Domains are hierarchical: a rack is identified by its zone *and* its rack label, because on-premises
clusters often reuse rack names in every zone. A node that lacks a level's label is never guessed
into a domain: its domain is unknown from that level down, it is reported, and it is never a target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

import msgspec
from pydantic import BaseModel, ConfigDict, Field

DomainKey = tuple[str, ...]
"""A domain at level i: the label values of levels 0..i, widest first."""

Location = tuple[str | None, ...]
"""Where a pod is, one label value per level; None where unknown (missing label, or not decided)."""


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
        return {levels[index].name: value for index, value in enumerate(self.key)}


@dataclass
class Topology:
    levels: tuple[TopologyLevel, ...]
    node_locations: dict[str, Location]
    missing_labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Node name -> names of the levels whose label it lacks."""
    nodes_by_domain: dict[Domain, list[str]] = field(default_factory=dict)

    @classmethod
    def from_node_labels(
        cls, levels: tuple[TopologyLevel, ...], node_labels: Mapping[str, Mapping[str, str]]
    ) -> Topology:
        topology = cls(levels=levels, node_locations={})
        for node_name in sorted(node_labels):
            labels = node_labels[node_name]
            location: list[str | None] = []
            for level in levels:
                value = labels.get(level.label)
                # Below a missing level the hierarchy is broken, so narrower values mean nothing.
                location.append(value if value and (not location or location[-1]) else None)
            topology.node_locations[node_name] = tuple(location)
            missing = tuple(
                level.name for level, value in zip(levels, location, strict=True) if value is None
            )
            if missing:
                topology.missing_labels[node_name] = missing
            for index in range(len(levels)):
                if location[index] is None:
                    break
                key = tuple(value for value in location[: index + 1] if value is not None)
                topology.nodes_by_domain.setdefault(Domain(index, key), []).append(node_name)
        return topology

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

    def domains_at(self, level: int) -> list[Domain]:
        return sorted((d for d in self.nodes_by_domain if d.level == level), key=lambda d: d.key)

    def distance(self, a: Location, b: Location) -> float:
        """The weight of the widest level at which a and b differ (unknown counts as different)."""
        split = first_split(a, b)
        return self.levels[split].weight if split < len(self.levels) else 0.0

    def location_within(self, domain: Domain) -> Location:
        """What is known of a pod once it is planned into `domain`: nothing below that level."""
        unknown: tuple[None, ...] = (None,) * (len(self.levels) - len(domain.key))
        return domain.key + unknown


def first_split(a: Location, b: Location) -> int:
    """The widest level at which a and b are in different (or unknown) domains, as an index;
    the number of levels when they share every one. They differ at every level below it. A
    function, not a method, because the per-edge loops call it millions of times."""
    for index, (value_a, value_b) in enumerate(zip(a, b, strict=True)):
        if value_a is None or value_a != value_b:
            return index
    return len(a)
