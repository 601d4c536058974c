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
    """Only the label it lacks is named: it has the rack and host labels, they just mean
    nothing without its zone (the warning used to name them too)."""
    t = topology()
    assert t.missing_labels == {"x1": ("zone",)}
    assert t.node_locations["x1"] == (None, None, None)
    assert all("x1" not in nodes for nodes in t.nodes_by_domain.values())
    assert t.distance(t.node_locations["x1"], t.node_locations["x1"]) == 10


def test_a_planned_location_knows_nothing_below_its_level() -> None:
    t = topology()
    planned = t.location_within(Domain(0, ("a",)))
    assert planned == ("a", None, None)
    assert t.distance(planned, t.node_locations["a1"]) == 3


REGION_ZONE_HOST = (
    TopologyLevel(name="region", label="topology.kubernetes.io/region", weight=100),
    TopologyLevel(name="zone", label="topology.kubernetes.io/zone", weight=10),
    TopologyLevel(name="host", label="kubernetes.io/hostname", weight=1),
)
ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"


def test_a_level_no_node_carries_is_not_in_force_and_hides_nothing() -> None:
    """On kind, k3s and most on-premises clusters no node has a region: the default levels
    dropped every node from every level, and the default policy planned nothing."""
    t = Topology.from_node_labels(
        REGION_ZONE_HOST,
        {"a1": {ZONE: "a", HOST: "a1"}, "b1": {ZONE: "b", HOST: "b1"}},
    )
    assert t.not_in_force == {0}
    assert t.missing_labels == {}
    assert [level.name for level in t.in_force()] == ["zone", "host"]
    assert t.distance(t.node_locations["a1"], t.node_locations["b1"]) == 10
    zone_b = t.domain_of(t.node_locations["b1"], 1)
    assert zone_b is not None and t.nodes_by_domain[zone_b] == ["b1"]
    assert zone_b.describe(t.levels) == {"zone": "b"}
    assert zone_b.node_labels(t.levels) == {ZONE: "b"}  # no requirement on a region
    assert zone_b.name == "b"


def test_a_region_some_nodes_lack_is_in_force_and_named_on_those_nodes() -> None:
    region = "topology.kubernetes.io/region"
    t = Topology.from_node_labels(
        REGION_ZONE_HOST,
        {"a1": {region: "r", ZONE: "a", HOST: "a1"}, "b1": {ZONE: "b", HOST: "b1"}},
    )
    assert t.not_in_force == frozenset()
    assert t.missing_labels == {"b1": ("region",)}
