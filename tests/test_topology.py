"""Domains are hierarchical, distance is the widest differing level, unknown is never a target."""

from __future__ import annotations

from rebalancer.cluster.topology import Domain, Topology, TopologyLevel, first_split

LEVELS = (
    TopologyLevel(name="zone", label="zone", weight=10),
    TopologyLevel(name="rack", label="rack", weight=3),
    TopologyLevel(name="host", label="host", weight=1),
)


def topology() -> Topology:
    return Topology.from_node_labels(
        LEVELS,
        {
            "a1": {"zone": "a", "rack": "r1", "host": "a1"},
            "a2": {"zone": "a", "rack": "r1", "host": "a2"},
            "b1": {"zone": "b", "rack": "r1", "host": "b1"},
            "x1": {"rack": "r1", "host": "x1"},
        },
    )


def test_rack_names_reused_in_two_zones_are_two_racks() -> None:
    racks = topology().domains_at(1)
    assert racks == [Domain(1, ("a", "r1")), Domain(1, ("b", "r1"))]
    assert topology().nodes_by_domain[Domain(1, ("a", "r1"))] == ["a1", "a2"]


def test_distance_is_the_weight_of_the_widest_differing_level() -> None:
    t = topology()
    loc = t.node_locations
    assert t.distance(loc["a1"], loc["a1"]) == 0
    assert t.distance(loc["a1"], loc["a2"]) == 1
    assert t.distance(loc["a1"], loc["b1"]) == 10
    # The widest split: traffic crosses that level and every level below it.
    assert first_split(loc["a1"], loc["a2"]) == 2
    assert first_split(loc["a1"], loc["b1"]) == 0
    assert first_split(loc["a1"], loc["a1"]) == 3


def test_a_node_without_a_level_label_is_reported_and_never_in_a_domain() -> None:
    t = topology()
    assert t.missing_labels == {"x1": ("zone", "rack", "host")}
    assert all("x1" not in nodes for nodes in t.nodes_by_domain.values())
    assert t.distance(t.node_locations["x1"], t.node_locations["x1"]) == 10


def test_a_planned_location_knows_nothing_below_its_level() -> None:
    t = topology()
    planned = t.location_within(Domain(0, ("a",)))
    assert planned == ("a", None, None)
    assert t.distance(planned, t.node_locations["a1"]) == 3
