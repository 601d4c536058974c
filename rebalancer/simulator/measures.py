"""What the simulator measures on its cluster: the figures under the traffic, the rules broken,
and each cycle's row of them.

Apart from the loop (run.py): the yardsticks and the benchmarks measure with the same functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rebalancer.cluster.model import Resources
from rebalancer.config.policy import Policy
from rebalancer.config.resolved import price_of
from rebalancer.cost.figures import Figures
from rebalancer.planning.cycle import build_view
from rebalancer.simulator.cluster import SimulatedCluster
from rebalancer.simulator.results import CycleFigures, Violations
from rebalancer.simulator.scenario import LEVEL_LABELS, Scenario

_NOTHING = Resources()


def _figure_policy(policy: Policy) -> Policy:
    """The policy's levels and price, but every pair counted: figures report all the traffic."""
    thresholds = policy.thresholds.model_copy(update={"min_pair_rate": 0.0})
    return policy.model_copy(update={"thresholds": thresholds})


def measure(cluster: SimulatedCluster, policy: Policy, scenario: Scenario | None = None) -> Figures:
    """The figures under the cluster's traffic now, or under that of `scenario`."""
    counted = _figure_policy(policy)
    view = build_view(counted, cluster.snapshot, cluster.traffic(scenario))
    return view.cost.figures(cluster.snapshot, price_of(counted, view.topology))


def violations(cluster: SimulatedCluster) -> Violations:
    """Rules broken now: budgets short of Ready pods, nodes over capacity, hard spread skewed."""
    pdb = sum(
        1
        for workload in cluster.scenario.workloads
        if len(cluster.ready_of(workload)) < workload.promised_ready
    )
    capacity = sum(
        1
        for node in cluster.snapshot.nodes.values()
        if not cluster.occupancy.requested.get(node.name, _NOTHING).fits_in(node.allocatable)
    )
    spread = 0
    for workload in cluster.scenario.workloads:
        for constraint in (c for c in workload.spread if c.hard):
            counts = domain_counts(
                LEVEL_LABELS[constraint.level],
                (node.labels for node in cluster.snapshot.nodes.values()),
                (
                    cluster.snapshot.nodes[pod.node_name].labels
                    for pod in cluster.ready_of(workload)
                    if pod.node_name
                ),
            )
            if counts and max(counts.values()) - min(counts.values()) > constraint.max_skew:
                spread += 1
    return {"pdb": pdb, "capacity": capacity, "spread": spread}


def cycle_row(
    number: int,
    cluster: SimulatedCluster,
    policy: Policy,
    counts: tuple[int, int, int],
    moved: tuple[str, ...] = (),
    *,
    rerouted: int = 0,
    averaged: Scenario | None = None,
    steps: tuple[tuple[int, dict[str, float]], ...] = (),
) -> CycleFigures:
    """Cycle `number`'s figures; `averaged`: the scenario with its phases averaged, for a phased
    one."""
    figures = measure(cluster, policy)
    evictions, landed, refused = counts
    average = None if averaged is None else measure(cluster, policy, averaged).weighted_cost
    return CycleFigures(
        number,
        figures.crossing,
        figures.weighted_cost,
        figures.monthly_cross_zone_cost,
        evictions,
        landed,
        refused,
        violations(cluster),
        moved,
        rerouted,
        average,
        steps,
    )


def domain_counts(
    label: str, nodes: Iterable[Mapping[str, str]], placed: Iterable[Mapping[str, str]]
) -> dict[str, int]:
    """Pods per domain of `label`: every domain some node is in, 0 where no pod runs. `placed`
    holds the labels of each pod's node; a node without the label counts in no domain."""
    counts = {labels[label]: 0 for labels in nodes if label in labels}
    for labels in placed:
        if label in labels:
            counts[labels[label]] = counts.get(labels[label], 0) + 1
    return counts
