"""The workload-pair model against the pod-pair model of the same traffic, spelled out pair by
pair as a workload answer means it: the same peers, costs, gains, heavy domains, group traffic
and tallies, before and after moves, on clusters where some nodes lack a level's label.

Each pod pair's rate is a whole number and the level weights are too, so both models' sums are
exact and must be equal, not merely close."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import builders as b
from rebalancer.cluster.model import Snapshot
from rebalancer.cost.figures import Tally
from rebalancer.cost.model import CostModel
from rebalancer.cost.pod_pairs import PodCostModel
from rebalancer.cost.workload_pairs import WorkloadCostModel
from rebalancer.planning.cycle import build_view
from rebalancer.strategies.framework import ClusterView
from rebalancer.traffic.mapping import read_traffic
from rebalancer.traffic.model import Sample, WorkloadTraffic
from rebalancer.traffic.queries import build_queries
from rebalancer.traffic.settings import IstioSource
from tests.conftest import grid_nodes, make_policy, snapshot_of, traffic_of

NODES = [
    *grid_nodes(zones="ab", racks=2, per_rack=1),
    b.node("node-no-rack", zone="a"),
    b.node("node-no-zone", rack="r1"),
]
NODE_NAMES = [node["metadata"]["name"] for node in NODES]
ISTIO = build_queries(IstioSource(source="istio"))


@dataclass
class Case:
    snapshot: Snapshot
    series: list[Sample]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    objects = list(NODES)
    for index, size in enumerate(sizes):
        placed = draw(st.lists(st.sampled_from(NODE_NAMES), min_size=size, max_size=size))
        objects += b.deployment_pods(f"app{index}", placed)
    apps = range(len(sizes))
    ends = draw(st.lists(st.tuples(st.sampled_from(apps), st.sampled_from(apps)), unique=True))
    series = []
    for source, destination in ends or [(0, 0)]:
        per_pair = draw(st.integers(1, 40))  # a whole number per pod pair, for exact sums
        labels = {
            "source_workload_namespace": "default",
            "source_workload": f"app{source}",
            "destination_workload_namespace": "default",
            "destination_workload": f"app{destination}",
        }
        series.append(
            Sample(tuple(labels.values()), float(per_pair * sizes[source] * sizes[destination]))
        )
    return Case(snapshot_of(objects), series)


def _spelled_out(traffic: WorkloadTraffic) -> dict[tuple[str, str], float]:
    """Every pod pair of each workload pair, with its rate."""
    rates: dict[tuple[str, str], float] = {}
    for (a, z), rate in traffic.rates.items():
        pairs = (
            itertools.combinations(traffic.members[a], 2)
            if a == z
            else itertools.product(traffic.members[a], traffic.members[z])
        )
        rates.update((pair, rate) for pair in pairs)
    return rates


def _views(case: Case, min_pair_rate: float) -> tuple[ClusterView, ClusterView] | None:
    traffic = read_traffic(case.series, None, ISTIO, case.snapshot, 60)
    if not isinstance(traffic, WorkloadTraffic):
        return None  # only single pods talking to themselves: nothing to compare
    policy = make_policy(thresholds={"min_pair_rate": min_pair_rate})
    by_workload = build_view(policy, case.snapshot, traffic)
    by_pod = build_view(policy, case.snapshot, traffic_of(_spelled_out(traffic)))
    assert isinstance(by_workload.cost, WorkloadCostModel)
    assert isinstance(by_pod.cost, PodCostModel)
    return by_workload, by_pod


def _tally_figures(tally: Tally) -> tuple[object, ...]:
    return tally.split_at, tally.total, tally.weighted, dict(tally.pairs)


def _assert_alike(view: ClusterView, by_workload: CostModel, by_pod: CostModel) -> None:
    assert by_workload.locations == by_pod.locations
    assert {pod: dict(by_workload.peers[pod]) for pod in by_workload.peers} == by_pod.peers
    assert by_workload.edge_count() == by_pod.edge_count()
    domains = [d for level in range(3) for d in view.topology.domains_at(level)]
    for pod in by_pod.locations:
        assert by_workload.untouched(pod) == by_pod.untouched(pod)
        for domain in domains:
            assert by_workload.worth({pod: domain}) == by_pod.worth({pod: domain})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), min_pair_rate=st.sampled_from([0.0, 10.0]), data=st.data())
def test_workload_pairs_count_what_their_pod_pairs_count(
    case: Case, min_pair_rate: float, data: st.DataObject
) -> None:
    views = _views(case, min_pair_rate)
    if views is None:
        return
    by_workload, by_pod = views
    _assert_alike(by_workload, by_workload.cost, by_pod.cost)
    tally = by_workload.cost.tally(case.snapshot)
    assert _tally_figures(tally) == _tally_figures(by_pod.cost.tally(case.snapshot))
    for min_share in (0.3, 0.5, 1.0):
        for above_home in (True, False):
            assert sorted(
                by_workload.cost.heavy_domains(range(3), min_share, above_home=above_home)
            ) == sorted(by_pod.cost.heavy_domains(range(3), min_share, above_home=above_home))
        heaviest = by_pod.cost.heavy_domains(range(3), min_share, above_home=False, heaviest=2)
        every = by_pod.cost.heavy_domains(range(3), min_share, above_home=False)
        for level in range(3):
            weights = sorted((row.weight for row in every if row.level == level), reverse=True)
            for rows in (
                heaviest,
                by_workload.cost.heavy_domains(range(3), min_share, above_home=False, heaviest=2),
            ):
                kept = sorted((r.weight for r in rows if r.level == level), reverse=True)
                assert kept == pytest.approx(weights[:2])

    pods = sorted(by_pod.cost.locations)
    domains = [d for level in range(3) for d in by_workload.topology.domains_at(level)]
    targets = (
        data.draw(st.dictionaries(st.sampled_from(pods), st.sampled_from(domains))) if pods else {}
    )
    if targets:
        assert by_workload.cost.joint_gain(targets) == by_pod.cost.joint_gain(targets)
    group = data.draw(st.sets(st.sampled_from(pods))) if pods else set()
    assert by_workload.cost.group_traffic(group) == by_pod.cost.group_traffic(group)
    start = by_workload.cost.copy()  # stays as it was while the model it was copied from moves
    moved_by_pod = by_pod.cost.copy()
    for pod, target in targets.items():
        by_workload.cost.move(pod, target)
        moved_by_pod.move(pod, target)
    _assert_alike(by_workload, by_workload.cost, moved_by_pod)
    assert _tally_figures(by_workload.cost.retally(tally, start)) == _tally_figures(
        moved_by_pod.tally(case.snapshot)
    )
    _assert_alike(by_workload, start, by_pod.cost)
