"""Each real cluster's label shape, with the built-in or preset levels: the expected move."""

from __future__ import annotations

import pytest

from harness import builders as b
from harness.shapes import SHAPES, Shape
from rebalancer.cluster.model import Snapshot
from rebalancer.config.policy import Policy
from rebalancer.planning.cycle import build_view, plan_cycle
from rebalancer.planning.state import PlannerState
from tests.conftest import all_pairs, pod_keys, snapshot_of, traffic_of


def shape_nodes(shape: Shape, prefix: str) -> list[b.Obj]:
    nodes = []
    for name, labels in shape.node_labels(prefix).items():
        node = b.node(name)
        node["metadata"]["labels"] = labels
        nodes.append(node)
    return nodes


def shape_objects(shape: Shape, prefix: str, namespace: str = "default") -> list[b.Obj]:
    nodes = shape_nodes(shape, prefix)
    servers = [f"{prefix}n{index}" for index in shape.server_nodes]
    return [
        *nodes,
        *b.deployment_pods("client", [f"{prefix}n1"] * 2, namespace=namespace),
        *b.deployment_pods("server", servers, namespace=namespace),
    ]


def expect_the_clients_move(shape: Shape, snapshot: Snapshot, prefix: str) -> None:
    rates = all_pairs(pod_keys(snapshot, "client"), pod_keys(snapshot, "server"), 100.0)
    policy = Policy.model_validate(shape.policy())
    outcome = plan_cycle(
        policy, snapshot, traffic_of(rates), PlannerState(), now=1e6, persistence_required=1
    )
    assert outcome.plan is not None and outcome.topology.missing_labels == {}
    moves = {move.pod.split("/")[1].split("-")[0]: move for move in outcome.plan.moves}
    assert "client" in moves, outcome.plan
    assert moves["client"].target_labels == shape.expected_labels(prefix)
    assert moves["client"].node in {f"{prefix}n{index}" for index in shape.server_nodes}


@pytest.mark.parametrize("name", list(SHAPES))
def test_each_label_shape_plans_the_clients_move_into_its_peers_domain(name: str) -> None:
    shape = SHAPES[name]
    expect_the_clients_move(shape, snapshot_of(shape_objects(shape, "")), "")


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_batched_gain_of_each_domain_is_the_pair_by_pair_one(name: str) -> None:
    """Levels not in force sit between levels in force in several presets (Topograph's tiers,
    its old block and leaf): the numpy gains must count them as shared, as `worth` does."""
    shape = SHAPES[name]
    snapshot = snapshot_of(shape_objects(shape, ""))
    rates = all_pairs(pod_keys(snapshot, "client"), pod_keys(snapshot, "server"), 100.0)
    view = build_view(Policy.model_validate(shape.policy()), snapshot, traffic_of(rates))
    moves = [
        (pod, domain)
        for pod in snapshot.pods
        for level in range(len(view.topology.levels))
        for domain in view.topology.domains_at(level)
    ]
    batched = view.cost.worths_alone(moves)  # None where no pod is: left to `worth`
    compared = [(b, m) for b, m in zip(batched, moves, strict=True) if b is not None]
    assert len(compared) > len(moves) / 3
    assert all(b == view.cost.worth({pod: domain}) for b, (pod, domain) in compared)
