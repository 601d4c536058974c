"""The topology section: the network levels, each a node label with a cost weight, given
explicitly or by a provider's preset. Apart, as the presets alone are a long table."""

from __future__ import annotations

from itertools import pairwise
from typing import Literal

from pydantic import model_validator

from rebalancer.cluster.topology import TopologyLevel
from rebalancer.strict import Strict

TopologyPreset = Literal[
    "kubernetes", "aws", "gke", "oci", "oci-rdma", "topograph", "topograph-legacy", "nvlink"
]

_ZONE = TopologyLevel(name="zone", label="topology.kubernetes.io/zone", weight=10)
_HOST = TopologyLevel(name="host", label="kubernetes.io/hostname", weight=1)


def _level(name: str, label: str, weight: float) -> TopologyLevel:
    return TopologyLevel(name=name, label=label, weight=weight)


# Each preset lists every label its provider may set, widest first; levels whose label no node
# carries are not in force (cluster/topology.py), so one preset fits the provider's variants.
PRESET_LEVELS: dict[str, tuple[TopologyLevel, ...]] = {
    # kind, k3s, AKS (zones such as eastus2-1), on-premises racks: region and rack often absent.
    "kubernetes": (
        _level("region", "topology.kubernetes.io/region", 100),
        _ZONE,
        _level("rack", "topology.kubernetes.io/rack", 3),
        _HOST,
    ),
    # EKS network topology (cloud-provider-aws): layer-1 is the widest.
    "aws": (
        _ZONE,
        _level("layer-1", "topology.k8s.aws/network-node-layer-1", 4),
        _level("layer-2", "topology.k8s.aws/network-node-layer-2", 2),
        _level("layer-3", "topology.k8s.aws/network-node-layer-3", 1),
    ),
    "gke": (
        _ZONE,
        _level("block", "cloud.google.com/gce-topology-block", 4),
        _level("subblock", "cloud.google.com/gce-topology-subblock", 2),
        _level("host", "cloud.google.com/gce-topology-host", 1),
    ),
    # OKE's host labels, and the RDMA ones of its HPC images (island > network block > local).
    "oci": (
        _ZONE,
        _level("network-block", "oci.oraclecloud.com/host.network_block_id", 4),
        _level("rack", "oci.oraclecloud.com/host.rack_id", 2),
        _HOST,
    ),
    "oci-rdma": (
        _ZONE,
        _level("hpc-island", "oci.oraclecloud.com/rdma.hpc_island_id", 6),
        _level("network-block", "oci.oraclecloud.com/rdma.network_block_id", 4),
        _level("local-block", "oci.oraclecloud.com/rdma.local_block_id", 2),
        _HOST,
    ),
    # NVIDIA Topograph 1.x: switch tiers, tier-0 nearest the node, then the NVLink domain.
    "topograph": (
        _ZONE,
        _level("tier-3", "fabric.topograph.run/tier-3", 8),
        _level("tier-2", "fabric.topograph.run/tier-2", 6),
        _level("tier-1", "fabric.topograph.run/tier-1", 4),
        _level("tier-0", "fabric.topograph.run/tier-0", 2),
        _level("nvlink", "accelerator.topograph.run/domain", 1.5),
        _HOST,
    ),
    # Topograph before 1.0: datacenter > spine > block (0.1), core > spine > leaf (0.3-0.5).
    "topograph-legacy": (
        _ZONE,
        _level("datacenter", "network.topology.nvidia.com/datacenter", 8),
        _level("core", "network.topology.nvidia.com/core", 6),
        _level("spine", "network.topology.nvidia.com/spine", 4),
        _level("block", "network.topology.nvidia.com/block", 2),
        _level("leaf", "network.topology.nvidia.com/leaf", 2),
        _level("nvlink", "network.topology.nvidia.com/accelerator", 1.5),
        _HOST,
    ),
    # GPU feature discovery's NVLink clique (an NVL72 rack or a partition of it).
    "nvlink": (_ZONE, _level("nvlink", "nvidia.com/gpu.clique", 2), _HOST),
}


class TopologyPolicy(Strict):
    """Either a preset or explicit levels, widest first (for example zone, rack, host)."""

    preset: TopologyPreset | None = None
    """Named label sets, each zone first: `kubernetes` (region, zone,
    `topology.kubernetes.io/rack`, hostname; kind, k3s, AKS, on-premises), `aws` (the three EKS
    network-node layers), `gke` (block, subblock, host), `oci` (`host.network_block_id`,
    `host.rack_id`), `oci-rdma` (HPC island, network and local block), `topograph` (Topograph
    1.x switch tiers 3 to 0, then the NVLink domain), `topograph-legacy` (its 0.x labels),
    `nvlink` (`nvidia.com/gpu.clique`). Without preset or levels, `kubernetes`. A level whose
    label no node carries is not in force: it separates nothing and the narrower levels still
    count, so a preset fits clusters that set only some of its labels."""
    levels: tuple[TopologyLevel, ...] = ()
    """Explicit levels, widest first, each a node label with a cost weight; instead of a preset."""
    zone_level: str = "zone"
    """The level whose crossings are billed and whose spread limits and HA rules refer to."""

    @model_validator(mode="after")
    def _one_source_of_levels(self) -> TopologyPolicy:
        if self.preset is not None and self.levels:
            raise ValueError("give either 'preset' or 'levels', not both")
        return self

    @property
    def resolved_levels(self) -> tuple[TopologyLevel, ...]:
        if self.levels:
            return self.levels
        return PRESET_LEVELS[self.preset or "kubernetes"]

    @model_validator(mode="after")
    def _levels_are_consistent(self) -> TopologyPolicy:
        levels = self.resolved_levels
        names = [level.name for level in levels]
        if len(set(names)) != len(names):
            raise ValueError(f"level names must be unique, got {names}")
        labels = [level.label for level in levels]
        if len(set(labels)) != len(labels):
            raise ValueError(f"level labels must be unique, got {labels}")
        weights = [level.weight for level in levels]
        if any(wide < narrow for wide, narrow in pairwise(weights)):
            raise ValueError(f"level weights must not grow from wide to narrow, got {weights}")
        if self.zone_level not in names:
            raise ValueError(f"zone_level {self.zone_level!r} is not a level (levels: {names})")
        return self
