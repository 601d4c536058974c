"""One real control plane per test session, with 12 kwok nodes: 3 zones x 2 racks x 2 nodes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.cluster import LocalCluster, local_cluster
from rebalancer.simulator.objects import node_object
from rebalancer.simulator.scenario import NodeGrid, Scenario

GRID = NodeGrid(zones=3, racks_per_zone=2, nodes_per_rack=2, cpu="8", memory="32Gi")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with local_cluster(tmp_path_factory.mktemp("control-plane")) as running:
        nodes = Scenario(name="grid", nodes=GRID, workloads=()).node_specs()
        running.add_nodes([node_object(spec) for spec in nodes])
        yield running
