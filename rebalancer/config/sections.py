"""The policy's sections, one typed model per concern, each field with its unit and reason."""

from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import pairwise
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rebalancer.cluster.topology import TopologyLevel
from rebalancer.config.rates import parse_rate
from rebalancer.strategies.registry import STRATEGIES, StrategyArgs
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


class StrategyConfig(Strict):
    """One strategy by its registered name; its args are validated by the strategy's own model."""

    name: str
    """A registered strategy: `split-peers` or `gang-consolidation`."""
    enabled: bool = True
    """A disabled strategy is kept in the policy but proposes nothing."""
    args: StrategyArgs
    """The strategy's own arguments (below); omitted ones take their defaults."""

    @model_validator(mode="before")
    @classmethod
    def _args_default_to_the_strategy_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("args") is None:
            return {**data, "args": {}}
        return data

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name not in STRATEGIES:
            raise ValueError(f"unknown strategy {name!r} (known: {', '.join(sorted(STRATEGIES))})")
        return name

    @field_validator("args", mode="before")
    @classmethod
    def _typed_args(cls, args: Any, info: ValidationInfo) -> Any:
        """Validate args with the named strategy's own model, so errors point into args."""
        name = info.data.get("name")
        if name is None:
            return StrategyArgs.model_construct()  # the name was refused; that error says why
        if isinstance(args, dict):
            return STRATEGIES[name].args_type.model_validate(args)
        return args


class Thresholds(Strict):
    """What is too little to act on: low-traffic workloads are left alone by these. Each rate
    is a number in the traffic source's unit, or a text with its unit: a byte rate ("10KiB/s",
    converted through `traffic.bytes_per_unit` for a source that counts something else) or the
    source's own ("0.5 flows/s")."""

    min_pair_rate: float | str | None = None
    """Pairs below this rate are dropped from the graph. Unset: 0.1 in the source's unit, or
    1KiB/s when it counts bytes (a tenth of a byte a second would filter nothing)."""
    min_gain: float | str | None = None
    """A move must save at least this much weighted traffic (rate x level weight). Unset: 1 in
    the source's unit, or 10KiB/s when it counts bytes."""
    min_gain_ratio: Annotated[float, Field(ge=0, le=1)] = 0.01
    """...and at least this share of the moving pod's own current weighted cost (its traffic x
    the weight of each level it crosses), so tiny improvements to a pod are left alone."""

    @field_validator("min_pair_rate", "min_gain", mode="before")
    @classmethod
    def _a_rate(cls, value: Any) -> Any:
        """Read as one type, so a bad value gets one message rather than one per member of the
        union (and true is no number here)."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError(f"expected a number or a text such as '10KiB/s', got {value!r}")
        amount = parse_rate(value).amount
        if amount < 0 or not math.isfinite(amount):
            raise ValueError(f"expected a finite rate of at least 0, got {value!r}")
        return value


class LabelSelectorRequirement(Strict):
    key: str
    """The pod label."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the label's value is matched against `values`."""
    values: tuple[str, ...] = ()
    """For In and NotIn; empty for Exists and DoesNotExist."""


class LabelSelector(Strict):
    """A Kubernetes label selector, in the API's own camelCase."""

    matchLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815 - Kubernetes spelling
    """Labels a pod must carry, each with this value."""
    matchExpressions: tuple[LabelSelectorRequirement, ...] = ()  # noqa: N815
    """Further requirements, all of which must hold."""


class NamespaceScope(Strict):
    include: tuple[str, ...] = ()
    """Empty means every namespace not excluded."""
    exclude: tuple[str, ...] = ("kube-system",)
    """Never touched, even when included."""

    def refusal(self, namespace: str) -> str | None:
        """Why nothing in this namespace may be touched; None when it may."""
        if self.include and namespace not in self.include:
            return "namespace not included"
        return "namespace excluded" if namespace in self.exclude else None


class Scope(Strict):
    namespaces: NamespaceScope = NamespaceScope()
    """Which namespaces the rebalancer may move pods in."""
    pod_selector: LabelSelector | None = None
    """When set, only pods matching it may be moved; traffic to other pods still counts."""
    opt_out_annotation: str = "topology-rebalancer.io/exclude"
    """Set to "true" on a pod or its workload (or a Service) to keep the rebalancer away."""

    def opted_out(self, *annotations: Mapping[str, str]) -> bool:
        """Whether any of these objects' annotations asks the rebalancer to stay away."""
        return any(a.get(self.opt_out_annotation, "").lower() == "true" for a in annotations)


class SpreadFloor(Strict):
    """A workload keeps at least `domains` domains at `level` (or all it has, if fewer)."""

    level: str = "zone"
    """The level, by name."""
    domains: Annotated[int, Field(ge=1)] = 2
    """Least number of domains a workload keeps at `level`. Two by default: a Deployment with
    replicas in two zones keeps two zones though no spread constraint asks for it, since its
    owners rarely write one and a zone outage would take it down whole. 1 lets locality win."""
    kinds: tuple[str, ...] = ("Deployment", "StatefulSet", "ReplicaSet", "ReplicationController")
    """The workload kinds the floor holds for: services, which a zone outage takes down. Jobs
    and training gangs are left out, as packing them is the point."""


class Protections(Strict):
    """Pods that are never moved unless the policy says so; HA beats locality."""

    priority_threshold: int | None = None
    """Pods with this priority or higher are protected."""
    evict_system_critical: bool = False
    """Move pods of priority class system-cluster-critical or system-node-critical."""
    evict_bare_pods: bool = False
    """Move pods with no controller, which would not come back."""
    evict_local_storage: bool = False
    """Move pods with local volumes (hostPath, or emptyDir not backed by memory), whose data is
    lost on eviction. Counted as the cluster autoscaler counts them: volumes a pod's
    `cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes` annotation names, or any of
    a pod annotated `cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`, do not count,
    and a pod annotated `"false"` is never moved."""
    disposable_volumes: tuple[str, ...] = (
        "istio-data",
        "workload-socket",
        "credential-socket",
        "workload-certs",
        "linkerd-proxy-init-xtables-lock",
    )
    """emptyDir volumes that hold only what a sidecar rebuilds when it starts, which do not make
    a pod's storage local: those Istio's and Linkerd's injectors add. Counted, they would
    protect every pod of a service mesh."""
    evict_pvc: bool = False
    """Move pods with PersistentVolumeClaims (or generic ephemeral volumes). A pod's claims hold
    it in the zone it runs in, where a zonal volume is bound: it moves between racks and hosts
    there, never to another zone."""
    evict_single_replica: bool = False
    """Move workloads of one replica, which are down while the replacement starts."""
    honor_soft_spread: bool = True
    """Treat ScheduleAnyway topology spread constraints as hard when judging a move."""
    min_spread: SpreadFloor = SpreadFloor()
    """No move may leave a workload in fewer domains than this."""


NonNegativeLimit = Annotated[int | None, Field(ge=0)]


class Limits(Strict):
    """Eviction budgets on top of PDBs; None means no limit at that scope."""

    per_cycle: NonNegativeLimit = 10
    """Evictions per cycle."""
    per_node: NonNegativeLimit = 2
    """Evictions per cycle from one node."""
    per_namespace: NonNegativeLimit = 5
    """Evictions per cycle in one namespace."""
    per_workload: NonNegativeLimit = 1
    """Evictions per cycle of one workload."""
    per_zone: NonNegativeLimit = 3
    """Evictions per cycle from one zone."""


class Cooldown(Strict):
    """Loop protection: a move is not undone while it is fresh.

    Pacing is the job of persistence and the limits; the cooldown only stops bounces, so a
    workload that needs several moves the same way (a gang packed into one rack) is not slowed.
    """

    per_workload_seconds: Annotated[float, Field(ge=0)] = 900
    """For this long after a workload was moved, none of its pods may leave the domain it was
    moved into, nor enter the one it was moved out of, and it moves no more pods than it has (no
    pod is moved twice). After replacements miss their target it also waits this long since
    its last move, doubling with each miss in a row."""
    memory_seconds: Annotated[float, Field(ge=0)] = 86400
    """How long a move is remembered. After its cooldown and until then, a move that would undo
    it waits `persistence.undo_cycles` rather than `persistence.cycles`: traffic that
    alternates pulls a workload back for less than a period at a time, and is not followed.
    It must also save twice what the move it undoes saved.
    A day, so a workload moved once stays put while its traffic keeps swinging; the state
    holds at most one day of moves."""

    @model_validator(mode="after")
    def _memory_covers_cooldown(self) -> Cooldown:
        if self.memory_seconds < self.per_workload_seconds:
            raise ValueError("memory_seconds must be at least per_workload_seconds")
        return self


class Jobs(Strict):
    """Training jobs (NCCL, MPI, parameter servers) are not elastic: a pod lost restarts the
    whole job, so such a job is moved as one. Its pods are those of a Job or a Kubeflow training
    job (PyTorchJob, MPIJob, TFJob, ...), grouped by the first of `group_labels` they carry, else
    by their owner; it counts as non-elastic when its pods talk to each other (independent
    shards do not), always for the Kubeflow kinds. Pods of any owner annotated
    `topology-rebalancer.io/job: <name>` are one non-elastic job; pods annotated
    `topology-rebalancer.io/elastic: "true"` never are. Gangs another scheduler owns are never
    moved at all. Jobs are moved in migrate mode only (previewed in its dry run), and never
    past their Jobs' backoffLimit: a restart fails every pod of them, or under restartPolicy
    OnFailure the evicted ones, and restarts the containers of the rest."""

    whole: bool = True
    """Move a non-elastic job's pods in one cycle or not at all, counting the disruption once
    against every limit (one per cycle, namespace, workload, zone and node it touches). False:
    its pods are moved one by one, as any other pod, each move restarting the job."""
    group_labels: tuple[str, ...] = ("training.kubeflow.org/job-name", "app.kubernetes.io/part-of")
    """Pod labels naming the job several owners make up (BytePS workers, servers and scheduler
    as three Jobs), first match wins; pods of one namespace with the same value are one job."""
    restart_seconds: Annotated[float, Field(gt=0)] = 600
    """What a restart loses: the time back to the last checkpoint plus the restart itself."""
    remaining_seconds: Annotated[float, Field(gt=0)] = 14400
    """The job's remaining run, assumed when no pod of it carries the annotation
    `topology-rebalancer.io/expected-end` (an RFC 3339 time)."""
    min_interval_seconds: Annotated[float, Field(ge=0)] = 3600
    """A job the rebalancer restarted is not restarted again for this long."""

    def worth_share(self, remaining: float) -> float | None:
        """The least share of the job's weighted traffic a restart must save: the share of its
        remaining run the restart loses. None when the job ends before a restart would pay."""
        if remaining <= self.restart_seconds:
            return None
        return self.restart_seconds / remaining


class Target(Strict):
    """A target placement the moves of the coming cycles head for. Greedy moves, each where
    the pod's peers are at that moment, gather a group of services where its first pod went;
    the best place for the group may be another, beside pods that cannot move. Each cycle a
    local search, under the planner's own rules, places the pods the policy may move, resuming
    from the last cycle's target so that consecutive cycles head the same way; the pods it
    covers are moved only toward it, each when its move pays, the rest by the strategies. In
    migrate mode (and its dry run) only: an evicted pod's replacement goes where the scheduler
    puts it, rarely into one chosen host."""

    enabled: bool = True
    """False: the strategies alone propose moves, each pod's where its peers are now."""
    level: str | None = None
    """The level whose domains the target places pods in, by name. Unset: the finest level any
    enabled strategy places at (split-peers' `down_to`, else its `level`)."""


class Persistence(Strict):
    cycles: Annotated[int, Field(ge=1)] = 3
    """A move must have been proposed this many consecutive cycles before it is made."""
    undo_cycles: Annotated[int, Field(ge=1)] = 8
    """A move that would undo a remembered one (see `cooldown.memory_seconds`) must have been
    proposed this many consecutive cycles, and at least `cycles`. Traffic that alternates with
    a period of up to this many cycles never pulls that long one way, so the workload is not
    moved back and forth; a lasting change moves it back after this many cycles."""


class Surge(Strict):
    """Make-before-break for Deployments (`migrate.method: surge`): scale up by one with the new
    pod steered to the target, wait for it to be Ready there, give the old pod the lowest
    pod-deletion-cost, scale back. Ready replicas never fall below the desired count."""

    ready_timeout_seconds: Annotated[float, Field(gt=0)] = 300
    """How long the new pod has to be Ready in the target; then the surge is undone (scaled
    back, the old pod kept) and the workload backs off as after a missed landing."""
    single_replica: bool = True
    """Single-replica Deployments may be moved by surge, whatever `protections.evict_single_
    replica` says: the old pod serves until the new one is Ready, so there is no downtime."""
    zero_disruption_pdb: bool = True
    """Deployments whose PDB allows no disruption (minAvailable equal to the replicas, the
    usual guard of a single replica) may be moved by surge: nothing is evicted, and as many
    pods are Ready throughout as the PDB asks for. False: a surge needs a disruption allowed,
    for PDBs set to zero as a freeze."""
    autoscaled: bool = False
    """Deployments a HorizontalPodAutoscaler scales may be surged. Off: the autoscaler may undo
    the extra replica, or scale while the surge holds it, and the surge would then be undone."""


class Evict(Strict):
    """How evict mode, which steers nothing, judges a move before it is made."""

    predict_landing: bool = True
    """Evict a pod only where kube-scheduler's default profile would put its replacement in the
    target: more than half of the nodes it scores highest lie there (least allocated, the
    default zone and host spreading, the pod's own rules). Elsewhere the eviction is a
    disruption for nothing, or for worse. Turn it off where the scheduler scores otherwise (a
    profile of your own, MostAllocated, another scheduler): moves are then judged only by where
    replacements land, and misses back a workload off."""


class Migrate(Strict):
    """How migrate mode steers replacements (through placement hints and the webhook)."""

    method: Literal["evict", "surge"] = "evict"
    """`evict`: evict the pod, then steer its replacement to the target. `surge`: for
    Deployments, start the new pod at the target first and remove the old one once it is
    Ready there (see `surge`); StatefulSets and Jobs are still evicted. A dry run previews
    the method: the scale-up goes out as a server-side dry run."""
    surge: Surge = Surge()
    """How a surge waits, and which Deployments it may move (with `method: surge`)."""

    hint_ttl_seconds: Annotated[float, Field(gt=0)] = 300
    """A hint not used by then is dropped, so it never steers an unrelated later pod."""
    required: bool = False
    """Required node affinity lands surely but can leave a pod Pending if the room is taken."""
    weight: Annotated[int, Field(ge=1, le=100)] = 100
    """Weight of the preferred node affinity term."""
    predict_landing: bool = True
    """Move a pod only where kube-scheduler's default profile, the hint's preferred affinity
    among its scores, would put the replacement in the target: more than half of the nodes it
    scores highest lie there. The hint is one score among several (spreading, least
    allocated), and a target it loses is a miss: a disruption for nothing, then a backoff.
    Moot with `required`. Turn it off where the scheduler scores otherwise, as
    `evict.predict_landing`."""


class Routing(Strict):
    """Service routing weighed against moves: `spec.trafficDistribution: PreferSameZone` keeps a
    Service's calls in their zone without moving a pod, wherever a client's zone has a ready
    endpoint."""

    advise: bool = True
    """Weigh routing: say per Service what PreferSameZone would keep in its zone (the plan's
    routing section, Events on the Service, metrics), and plan around it as below. False:
    none of it."""
    plan_around: bool = False
    """Plan moves on the traffic as the recommended routing would send it, so no move is spent
    on what a routing change removes. Turn it on once the recommended routing is being set
    (by hand, or by `apply`): until it is, moves are planned for traffic that does not exist.
    A Service annotated `topology-rebalancer.io/routing: keep` may not have its routing
    changed: its traffic is planned for as it is routed today."""
    max_endpoint_load: Annotated[float, Field(ge=1)] = 2.0
    """Advise it only where no ready endpoint would get more than this many times an even share
    of the Service's calls: unlike Topology Aware Routing, the field has no safeguard for a zone
    with many clients and few endpoints."""
    apply: bool = False
    """Let the controller set the recommended trafficDistribution itself, in evict and migrate
    modes, on Services in scope annotated `topology-rebalancer.io/routing: apply`; never on
    others. Needs the right to patch Services, which the default install does not grant
    (deploy/components/routing, or the chart with this switch on)."""
    changes_per_cycle: Annotated[int, Field(ge=1)] = 5
    """Routing changes made in one cycle at most, heaviest saving first: each one shifts a
    Service's load between its endpoints, so a few at a time, like evictions."""
    event_every_seconds: Annotated[float, Field(ge=0)] = 3600
    """A Service's recommendation Event is repeated at most this often while it stands; a
    changed recommendation is said at once."""


class CrossZonePrice(Strict):
    per_gb_cross_zone: Annotated[float, Field(ge=0)] = 0.02
    """Billed per GB that crosses a zone, both sides counted (AWS: $0.01 each way)."""
    currency: str = "USD"
    """Label of the cost metrics; the price above is in it."""
