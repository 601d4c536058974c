"""The policy: everything a platform team can tune, as one validated, typed document.

The same model is read from a file (`--policy`) and, later, from the controller's ConfigMap, so a
policy that loads here loads there. Every default is the safe one: dry-run, small budgets, HA and
fragile pods protected. Unknown keys are refused rather than ignored, because a misspelt limit that
is silently dropped is a limit that does not hold.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal

import promql_parser
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rebalancer.files import parse_yaml_model, read_text
from rebalancer.topology import TopologyLevel
from strategies.registry import STRATEGIES, StrategyArgs

_PROMQL_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


TopologyPreset = Literal["kubernetes", "aws", "gke"]
Mode = Literal["dry-run", "evict", "migrate"]

PRESET_LEVELS: dict[str, tuple[TopologyLevel, ...]] = {
    "kubernetes": (
        TopologyLevel(name="region", label="topology.kubernetes.io/region", weight=100),
        TopologyLevel(name="zone", label="topology.kubernetes.io/zone", weight=10),
        TopologyLevel(name="host", label="kubernetes.io/hostname", weight=1),
    ),
    "aws": (
        TopologyLevel(name="zone", label="topology.kubernetes.io/zone", weight=10),
        TopologyLevel(name="layer-1", label="topology.k8s.aws/network-node-layer-1", weight=4),
        TopologyLevel(name="layer-2", label="topology.k8s.aws/network-node-layer-2", weight=2),
        TopologyLevel(name="layer-3", label="topology.k8s.aws/network-node-layer-3", weight=1),
    ),
    "gke": (
        TopologyLevel(name="zone", label="topology.kubernetes.io/zone", weight=10),
        TopologyLevel(name="block", label="cloud.google.com/gce-topology-block", weight=4),
        TopologyLevel(name="subblock", label="cloud.google.com/gce-topology-subblock", weight=2),
        TopologyLevel(name="host", label="cloud.google.com/gce-topology-host", weight=1),
    ),
}


class TopologyPolicy(_Strict):
    """Either a preset or explicit levels, widest first (for example zone, rack, host)."""

    preset: TopologyPreset | None = None
    """Named label sets: `kubernetes` (region, zone, host), `aws` (zone and the three
    network-node layers), `gke` (zone, block, subblock, host). Without preset or levels,
    `kubernetes`."""
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


def _check_promql(query: str) -> str:
    try:
        promql_parser.parse(query)
    except ValueError as error:
        raise ValueError(f"invalid PromQL: {error}") from None
    return query


class _TrafficCommon(_Strict):
    window: str = "5m"
    """PromQL range of the rate; longer windows smooth bursts and so damp eviction loops."""
    max_age_seconds: Annotated[float, Field(gt=0)] = 180
    """Newest sample older than this means the data is stale: no moves this cycle."""
    timeout_seconds: Annotated[float, Field(gt=0)] = 15
    """Per Prometheus query; a query that takes longer fails the cycle, which then moves nothing."""
    bytes_per_unit: Annotated[float | None, Field(gt=0)] = None
    """Assumed bytes per unit when the unit is not bytes, so a monthly cost can be estimated."""

    @field_validator("window")
    @classmethod
    def _window_is_a_duration(cls, value: str) -> str:
        if not _PROMQL_DURATION.match(value):
            raise ValueError(f"not a PromQL duration such as '5m': {value!r}")
        return value


class HubbleSource(_TrafficCommon):
    """Cilium Hubble flow counts (`hubble_flows_processed_total`), which have no byte counts."""

    source: Literal["hubble"]
    """Selects this kind of source."""
    label_style: Literal["split", "combined"] = "split"
    """`split`: source_namespace/source_pod/... (labelsContext); `combined`: source="ns/pod"."""
    metric: str = "hubble_flows_processed_total"
    """The counter to rate; a recording rule that keeps the same labels can stand in for it."""
    matchers: str = ""
    """Extra label matchers, for example `verdict="FORWARDED"`."""
    unit: str = "flows/s"
    """Shown in reports and metrics; rates are compared only with each other."""


class IstioSource(_TrafficCommon):
    """Istio TCP and HTTP byte metrics, which name workloads, not pods."""

    source: Literal["istio"]
    """Selects this kind of source."""
    reporter: Literal["source", "destination"] = "source"
    """Which side's proxy reports the bytes; pick one so each byte is counted once."""
    unit: str = "bytes/s"
    """Shown in reports and metrics; bytes also give the monthly cross-zone cost."""


class CustomSource(_TrafficCommon):
    """Any PromQL that returns one rate per communicating pair."""

    source: Literal["custom"]
    """Selects this kind of source."""
    query: str
    """PromQL returning one rate per communicating pair, with the labels named below."""
    freshness_query: str
    """PromQL returning one value: the age in seconds of the newest raw sample behind `query`."""
    granularity: Literal["pod", "workload"] = "pod"
    """Whether the labels below name pods or workloads; a workload pair's rate is split evenly
    over its pod pairs."""
    source_namespace_label: str = "source_namespace"
    """Label holding the sending namespace."""
    source_label: str = "source_pod"
    """Label holding the sending pod (or workload)."""
    destination_namespace_label: str = "destination_namespace"
    """Label holding the receiving namespace."""
    destination_label: str = "destination_pod"
    """Label holding the receiving pod (or workload)."""
    unit: str = "bytes/s"
    """The unit of the query's values, for reports; `bytes/s` also gives the monthly cost."""

    _query_is_promql = field_validator("query", "freshness_query")(_check_promql)


TrafficSource = Annotated[HubbleSource | IstioSource | CustomSource, Field(discriminator="source")]


class StrategyConfig(_Strict):
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


def _default_strategies() -> tuple[StrategyConfig, ...]:
    return (StrategyConfig.model_validate({"name": "split-peers", "args": {"level": "zone"}}),)


class Thresholds(_Strict):
    """What is too little to act on: low-traffic workloads are left alone by these."""

    min_pair_rate: Annotated[float, Field(ge=0)] = 0.1
    """Pairs below this rate (in the source's unit) are dropped from the graph."""
    min_gain: Annotated[float, Field(ge=0)] = 1.0
    """A move must save at least this much weighted traffic (rate x level weight)."""
    min_gain_ratio: Annotated[float, Field(ge=0, le=1)] = 0.01
    """...and at least this share of the moving pod's own current weighted cost (its traffic x
    the weight of each level it crosses), so tiny improvements to a pod are left alone."""


class LabelSelectorRequirement(_Strict):
    key: str
    """The pod label."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the label's value is matched against `values`."""
    values: tuple[str, ...] = ()
    """For In and NotIn; empty for Exists and DoesNotExist."""


class LabelSelector(_Strict):
    """A Kubernetes label selector, in the API's own camelCase."""

    matchLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815 - Kubernetes spelling
    """Labels a pod must carry, each with this value."""
    matchExpressions: tuple[LabelSelectorRequirement, ...] = ()  # noqa: N815
    """Further requirements, all of which must hold."""


class NamespaceScope(_Strict):
    include: tuple[str, ...] = ()
    """Empty means every namespace not excluded."""
    exclude: tuple[str, ...] = ("kube-system",)
    """Never touched, even when included."""


class Scope(_Strict):
    namespaces: NamespaceScope = NamespaceScope()
    """Which namespaces the rebalancer may move pods in."""
    pod_selector: LabelSelector | None = None
    """When set, only pods matching it may be moved; traffic to other pods still counts."""
    opt_out_annotation: str = "topology-rebalancer.io/exclude"
    """Set to "true" on a pod or its workload to keep the rebalancer away from it."""


class SpreadFloor(_Strict):
    """A workload keeps at least `domains` domains at `level` (or all it has, if fewer)."""

    level: str = "zone"
    """The level, by name."""
    domains: Annotated[int, Field(ge=1)] = 1
    """Least number of domains a workload keeps at `level`."""


class Protections(_Strict):
    """Pods that are never moved unless the policy says so; HA beats locality."""

    priority_threshold: int | None = None
    """Pods with this priority or higher are protected."""
    evict_system_critical: bool = False
    """Move pods of priority class system-cluster-critical or system-node-critical."""
    evict_bare_pods: bool = False
    """Move pods with no controller, which would not come back."""
    evict_local_storage: bool = False
    """Move pods with emptyDir or hostPath volumes, whose data is lost on eviction."""
    evict_pvc: bool = False
    """Move pods with PersistentVolumeClaims, whose volumes may be bound to a zone."""
    evict_single_replica: bool = False
    """Move workloads of one replica, which are down while the replacement starts."""
    honor_soft_spread: bool = True
    """Treat ScheduleAnyway topology spread constraints as hard when judging a move."""
    min_spread: SpreadFloor = SpreadFloor()
    """No move may leave a workload in fewer domains than this."""


NonNegativeLimit = Annotated[int | None, Field(ge=0)]


class Limits(_Strict):
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


class Cooldown(_Strict):
    """Loop protection: a move is not undone while it is fresh.

    Pacing is the job of persistence and the limits; the cooldown only stops bounces, so a
    workload that needs several moves the same way (a gang packed into one rack) is not slowed.
    """

    per_workload_seconds: Annotated[float, Field(ge=0)] = 900
    """For this long after a workload was moved, none of its pods may leave the domain it was
    moved into, nor enter the one it was moved out of. After replacements miss their target it
    also waits this long since its last move, doubling with each miss in a row."""


class Persistence(_Strict):
    cycles: Annotated[int, Field(ge=1)] = 3
    """A move must have been proposed this many consecutive cycles before it is made."""


class Migrate(_Strict):
    """How migrate mode steers replacements (through placement hints and the webhook)."""

    hint_ttl_seconds: Annotated[float, Field(gt=0)] = 300
    """A hint not used by then is dropped, so it never steers an unrelated later pod."""
    required: bool = False
    """Required node affinity lands surely but can leave a pod Pending if the room is taken."""
    weight: Annotated[int, Field(ge=1, le=100)] = 100
    """Weight of the preferred node affinity term."""


class Price(_Strict):
    per_gb_cross_zone: Annotated[float, Field(ge=0)] = 0.02
    """Billed per GB that crosses a zone, both sides counted (AWS: $0.01 each way)."""
    currency: str = "USD"
    """Label of the cost metrics; the price above is in it."""


class Policy(_Strict):
    mode: Mode = "dry-run"
    """`dry-run` plans and evicts nothing; `evict` evicts through the Eviction API; `migrate`
    also steers each replacement to the planned domain (needs the webhook)."""
    interval_seconds: Annotated[float, Field(gt=0)] = 300
    """Time between cycles; a new value takes effect after the next cycle."""
    topology: TopologyPolicy = TopologyPolicy()
    """The network levels, from node labels."""
    traffic: TrafficSource = HubbleSource(source="hubble")
    """Where pod-to-pod traffic is read: `hubble`, `istio` or `custom` PromQL."""
    strategies: tuple[StrategyConfig, ...] = Field(default_factory=_default_strategies)
    """The strategies that propose moves, each at most once."""
    thresholds: Thresholds = Thresholds()
    """How much traffic and gain is worth acting on."""
    scope: Scope = Scope()
    """Which pods may be moved."""
    protections: Protections = Protections()
    """Pods never moved unless allowed here."""
    limits: Limits = Limits()
    """Eviction budgets, on top of PDBs."""
    cooldown: Cooldown = Cooldown()
    """How long a move may not be undone (loop protection)."""
    persistence: Persistence = Persistence()
    """How long a move must keep being proposed before it is made."""
    migrate: Migrate = Migrate()
    """How migrate mode steers replacements."""
    price: Price = Price()
    """The price of cross-zone traffic, for the cost figures."""

    @model_validator(mode="after")
    def _levels_named_exist(self) -> Policy:
        names = [level.name for level in self.topology.resolved_levels]
        floor = self.protections.min_spread.level
        if floor not in names:
            known = ", ".join(names)
            raise ValueError(
                f"protections.min_spread.level: unknown level {floor!r} (levels: {known})"
            )
        for index, config in enumerate(self.strategies):
            problems = config.args.level_problems(names)
            if problems:
                raise ValueError(f"strategies.{index}.args.{problems[0]}")
        seen = [config.name for config in self.strategies]
        if len(set(seen)) != len(seen):
            raise ValueError(f"strategies: each strategy may appear once, got {seen}")
        return self


def parse_policy(text: str, origin: str) -> Policy:
    """Parse YAML text into a Policy, or raise InputError naming `origin` and the field."""
    return parse_yaml_model(Policy, text, origin, "policy")


def load_policy(path: Path) -> Policy:
    return parse_policy(read_text(path, "policy"), str(path))
