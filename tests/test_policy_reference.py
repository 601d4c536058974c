"""The policy's documentation is generated from the model: it must be current and complete."""

from __future__ import annotations

from typing import Annotated, Literal

import yaml
from pydantic import Field

from harness.policy_docs import DEFAULT_POLICY, OVERLAY_POLICIES, POLICY_DOC
from rebalancer.config.policy import Policy, parse_policy
from rebalancer.config.reference import (
    default_policy_configmap,
    default_policy_yaml,
    reference_markdown,
    type_name,
    with_reference,
)

REGENERATE = "out of date: run `python -m harness.policy_docs`"


def test_the_policy_doc_reference_is_current() -> None:
    text = POLICY_DOC.read_text()
    assert with_reference(text) == text, REGENERATE


def test_the_deployed_default_policy_is_current_and_is_the_default() -> None:
    assert DEFAULT_POLICY.read_text() == default_policy_configmap(), REGENERATE
    config_map = yaml.safe_load(DEFAULT_POLICY.read_text())
    policy = parse_policy(config_map["data"]["policy.yaml"], str(DEFAULT_POLICY))
    assert policy == Policy()
    assert policy.mode == "dry-run"


def test_the_overlay_policies_are_current_and_differ_only_in_mode() -> None:
    for mode, path in OVERLAY_POLICIES.items():
        assert path.read_text() == default_policy_configmap(mode), REGENERATE
        config_map = yaml.safe_load(path.read_text())
        assert parse_policy(config_map["data"]["policy.yaml"], str(path)) == Policy(mode=mode)


def test_the_commented_defaults_parse_back_to_the_defaults() -> None:
    assert parse_policy(default_policy_yaml(), "generated") == Policy()


def test_every_field_is_explained() -> None:
    rows = [line for line in reference_markdown().splitlines() if line.startswith("| `")]
    assert len(rows) > 60
    unexplained = [row.split("|")[1].strip() for row in rows if row.rstrip().endswith("|  |")]
    assert unexplained == []


def test_type_names_read_as_prose() -> None:
    assert type_name(Literal["a", "b"]) == "`a` or `b`"
    assert type_name(Annotated[int | None, Field(ge=0)]) == "integer, or null"
    assert type_name(tuple[str, ...]) == "list of string"
    assert type_name(dict[str, str]) == "map of string to string"
