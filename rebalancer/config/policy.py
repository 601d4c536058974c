"""The policy: everything a platform team can tune, as one validated, typed document.

The same model is read from a file (`--policy`) and from the controller's ConfigMap, so a policy
that loads here loads there. Every default is the safe one: dry-run, small budgets, HA and fragile
pods protected. Unknown keys are refused rather than ignored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    model_validator,
)

from rebalancer.config.modes import Evict, Migrate
from rebalancer.config.pacing import Cooldown, Limits, Persistence
from rebalancer.config.proposals import StrategyConfig, Target, Thresholds
from rebalancer.config.rates import in_source_unit
from rebalancer.config.routing_and_price import CrossZonePrice, Routing
from rebalancer.config.scope import Protections, Scope
from rebalancer.config.topology_levels import TopologyPolicy
from rebalancer.config.training_jobs import Jobs
from rebalancer.errors import InputError
from rebalancer.files import parse_yaml_model, read_text
from rebalancer.strategies.registry import STRATEGIES
from rebalancer.strict import Strict
from rebalancer.traffic.settings import HubbleSource, TrafficSource

Mode = Literal["dry-run", "evict", "migrate"]
API_VERSION = "topology-rebalancer.io/v1alpha1"
KIND = "RebalancerPolicy"
"""A policy may say what it is, so that a later version can tell old documents from new; one
without them is read as this version."""


def _default_strategies() -> tuple[StrategyConfig, ...]:
    return (StrategyConfig.model_validate({"name": "split-peers", "args": {"level": "zone"}}),)


class Policy(Strict):
    mode: Mode = "dry-run"
    """`dry-run` plans and evicts nothing; `evict` evicts through the Eviction API; `migrate`
    also steers each replacement to the planned domain (needs the webhook)."""
    interval_seconds: Annotated[float, Field(ge=1)] = 300
    """Time between cycles; a new value takes effect after the next cycle. At least a second:
    a typo (1e-6) would run the cycles back to back, each reading the whole cluster."""
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
    target: Target = Target()
    """The placement the moves head for, found by a search each cycle."""
    evict: Evict = Evict()
    """How evict mode judges a move, as it steers nothing."""
    migrate: Migrate = Migrate()
    """How migrate mode steers replacements."""
    jobs: Jobs = Jobs()
    """Non-elastic training jobs: moved whole, and only when a restart pays."""
    price: CrossZonePrice = CrossZonePrice()
    """The price of cross-zone traffic, for the cost figures."""
    routing: Routing = Routing()
    """Service routing that would keep traffic in its zone without a move."""

    @model_validator(mode="before")
    @classmethod
    def _this_version(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for key, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
            given = data.get(key, expected)
            if given != expected:
                raise ValueError(f"{key}: expected {expected!r}, got {given!r}")
        return {key: value for key, value in data.items() if key not in ("apiVersion", "kind")}

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema of a policy document, apiVersion and kind included, for editors and
        GitOps checks."""
        schema = cls.model_json_schema()
        schema["properties"] = {
            "apiVersion": {"const": API_VERSION},
            "kind": {"const": KIND},
            **schema["properties"],
        }
        _strategies_by_name(schema)
        return schema

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
        if self.target.level is not None and self.target.level not in names:
            known = ", ".join(names)
            raise ValueError(f"target.level: unknown level {self.target.level!r} (levels: {known})")
        seen = [config.name for config in self.strategies]
        if len(set(seen)) != len(seen):
            raise ValueError(f"strategies: each strategy may appear once, got {seen}")
        return self

    @model_validator(mode="after")
    def _thresholds_in_source_unit(self) -> Policy:
        """A threshold's unit must be one the source's rates convert to."""
        for name in ("min_pair_rate", "min_gain"):
            value = getattr(self.thresholds, name)
            if value is not None:
                try:
                    in_source_unit(value, self.traffic.unit, self.traffic.bytes_per_unit)
                except ValueError as error:
                    raise ValueError(f"thresholds.{name}: {error}") from None
        return self


POLICY_LIMIT_BYTES = 1024 * 1024
"""What a ConfigMap, the policy's home in a cluster, can hold; a bigger file is no policy."""


def parse_policy(text: str, origin: str) -> Policy:
    """Parse YAML text into a Policy, or raise InputError naming `origin` and the field."""
    _check_size(len(text.encode("utf-8", errors="surrogatepass")), origin)
    return parse_yaml_model(Policy, text, origin, "policy")


def load_policy(path: Path) -> Policy:
    return parse_policy(read_text(path, "policy", POLICY_LIMIT_BYTES), str(path))


def _check_size(size: int, origin: str) -> None:
    if size > POLICY_LIMIT_BYTES:
        raise InputError(
            f"{origin}: {size} bytes; a policy is at most {POLICY_LIMIT_BYTES}"
            " (a ConfigMap's limit)"
        )


def _strategies_by_name(schema: dict[str, Any]) -> None:
    """A strategy's args are checked by its own model, chosen by its name, which the generated
    schema cannot see: it would hold every strategy to the args base alone and refuse their
    own (`min_share`). Each registered strategy becomes one alternative, its name fixed and its
    args its own model's; `args` may be left out, as the policy fills in the defaults."""
    defs = schema["$defs"]
    config = defs["StrategyConfig"]
    choices = []
    for name, spec in sorted(STRATEGIES.items()):
        args = spec.args_type.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(args.pop("$defs", {}))
        defs[spec.args_type.__name__] = args
        properties = {
            **config["properties"],
            "name": {**config["properties"]["name"], "const": name},
            "args": {"$ref": f"#/$defs/{spec.args_type.__name__}"},
        }
        choices.append(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["name"],
                "properties": properties,
            }
        )
    defs["StrategyConfig"] = {"description": config["description"], "oneOf": choices}
    defs.pop("StrategyArgs", None)
