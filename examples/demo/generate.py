"""Writes the demo's snapshot.json and traffic.json: `python examples/demo/generate.py`.

The cluster: 3 zones x 2 racks x 2 nodes. A shop frontend in zone a talks hard to its cart service
in zone b; an 8-pod training gang is spread over 4 racks; a ledger is spread over all zones on
purpose (and must stay so); a metrics agent barely talks at all.
"""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

from harness import builders as b

HERE = Path(__file__).parent
NODES = [f"node-{zone}{rack}{index}" for zone in "abc" for rack in (1, 2) for index in (1, 2)]


def _zone_spread(pod: b.Obj) -> None:
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": b.ZONE_LABEL,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "ledger"}},
        }
    ]


def cluster() -> list[b.Obj]:
    objects = [b.node(name, zone=f"zone-{name[5]}", rack=f"rack-{name[6]}") for name in NODES]
    objects += b.deployment_pods("frontend", ["node-a11", "node-a12", "node-a21"], namespace="shop")
    objects += b.deployment_pods("cart", ["node-b11", "node-b12", "node-b21"], namespace="shop")
    objects += [
        b.pdb("frontend", {"app": "frontend"}, 1, namespace="shop"),
        b.pdb("cart", {"app": "cart"}, 1, namespace="shop"),
    ]
    objects += b.deployment_pods(
        "ledger",
        ["node-a22", "node-b22", "node-c11"],
        namespace="payments",
        mutate_pod=_zone_spread,
    )
    objects += b.deployment_pods("metrics-agent", ["node-a11", "node-c21"], namespace="ops")
    gang_nodes = [
        "node-a11",
        "node-a12",
        "node-a21",
        "node-a22",
        "node-b11",
        "node-b21",
        "node-c12",
        "node-c22",
    ]
    # A training Job with room for restarts: one restart fails all its ranks (NCCL aborts).
    objects.append(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "resnet", "namespace": "ml"},
            "spec": {"parallelism": 8, "completions": 8, "backoffLimit": 16},
            "status": {"active": 8},
        }
    )
    for index, node_name in enumerate(gang_nodes):
        objects.append(
            b.pod(
                f"resnet-worker-{index}",
                node_name,
                ("Job", "resnet"),
                labels={"job-name": "resnet"},
                namespace="ml",
                cpu="1",
                memory="2Gi",
            )
        )
    return objects


def traffic(objects: list[b.Obj]) -> dict[tuple[str, str], float]:
    def pods(prefix: str) -> list[str]:
        return [
            f"{o['metadata']['namespace']}/{o['metadata']['name']}"
            for o in objects
            if o["kind"] == "Pod" and o["metadata"]["name"].startswith(prefix)
        ]

    rates: dict[tuple[str, str], float] = {}
    for client in pods("frontend"):
        for server in pods("cart"):
            rates[(client, server)] = 40.0
        for ledger in pods("ledger"):
            rates[(client, ledger)] = 2.0
    for a, c in combinations(pods("resnet-worker"), 2):
        rates[(a, c)] = 15.0
    agents = pods("metrics-agent")
    rates[(agents[0], agents[1])] = 0.05
    return rates


def main() -> None:
    objects = cluster()
    (HERE / "snapshot.json").write_text(json.dumps(b.k8s_list(objects), indent=1) + "\n")
    (HERE / "traffic.json").write_text(json.dumps(b.hubble_vector(traffic(objects))) + "\n")


if __name__ == "__main__":
    main()
