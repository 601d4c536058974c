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
    model_config = ConfigDict(extra="forbid", frozen=True)


TopologyPreset = Literal["kubernetes", "aws", "gke"]

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
    levels: tuple[TopologyLevel, ...] = ()
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
    label_style: Literal["split", "combined"] = "split"
    """`split`: source_namespace/source_pod/... (labelsContext); `combined`: source="ns/pod"."""
    metric: str = "hubble_flows_processed_total"
    matchers: str = ""
    """Extra label matchers, for example `verdict="FORWARDED"`."""
    unit: str = "flows/s"


class IstioSource(_TrafficCommon):
    """Istio TCP and HTTP byte metrics, which name workloads, not pods."""

    source: Literal["istio"]
    reporter: Literal["source", "destination"] = "source"
    unit: str = "bytes/s"


class CustomSource(_TrafficCommon):
    """Any PromQL that returns one rate per communicating pair."""

    source: Literal["custom"]
    query: str
    freshness_query: str
    """PromQL returning one value: the age in seconds of the newest raw sample behind `query`."""
    granularity: Literal["pod", "workload"] = "pod"
    source_namespace_label: str = "source_namespace"
    source_label: str = "source_pod"
    destination_namespace_label: str = "destination_namespace"
    destination_label: str = "destination_pod"
    unit: str = "bytes/s"

    _query_is_promql = field_validator("query", "freshness_query")(_check_promql)


TrafficSource = Annotated[HubbleSource | IstioSource | CustomSource, Field(discriminator="source")]


class StrategyConfig(_Strict):
    """One strategy by its registered name; its args are validated by the strategy's own model."""

    name: str
    enabled: bool = True
    args: StrategyArgs

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
    """...and at least this share of the cluster's current weighted cost."""


class LabelSelectorRequirement(_Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()


class LabelSelector(_Strict):
    """A Kubernetes label selector, in the API's own camelCase."""

    matchLabels: dict[str, str] = Field(default_factory=dict)  # noqa: N815 - Kubernetes spelling
    matchExpressions: tuple[LabelSelectorRequirement, ...] = ()  # noqa: N815


class NamespaceScope(_Strict):
    include: tuple[str, ...] = ()
    """Empty means every namespace not excluded."""
    exclude: tuple[str, ...] = ("kube-system",)


class Scope(_Strict):
    namespaces: NamespaceScope = NamespaceScope()
    pod_selector: LabelSelector | None = None
    opt_out_annotation: str = "topology-rebalancer.io/exclude"
    """Set to "true" on a pod or its workload to keep the rebalancer away from it."""


class SpreadFloor(_Strict):
    """A workload keeps at least `domains` domains at `level` (or all it has, if fewer)."""

    level: str = "zone"
    domains: Annotated[int, Field(ge=1)] = 1


class Protections(_Strict):
    """Pods that are never moved unless the policy says so; HA beats locality."""

    priority_threshold: int | None = None
    """Pods with this priority or higher are protected."""
    evict_system_critical: bool = False
    evict_bare_pods: bool = False
    evict_local_storage: bool = False
    evict_pvc: bool = False
    evict_single_replica: bool = False
    honor_soft_spread: bool = True
    """Treat ScheduleAnyway topology spread constraints as hard when judging a move."""
    min_spread: SpreadFloor = SpreadFloor()


NonNegativeLimit = Annotated[int | None, Field(ge=0)]


class Limits(_Strict):
    """Eviction budgets on top of PDBs; None means no limit at that scope."""

    per_cycle: NonNegativeLimit = 10
    per_node: NonNegativeLimit = 2
    per_namespace: NonNegativeLimit = 5
    per_workload: NonNegativeLimit = 1
    per_zone: NonNegativeLimit = 3


class Cooldown(_Strict):
    per_workload_seconds: Annotated[float, Field(ge=0)] = 900
    """A workload that was moved is left alone this long, so it cannot be bounced back."""


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


class Policy(_Strict):
    mode: Literal["dry-run", "evict", "migrate"] = "dry-run"
    interval_seconds: Annotated[float, Field(gt=0)] = 300
    topology: TopologyPolicy = TopologyPolicy()
    traffic: TrafficSource = HubbleSource(source="hubble")
    strategies: tuple[StrategyConfig, ...] = Field(default_factory=_default_strategies)
    thresholds: Thresholds = Thresholds()
    scope: Scope = Scope()
    protections: Protections = Protections()
    limits: Limits = Limits()
    cooldown: Cooldown = Cooldown()
    persistence: Persistence = Persistence()
    migrate: Migrate = Migrate()
    price: Price = Price()

    @model_validator(mode="after")
    def _levels_named_exist(self) -> Policy:
        names = [level.name for level in self.topology.resolved_levels]
        referenced = [("protections.min_spread.level", self.protections.min_spread.level)]
        referenced += [
            (f"strategies.{index}.args.level", config.args.level)
            for index, config in enumerate(self.strategies)
        ]
        for where, level in referenced:
            if level not in names:
                raise ValueError(f"{where}: unknown level {level!r} (levels: {', '.join(names)})")
        seen = [config.name for config in self.strategies]
        if len(set(seen)) != len(seen):
            raise ValueError(f"strategies: each strategy may appear once, got {seen}")
        return self


def parse_policy(text: str, origin: str) -> Policy:
    """Parse YAML text into a Policy, or raise InputError naming `origin` and the field."""
    return parse_yaml_model(Policy, text, origin, "policy")


def load_policy(path: Path) -> Policy:
    return parse_policy(read_text(path, "policy"), str(path))
