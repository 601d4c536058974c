"""Large synthetic clusters for the scale benchmark: the documents a cycle reads, nothing else.

A cluster is the `kubectl get -o json` List a snapshot is parsed from, plus the `/api/v1/query`
answer Prometheus would give for it, at pod level (Hubble's labels) or at workload level
(Istio's). Shapes follow what large clusters look like:
- workload sizes are heavy-tailed (most Deployments have a few replicas, a few have hundreds);
- who calls whom is a Chung-Lu graph of workloads with power-law weights, so a few services
  (a gateway, a cache) are called by many and most by few;
- each call edge carries pod pairs in proportion to the two workloads' sizes, so pod degrees are
  heavy-tailed too; rates are log-normal.
Everything is drawn from one seeded generator, so a size and a seed give the same bytes.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness import builders as b

ZONES = 3
NODES_PER_RACK = 40
MAX_REPLICAS = 500
WORKLOADS_PER_NAMESPACE = 12
CALLS_PER_WORKLOAD = 4.0
"""Mean out-degree of the workload call graph."""


@dataclass(frozen=True)
class Size:
    name: str
    nodes: int
    pods: int
    pairs: int
    """Communicating pod pairs, each one series of the pod-level answer."""


@dataclass(frozen=True)
class SyntheticWorkload:
    namespace: str
    name: str
    pods: tuple[str, ...]
    """Pod names, without the namespace."""


@dataclass(frozen=True)
class SyntheticCluster:
    cluster: dict[str, Any]
    """The List of nodes, pods, ReplicaSets, Deployments, PDBs, Services and EndpointSlices."""
    workloads: tuple[SyntheticWorkload, ...]
    pod_rates: dict[tuple[tuple[str, str], tuple[str, str]], float]
    """(namespace, pod) pair -> rate, each pair once."""

    def pod_response(self) -> dict[str, Any]:
        """The answer to the Hubble query, labelled as Hubble labels flows."""
        return _vector(
            (
                {
                    "source_namespace": a[0],
                    "source_pod": a[1],
                    "destination_namespace": z[0],
                    "destination_pod": z[1],
                },
                rate,
            )
            for (a, z), rate in self.pod_rates.items()
        )

    def workload_response(self) -> dict[str, Any]:
        """The answer to the Istio query: the same traffic summed per pair of workloads."""
        owner = {(w.namespace, pod): w for w in self.workloads for pod in w.pods}
        summed: dict[tuple[SyntheticWorkload, SyntheticWorkload], float] = {}
        for (a, z), rate in self.pod_rates.items():
            key = (owner[a], owner[z])
            summed[key] = summed.get(key, 0.0) + rate
        return _vector(
            (
                {
                    "source_workload_namespace": a.namespace,
                    "source_workload": a.name,
                    "destination_workload_namespace": z.namespace,
                    "destination_workload": z.name,
                },
                rate,
            )
            for (a, z), rate in summed.items()
        )


def generate(size: Size, seed: int = 0) -> SyntheticCluster:
    rng = random.Random(seed)
    nodes = [_node(index, size.nodes) for index in range(size.nodes)]
    node_names = [node["metadata"]["name"] for node in nodes]
    objects: list[dict[str, Any]] = list(nodes)
    workloads: list[SyntheticWorkload] = []
    placed = 0
    for index in itertools.count():
        if placed >= size.pods:
            break
        replicas = min(_replicas(rng), size.pods - placed, MAX_REPLICAS)
        namespace = f"ns-{index // WORKLOADS_PER_NAMESPACE:04d}"
        name = f"svc-{index:05d}"
        on = [node_names[rng.randrange(size.nodes)] for _ in range(replicas)]
        made = b.deployment_pods(name, on, namespace=namespace, cpu="100m", memory="128Mi")
        if replicas >= 3:
            made.append(b.pdb(name, {"app": name}, 1, namespace=namespace))
        objects.extend(made)
        pods = tuple(o["metadata"]["name"] for o in made if o["kind"] == "Pod")
        objects += _service(namespace, name, list(zip(pods, on, strict=True)))
        workloads.append(SyntheticWorkload(namespace, name, pods))
        placed += replicas
    # Grouped by kind, as `kubectl get` with several kinds lists them and as the controller's
    # caches list them kind by kind (interleaved, building the snapshot took longer).
    objects.sort(key=lambda item: KINDS.index(item["kind"]))
    return SyntheticCluster(b.k8s_list(objects), tuple(workloads), _pod_rates(rng, workloads, size))


KINDS = (
    "Node",
    "Pod",
    "ReplicaSet",
    "Deployment",
    "PodDisruptionBudget",
    "Service",
    "EndpointSlice",
)


def _node(index: int, count: int) -> dict[str, Any]:
    racks_per_zone = max(1, math.ceil(count / ZONES / NODES_PER_RACK))
    zone, rest = index % ZONES, index // ZONES
    return b.node(
        f"node-{index:05d}",
        zone=f"zone-{zone}",
        rack=f"rack-{rest % racks_per_zone:03d}",
        cpu="32",
        memory="128Gi",
    )


def _service(namespace: str, name: str, pods: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """A Service for the workload and its EndpointSlices, 100 endpoints each as the controller
    cuts them; no random draws, so the rest of the cluster is as it was without them."""
    endpoints = [
        (pod, node, f"zone-{int(node.removeprefix('node-')) % ZONES}") for pod, node in pods
    ]
    return [
        b.service(name, {"app": name}, namespace=namespace),
        *(
            b.endpoint_slice(
                f"{name}-{start // 100}", name, endpoints[start : start + 100], namespace
            )
            for start in range(0, len(endpoints), 100)
        ),
    ]


def _replicas(rng: random.Random) -> int:
    """Heavy-tailed (Pareto, shape 1.1): most Deployments have a few replicas, a few hundreds."""
    return max(1, int(1.5 * rng.paretovariate(1.1)))


def _pod_rates(
    rng: random.Random, workloads: list[SyntheticWorkload], size: Size
) -> dict[tuple[tuple[str, str], tuple[str, str]], float]:
    popularity = [rng.paretovariate(1.5) for _ in workloads]
    calls = int(CALLS_PER_WORKLOAD * len(workloads))
    callers = rng.choices(range(len(workloads)), k=calls)
    callees = rng.choices(range(len(workloads)), weights=popularity, k=calls)
    edges = sorted({(a, z) for a, z in zip(callers, callees, strict=True) if a != z})
    weights = [len(workloads[a].pods) * len(workloads[z].pods) for a, z in edges]
    rates: dict[tuple[tuple[str, str], tuple[str, str]], float] = {}
    while len(rates) < size.pairs:
        before = len(rates)
        for a, z in rng.choices(edges, weights=weights, k=size.pairs - len(rates)):
            source, target = workloads[a], workloads[z]
            pair = (
                (source.namespace, rng.choice(source.pods)),
                (
                    target.namespace,
                    rng.choice(target.pods),
                ),
            )
            if (pair[1], pair[0]) not in rates:
                rates.setdefault(pair, rng.lognormvariate(0.0, 1.5))
        if len(rates) == before:
            break  # every pair the call graph allows is taken
    return rates


def _vector(series: Iterable[tuple[dict[str, str], float]]) -> dict[str, Any]:
    """A vector answer as Prometheus encodes it: values as text, one timestamp for all."""
    result = [
        {"metric": metric, "value": [1_800_000_000.0, repr(value)]} for metric, value in series
    ]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}
