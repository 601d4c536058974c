"""The soak's own checks flag what they should, so a clean soak means something."""

from __future__ import annotations

from harness.invariants import crowded_moves
from harness.soak import acted_on_faults
from rebalancer.planning.state import RecentMove
from rebalancer.simulator.scenario import parse_scenario

SCENARIO = parse_scenario("name: s\nworkloads: [{name: api, namespace: shop, replicas: 2}]", "s")


def move(at: float) -> RecentMove:
    return RecentMove(
        workload="Deployment/shop/api", left={"zone": "a"}, entered={"zone": "b"}, at=at
    )


def test_a_move_made_while_prometheus_was_faulty_is_flagged() -> None:
    windows = [(100.0, 130.0, "nan")]
    assert acted_on_faults([move(99.0), move(101.0), move(131.0)], windows) == []
    assert acted_on_faults([move(110.0)], windows) == [
        "Deployment/shop/api moved at 110 during prometheus nan"
    ]


def test_more_moves_in_one_cooldown_than_replicas_are_flagged() -> None:
    assert crowded_moves(SCENARIO, [move(0.0), move(30.0), move(60.0)], 60.0) == []
    assert crowded_moves(SCENARIO, [move(0.0), move(30.0), move(59.0)], 60.0) == [
        "Deployment/shop/api: 3 moves from 0"
    ]
