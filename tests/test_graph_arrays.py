"""The graph as arrays against the per-pod loops it replaces, on a cluster where some nodes lack
a level's label, so some pods' domains are unknown from a level down."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from harness import builders as b
from rebalancer.arrays import stable_order, unique_first_seen, unique_in_runs
from rebalancer.cluster.topology import Domain, first_split
from rebalancer.cost.figures import Tally
from rebalancer.planning.cycle import build_view
from rebalancer.strategies.framework import ClusterView
from tests.conftest import grid_nodes, make_policy, pod_pairs_of, snapshot_of, traffic_of


def _view() -> ClusterView:
    nodes = [
        *grid_nodes(zones="ab", racks=2, per_rack=2),
        b.node("node-no-rack", zone="a"),
        b.node("node-no-zone", rack="r1"),
    ]
    names = [node["metadata"]["name"] for node in nodes]
    pods = [  # three workloads, two pods of one of them on each node
        pod
        for app in range(3)
        for pod in b.deployment_pods(f"app{app}", [name for name in names[app::3] for _ in "xy"])
    ]
    snapshot = snapshot_of([*nodes, *pods])
    chance = random.Random(7)
    rates = {
        pair: chance.uniform(0.5, 50)
        for pair in itertools.combinations(sorted(snapshot.pods), 2)
        if chance.random() < 0.4
    }
    view = build_view(make_policy(), snapshot, traffic_of(rates))
    assert any(None in location for location in view.cost.locations.values())
    return view


def test_domain_numbers_give_first_split_of_every_pair() -> None:
    cost = pod_pairs_of(_view())
    arrays = cost.arrays
    splits = arrays.splits(cost.domain_ids(), arrays.source, arrays.target)
    expected = [
        first_split(cost.locations[arrays.pods[a]], cost.locations[arrays.pods[z]])
        for a, z in zip(arrays.source.tolist(), arrays.target.tolist(), strict=True)
    ]
    assert splits.tolist() == expected


def test_array_gains_and_costs_are_those_of_worth_for_every_pod_and_domain() -> None:
    cost = pod_pairs_of(_view())
    numbers = cost.domain_ids()
    pods = np.arange(len(cost.arrays.pods))
    for number, key in enumerate(numbers.keys):
        target = Domain(len(key) - 1, key)
        gains, costs = cost.gains_and_costs(numbers, pods, np.full(len(pods), number), target.level)
        for pod, gain, now in zip(cost.arrays.pods, gains.tolist(), costs.tolist(), strict=True):
            worth = cost.worth({pod: target})
            assert (gain, now) == pytest.approx((worth.gain, worth.cost), rel=1e-12, abs=1e-12)


def test_the_array_tally_is_a_pair_by_pair_count_with_unknown_domains() -> None:
    view = _view()
    cost = pod_pairs_of(view)
    tally = cost.tally(view.snapshot)
    counted = Tally(tally.weights, tally.names)
    for a, z, rate in cost.edges():
        counted.count(a, z, rate, first_split(cost.locations[a], cost.locations[z]), 1)
    assert (tally.split_at, tally.total, tally.weighted) == (
        counted.split_at,
        counted.total,
        counted.weighted,
    )
    assert list(tally.pairs.items()) == list(counted.pairs.items())


def test_edges_yield_each_pair_once_from_the_pod_whose_key_sorts_first() -> None:
    """Whichever way round the traffic named a pair."""
    snapshot = snapshot_of([*grid_nodes(), *b.deployment_pods("app", ["node-a11", "node-b11"] * 3)])
    keys = sorted(snapshot.pods)
    rates = {(z, a): 1.0 + index for index, (a, z) in enumerate(itertools.combinations(keys, 2))}
    cost = pod_pairs_of(build_view(make_policy(), snapshot, traffic_of(rates)))
    edges = list(cost.edges())
    assert {(a, z) for a, z, _rate in edges} == {(a, z) for z, a in rates}
    assert all(a < z for a, z, _rate in edges)
    assert len(edges) == cost.edge_count()


def test_domain_numbers_kept_between_moves_follow_each_model_s_moves() -> None:
    """A copy shares its original's numbers until one of them moves a pod."""
    original = pod_pairs_of(_view())
    original.domain_ids()
    moving = original.copy()
    pod = moving.arrays.pods[0]
    target = Domain(0, ("b",) if moving.locations[pod][0] == "a" else ("a",))
    moving.move(pod, target)
    for cost in (original, moving):
        arrays = cost.arrays
        splits = arrays.splits(cost.domain_ids(), arrays.source, arrays.target)
        assert splits.tolist() == [
            first_split(cost.locations[arrays.pods[a]], cost.locations[arrays.pods[z]])
            for a, z in zip(arrays.source.tolist(), arrays.target.tolist(), strict=True)
        ]


@pytest.mark.parametrize("size", [0, 1, 7, 5000])
def test_unique_in_runs_is_numpy_s_unique(size: int) -> None:
    chance = np.random.default_rng(size)
    keys = np.sort(chance.integers(0, 40, size)) * 100 + chance.integers(0, 9, size)
    found, position = unique_in_runs(keys)
    expected_found, expected_position = np.unique(keys, return_inverse=True)
    assert found.tolist() == expected_found.tolist()
    assert position.tolist() == expected_position.ravel().tolist()


@pytest.mark.parametrize("size", [0, 1, 7, 5000])
def test_unique_first_seen_is_numpy_s_unique(size: int) -> None:
    """Repeated keys in no order: the first position of each must be the least, whichever of
    its copies the unstable sort puts first."""
    keys = np.random.default_rng(size).integers(0, 50, size)
    found = unique_first_seen(keys)
    expected = np.unique(keys, return_index=True, return_inverse=True)
    assert [array.tolist() for array in found] == [array.ravel().tolist() for array in expected]


@pytest.mark.parametrize("largest", [0, 30, 2**62])
@pytest.mark.parametrize("size", [0, 1, 7, 5000])
def test_stable_order_is_a_stable_argsort(size: int, largest: int) -> None:
    """Repeated keys keep their order, also where keys times positions would overflow."""
    keys = np.random.default_rng(size).integers(0, largest + 1, size, dtype=np.int64)
    assert stable_order(keys).tolist() == np.argsort(keys, kind="stable").tolist()
