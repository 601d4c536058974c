"""The policy loads with safe defaults and refuses bad input with one line naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from rebalancer.config.policy import Policy, parse_policy
from rebalancer.config.resolved import thresholds_of
from rebalancer.errors import InputError
from rebalancer.strategies.gang_consolidation import GangConsolidationArgs


def test_defaults_are_safe() -> None:
    policy = Policy()
    assert policy.mode == "dry-run"
    assert [level.name for level in policy.topology.resolved_levels] == [
        "region",
        "zone",
        "rack",
        "host",
    ]
    assert policy.traffic.source == "hubble"
    assert [s.name for s in policy.strategies] == ["split-peers"]
    assert policy.protections.evict_bare_pods is False
    assert policy.protections.evict_single_replica is False
    assert policy.scope.namespaces.exclude == ("kube-system",)
    assert policy.limits.per_cycle == 10
    assert policy.persistence.cycles == 3
    assert policy.price.per_gb_cross_zone == 0.02


def test_empty_document_is_the_default_policy() -> None:
    assert parse_policy("", "p.yaml") == Policy()


@pytest.mark.parametrize(
    ("preset", "labels"),
    [
        (
            "aws",
            ["topology.kubernetes.io/zone"]
            + [f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3)],
        ),
        (
            "gke",
            ["topology.kubernetes.io/zone"]
            + [f"cloud.google.com/gce-topology-{n}" for n in ("block", "subblock", "host")],
        ),
    ],
)
def test_presets_expand_to_their_labels(preset: str, labels: list[str]) -> None:
    policy = parse_policy(f"topology: {{preset: {preset}}}", "p.yaml")
    assert [level.label for level in policy.topology.resolved_levels] == labels


def test_custom_rack_level_and_strategy_args() -> None:
    policy = parse_policy(
        """
topology:
  levels:
    - {name: zone, label: topology.kubernetes.io/zone, weight: 10}
    - {name: rack, label: network.example.com/tor, weight: 3}
strategies:
  - name: gang-consolidation
    args: {level: rack, group_by: community}
""",
        "p.yaml",
    )
    args = policy.strategies[0].args
    assert isinstance(args, GangConsolidationArgs)
    assert args.group_by == "community"
    assert args.min_group_size == 2


def test_custom_traffic_source() -> None:
    policy = parse_policy(
        """
traffic:
  source: custom
  query: sum by (src, dst) (rate(my_bytes_total[2m]))
  freshness_query: time() - max(timestamp(my_bytes_total))
  source_label: src
  destination_label: dst
""",
        "p.yaml",
    )
    assert policy.traffic.source == "custom"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "mode: evict-all",
            "p.yaml: mode: Input should be 'dry-run', 'evict' or 'migrate'",
            id="wrong-enum",
        ),
        pytest.param(
            "interval_seconds: soon",
            "p.yaml: interval_seconds: Input should be a valid number",
            id="wrong-type",
        ),
        pytest.param(
            "interval_seconds: 1e-6",
            "p.yaml: interval_seconds: Input should be greater than or equal to 1",
            id="interval-back-to-back",
        ),
        pytest.param(
            "limits: {per_cycle: -1}",
            "p.yaml: limits.per_cycle: Input should be greater than or equal to 0",
            id="negative-limit",
        ),
        pytest.param(
            "cooldown: {per_workload_seconds: 3600, memory_seconds: 600}",
            "p.yaml: cooldown: memory_seconds must be at least per_workload_seconds",
            id="memory-shorter-than-cooldown",
        ),
        pytest.param(
            "persistence: {undo_cycles: 0}",
            "p.yaml: persistence.undo_cycles: Input should be greater than or equal to 1",
            id="no-undo-persistence",
        ),
        pytest.param(
            "limitz: {}",
            "p.yaml: limitz: Extra inputs are not permitted",
            id="unknown-top-level-key",
        ),
        pytest.param(
            "limits: {per_pod: 1}",
            "p.yaml: limits.per_pod: Extra inputs are not permitted",
            id="unknown-nested-key",
        ),
        pytest.param(
            "strategies: [{name: teleport}]",
            "p.yaml: strategies.0.name: unknown strategy "
            "'teleport' (known: gang-consolidation, split-peers)",
            id="unknown-strategy",
        ),
        pytest.param(
            "strategies: [{name: split-peers, args: {min_share: 2}}]",
            "p.yaml: strategies.0.args.min_share: Input should be less than or equal to 1",
            id="bad-strategy-arg",
        ),
        pytest.param(
            "strategies: [{name: split-peers, args: {level: tor}}]",
            "p.yaml: strategies.0.args.level: unknown level 'tor'"
            " (levels: region, zone, rack, host)",
            id="unknown-level",
        ),
        pytest.param(
            "strategies: [{name: split-peers, args: {level: zone, down_to: tor}}]",
            "p.yaml: strategies.0.args.down_to: unknown level 'tor'"
            " (levels: region, zone, rack, host)",
            id="unknown-down-to",
        ),
        pytest.param(
            "strategies: [{name: split-peers, args: {level: zone, down_to: region}}]",
            "p.yaml: strategies.0.args.down_to: 'region' is wider than level 'zone'",
            id="down-to-wider",
        ),
        pytest.param(
            "traffic: {source: custom, query: 'sum by (a (rate(x[5m])', freshness_query: 'x'}",
            "p.yaml: traffic.query: invalid PromQL: unclosed left parenthesis",
            id="bad-promql",
        ),
        pytest.param(
            "traffic: {source: hubble, window: 5 minutes}",
            "p.yaml: traffic.window: not a PromQL duration such as '5m': '5 minutes'",
            id="bad-window",
        ),
        pytest.param(
            "traffic: {source: kafka}",
            "p.yaml: traffic: Input tag 'kafka' found using "
            "'source' does not match any of the expected tags",
            id="unknown-source",
        ),
        pytest.param(
            "topology: {preset: aws, levels: [{name: z, label: z, weight: 1}]}",
            "p.yaml: topology: give either 'preset' or 'levels', not both",
            id="preset-and-levels",
        ),
        pytest.param(
            "topology: {levels: [{name: zone, label: z, weight: 1}, "
            "{name: rack, label: r, weight: 5}]}",
            "p.yaml: topology: level weights must not grow from wide to narrow, got [1.0, 5.0]",
            id="weights-grow",
        ),
        pytest.param("mode: [", "p.yaml: line 1 not valid YAML", id="bad-yaml"),
        pytest.param("- a\n- b", "p.yaml: a policy is a mapping, got list", id="not-a-mapping"),
        pytest.param(
            "mode: dry-run\nlimits: {per_cycle: 1}\nmode: evict",
            "p.yaml: line 3: duplicate key 'mode'",
            id="duplicate-key",
        ),
        pytest.param(
            "limits: {per_cycle: 1, per_cycle: 2}",
            "p.yaml: line 1: duplicate key 'per_cycle'",
            id="duplicate-nested-key",
        ),
        pytest.param(
            "traffic: {source: hubble, timeout_seconds: .inf}",
            "p.yaml: traffic.timeout_seconds: Input should be a finite number",
            id="infinite-timeout",
        ),
        pytest.param(
            "thresholds: {min_gain: .nan}",
            "p.yaml: thresholds.min_gain: expected a finite rate of at least 0, got nan",
            id="nan-threshold",
        ),
        pytest.param(
            "thresholds: {min_pair_rate: -0.5}",
            "p.yaml: thresholds.min_pair_rate: expected a finite rate of at least 0, got -0.5",
            id="negative-threshold",
        ),
        pytest.param(
            "thresholds: {min_gain: true}",
            "p.yaml: thresholds.min_gain: expected a number or a text such as '10KiB/s', got True",
            id="boolean-threshold",
        ),
        pytest.param(
            "thresholds: {min_gain: 10 quick}",
            "p.yaml: thresholds.min_gain: unit 'quick' is neither the source's nor a byte rate "
            "(B/s, GB/s, GiB/s, KB/s, KiB/s, MB/s, MiB/s, bytes/s, flows/s, kB/s)",
            id="unknown-threshold-unit",
        ),
        pytest.param(
            "thresholds: {min_gain: ten KiB/s}",
            "p.yaml: thresholds.min_gain: expected a number, or a number and a unit such as "
            "'10KiB/s' or '0.5 flows/s', got 'ten KiB/s'",
            id="threshold-without-a-number",
        ),
        pytest.param(
            "thresholds: {min_pair_rate: 1KiB/s}",
            "p.yaml: thresholds.min_pair_rate: '1KiB/s' is a byte rate, but the source counts "
            "flows/s: set traffic.bytes_per_unit, or write it in the source's unit",
            id="byte-threshold-for-flows",
        ),
        pytest.param(
            "strategies: [{name: split-peers, args: {min_share: .inf}}]",
            "p.yaml: strategies.0.args.min_share: Input should be a finite number",
            id="infinite-strategy-arg",
        ),
    ],
)
def test_bad_policy_gives_one_line_naming_the_field(text: str, message: str) -> None:
    with pytest.raises(InputError) as raised:
        parse_policy(text, "p.yaml")
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_a_policy_of_many_wrong_items_names_the_first_few_and_counts_the_rest() -> None:
    """A ConfigMap-sized policy of wrong-typed items printed a 22-million-character line."""
    items = "\n".join("    - {name: 1, label: 2, weight: x}" for _ in range(25_000))
    text = f"topology:\n  levels:\n{items}\n"
    assert len(text) < 1024 * 1024
    with pytest.raises(InputError) as raised:
        parse_policy(text, "p.yaml")
    message = str(raised.value)
    assert message.startswith("p.yaml: topology.levels.0.name: Input should be a valid string; ")
    assert message.endswith("; and 74995 more problems")
    assert len(message) < 1000
    assert "\n" not in message


def test_a_policy_bigger_than_a_configmap_is_refused_unread() -> None:
    text = "# padding\n" * 110_000
    with pytest.raises(InputError, match=r"^p.yaml: 1100000 bytes; a policy is at most 1048576"):
        parse_policy(text, "p.yaml")


@pytest.mark.parametrize(
    ("text", "pair", "gain"),
    [
        pytest.param("{}", 0.1, 1.0, id="flows-default"),
        pytest.param("traffic: {source: istio}", 1024.0, 10240.0, id="bytes-default"),
        pytest.param(
            "traffic: {source: istio}\nthresholds: {min_pair_rate: 2, min_gain: 5MB/s}",
            2.0,
            5e6,
            id="bytes-given",
        ),
        pytest.param(
            "traffic: {source: hubble, bytes_per_unit: 2048}\n"
            "thresholds: {min_pair_rate: 0.5 flows/s, min_gain: '1 MiB/s'}",
            0.5,
            512.0,
            id="bytes-to-flows",
        ),
        pytest.param("thresholds: {min_gain: '3'}", 0.1, 3.0, id="text-without-unit"),
    ],
)
def test_thresholds_are_read_in_the_sources_unit(text: str, pair: float, gain: float) -> None:
    """A bare number is in the source's unit; a byte rate is converted to it; unset thresholds
    take the unit's defaults, so a bytes source does not act on a tenth of a byte a second."""
    thresholds = thresholds_of(parse_policy(text, "p.yaml"))
    assert thresholds.min_pair_rate == pytest.approx(pair)
    assert thresholds.min_gain == pytest.approx(gain)


def _policies_in_the_repository() -> list[tuple[str, str]]:
    """Every policy the project ships: the example files, and the policy.yaml of every
    ConfigMap under deploy/ and examples/install/."""
    root = Path(__file__).resolve().parents[1]
    found = [
        (str(path.relative_to(root)), path.read_text())
        for path in sorted(root.glob("examples/**/*.yaml"))
        if "policy" in path.name and "kind: ConfigMap" not in path.read_text()
    ]
    for path in sorted([*root.glob("deploy/**/*.yaml"), *root.glob("examples/install/**/*.yaml")]):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and "policy.yaml" in (document.get("data") or {}):
                found.append((str(path.relative_to(root)), document["data"]["policy.yaml"]))
    return found


SHIPPED = _policies_in_the_repository()


@pytest.mark.parametrize(("where", "text"), SHIPPED, ids=[where for where, _ in SHIPPED])
def test_every_shipped_policy_passes_the_schema_as_it_passes_validation(
    where: str, text: str
) -> None:
    """A GitOps check built on `rebalancer policy schema` accepts what the controller accepts:
    each strategy's args by its own model, chosen by its name."""
    parse_policy(text, where)
    validator = jsonschema.Draft202012Validator(Policy.json_schema())
    assert [error.message for error in validator.iter_errors(yaml.safe_load(text))] == []


@pytest.mark.parametrize(
    "strategy",
    [
        {"name": "split-peers", "args": {"min_share": "half"}},
        {"name": "split-peers", "args": {"group_by": "namespace"}},
        {"name": "gang-consolidation", "args": {"min_share": 0.5}},
        {"name": "no-such-strategy"},
    ],
    ids=["wrong-type", "other-strategy-s-arg", "arg-it-lacks", "unknown-name"],
)
def test_the_schema_refuses_what_validation_refuses(strategy: dict[str, Any]) -> None:
    document = {"strategies": [strategy]}
    with pytest.raises(InputError):
        parse_policy(yaml.safe_dump(document), "p")
    validator = jsonschema.Draft202012Validator(Policy.json_schema())
    assert list(validator.iter_errors(document))
