"""Node label shapes of real clusters, each with a move the rebalancer must plan on it.

Every shape has four nodes: n1 in domain X, n2 and n3 in domain Y, n4 in another zone. A client
with two pods on n1 talks to a server with three pods in Y, so a client pod's move into Y gains
the most; the tests check that it is planned, with the target labels of every level in force
down to the shape's distinguishing level, and no others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOST = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Shape:
    preset: str | None
    """The policy's topology preset; None for the built-in default."""
    level: str
    """The level split-peers starts at (zone unless the shape has no zones)."""
    down_to: str
    """The distinguishing level: X and Y differ there and agree on every wider one."""
    shared: dict[str, str]
    """Labels n1, n2 and n3 share (n4 gets them too, but in zone b)."""
    x: dict[str, str]
    """n1's own labels at the distinguishing level (and below it)."""
    y: dict[str, str]
    """n2's and n3's."""
    expected: dict[str, str]
    """The target labels of the client's move into Y (plus n2's hostname, where the
    distinguishing level is the host)."""
    server_nodes: tuple[int, ...] = (2, 3, 2)
    """Where the server's three pods run: all on n2 where Y is one host."""

    def expected_labels(self, prefix: str) -> dict[str, str]:
        return {**self.expected, **({HOST: f"{prefix}n2"} if self.down_to == "host" else {})}

    def node_labels(self, prefix: str) -> dict[str, dict[str, str]]:
        names = [f"{prefix}n{index}" for index in range(1, 5)]
        labels = [
            {**self.shared, **self.x},
            {**self.shared, **self.y},
            {**self.shared, **self.y},
            {**self.shared, **self.x, **({ZONE: "zone-b"} if ZONE in self.shared else {})},
        ]
        return {name: {HOST: name, **own} for name, own in zip(names, labels, strict=True)}

    def policy(self) -> dict[str, Any]:
        topology = {"preset": self.preset} if self.preset else {}
        args = {"level": self.level, "down_to": self.down_to}
        return {
            "topology": topology,
            "strategies": [{"name": "split-peers", "args": args}],
            "limits": {"per_cycle": None, "per_node": None, "per_namespace": None},
        }


def _layers(prefix: str, x: str, y: str, *wider: str) -> tuple[dict[str, str], ...]:
    """Shared wider labels, then X's and Y's value of the distinguishing label."""
    shared = {label: f"{label.rsplit('/', 1)[-1]}-1" for label in wider}
    return shared, {prefix: x}, {prefix: y}


def _shape(
    preset: str | None, down_to: str, label: str, wider: tuple[str, ...], zone: bool = True
) -> Shape:
    shared, x, y = _layers(label, "x-1", "y-1", *wider)
    if zone:
        shared = {ZONE: "zone-a", **shared}
    return Shape(
        preset=preset,
        level="zone" if zone else down_to,
        down_to=down_to,
        shared=shared,
        x=x,
        y=y,
        expected={**shared, **y},
    )


SHAPES: dict[str, Shape] = {
    # kind and k3s: hostnames only, zones only where the user labelled them.
    "kind-hosts": Shape(None, "host", "host", {}, {}, {}, {}, server_nodes=(2, 2, 2)),
    "kind-zones": Shape(
        None, "zone", "zone", {}, {ZONE: "zone-a"}, {ZONE: "zone-b"}, {ZONE: "zone-b"}
    ),
    "on-premises-racks": _shape(None, "rack", "topology.kubernetes.io/rack", ()),
    "aks": Shape(
        None,
        "zone",
        "zone",
        {REGION: "eastus2"},
        {ZONE: "eastus2-1"},
        {ZONE: "eastus2-2"},
        {REGION: "eastus2", ZONE: "eastus2-2"},
    ),
    "eks": _shape(
        "aws",
        "layer-3",
        "topology.k8s.aws/network-node-layer-3",
        ("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2"),
    ),
    "gke": _shape(
        "gke",
        "subblock",
        "cloud.google.com/gce-topology-subblock",
        ("cloud.google.com/gce-topology-block",),
    ),
    "oci": _shape(
        "oci",
        "rack",
        "oci.oraclecloud.com/host.rack_id",
        ("oci.oraclecloud.com/host.network_block_id",),
    ),
    "oci-rdma": _shape(
        "oci-rdma",
        "local-block",
        "oci.oraclecloud.com/rdma.local_block_id",
        ("oci.oraclecloud.com/rdma.hpc_island_id", "oci.oraclecloud.com/rdma.network_block_id"),
    ),
    "topograph": _shape(
        "topograph", "tier-0", "fabric.topograph.run/tier-0", ("fabric.topograph.run/tier-1",)
    ),
    "topograph-0.1": _shape(
        "topograph-legacy",
        "block",
        "network.topology.nvidia.com/block",
        ("network.topology.nvidia.com/datacenter", "network.topology.nvidia.com/spine"),
    ),
    "nvlink-clique": _shape("nvlink", "nvlink", "nvidia.com/gpu.clique", ()),
}
