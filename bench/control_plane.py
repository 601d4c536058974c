"""How heavy is the local control plane? Start-up time with cached binaries, and peak memory of
every component with 12 kwok nodes and 100 pods. Prints a table; run with `make bench`."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from harness.cluster import build_binaries, local_cluster
from harness.process import peak_rss_mib
from rebalancer.simulator.scenario import NodeGrid, Scenario, WorkloadSpec

NODES = NodeGrid(zones=3, racks_per_zone=2, nodes_per_rack=2)
SCENARIO = Scenario(
    name="bench",
    nodes=NODES,
    workloads=tuple(
        WorkloadSpec(name=f"app{index}", namespace="bench", replicas=10, cpu="100m", memory="64Mi")
        for index in range(10)
    ),
)


def main() -> None:
    build_binaries()  # not timed: the build is cached after the first run
    started = time.monotonic()
    with local_cluster(Path(tempfile.mkdtemp(prefix="bench-cluster-"))) as cluster:
        ready = time.monotonic() - started
        cluster.load_scenario(SCENARIO)
        loaded = time.monotonic() - started - ready
        peaks = {
            name: peak_rss_mib(component.process.pid)
            for name, component in cluster.components.items()
        }
    pods = sum(SCENARIO.pods_of(w) for w in SCENARIO.workloads)
    nodes = len(SCENARIO.node_specs())
    print(f"control plane start-up, cached binaries: {ready:.1f} s")
    print(f"{nodes} nodes and {pods} pods created and Ready: {loaded:.1f} s")
    print(f"peak RSS with {nodes} nodes and {pods} pods:")
    for name, peak in peaks.items():
        print(f"  {name:<25} {peak:8.1f} MiB")
    print(f"  {'total':<25} {sum(peaks.values()):8.1f} MiB")


if __name__ == "__main__":
    main()
