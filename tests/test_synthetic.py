"""The scale benchmark's clusters have the shape its figures claim."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from harness.synthetic import Size, generate
from rebalancer.cluster.parse import parse_snapshot
from rebalancer.config.policy import parse_policy
from rebalancer.planning.cycle import build_view
from rebalancer.simulator.run import DEFAULT_POLICY
from rebalancer.traffic.answer import parse_answer
from rebalancer.traffic.mapping import read_traffic
from rebalancer.traffic.model import TrafficFailure
from rebalancer.traffic.queries import build_queries

SMALL = Size("test", nodes=200, pods=2_000, pairs=10_000)


def test_a_size_and_a_seed_give_the_same_cluster() -> None:
    assert generate(SMALL, 3) == generate(SMALL, 3)
    assert generate(SMALL, 3).pod_rates != generate(SMALL, 4).pod_rates


def test_the_cluster_has_the_asked_size_and_heavy_tails() -> None:
    synthetic = generate(SMALL)
    snapshot = parse_snapshot(synthetic.cluster, "synthetic")
    assert len(snapshot.nodes) == SMALL.nodes
    assert len(snapshot.pods) == SMALL.pods
    assert len(synthetic.pod_rates) == SMALL.pairs
    sizes = sorted(len(w.pods) for w in synthetic.workloads)
    assert sizes[len(sizes) // 2] <= 3  # most workloads are small
    assert sizes[-1] >= 30  # and a few are large
    degree: Counter[tuple[str, str]] = Counter()
    for a, z in synthetic.pod_rates:
        degree[a] += 1
        degree[z] += 1
    mean = 2 * SMALL.pairs / len(degree)
    assert max(degree.values()) > 5 * mean  # a few pods are hubs


@pytest.mark.parametrize(("source", "answer"), [("hubble", "pod"), ("istio", "workload")])
def test_both_answers_parse_and_map_onto_the_snapshot(source: str, answer: str) -> None:
    synthetic = generate(SMALL)
    every_pair = "thresholds: {min_pair_rate: 0}\n"
    policy = parse_policy(DEFAULT_POLICY + f"traffic: {{source: {source}}}\n{every_pair}", "test")
    snapshot = parse_snapshot(synthetic.cluster, "synthetic")
    response = synthetic.pod_response() if answer == "pod" else synthetic.workload_response()
    queries = build_queries(policy.traffic)
    samples = parse_answer(json.dumps(response).encode(), queries.labels)
    traffic = read_traffic(samples, None, queries, snapshot, policy.traffic.max_age_seconds)
    assert not isinstance(traffic, TrafficFailure) and not traffic.unmatched
    view = build_view(policy, snapshot, traffic)
    assert view.cost.tally(snapshot).total == pytest.approx(sum(synthetic.pod_rates.values()))
