"""The policy's documentation, rendered from the pydantic models so it cannot drift from them:
the reference tables of docs/policy.md and the commented default policy that deploy/ installs.

Rendering only: `python -m harness.policy_docs` writes the files, and a test fails when either is
out of date.
"""

from __future__ import annotations

import json
import textwrap
import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from rebalancer.config.policy import API_VERSION, KIND, Mode, Policy
from rebalancer.strategies.registry import STRATEGIES
from rebalancer.traffic.settings import CustomSource, HubbleSource, IstioSource

BEGIN, END = "<!-- policy-reference:begin -->", "<!-- policy-reference:end -->"
TRAFFIC_SOURCES: tuple[type[BaseModel], ...] = (HubbleSource, IstioSource, CustomSource)
_BOUNDS = (
    (annotated_types.Ge, "ge", ">="),
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Le, "le", "<="),
    (annotated_types.Lt, "lt", "<"),
)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field holds (directly, in a list, or as one member of a union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for argument in get_args(annotation) for model in _models_in(argument)]


def type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Annotated:
        return type_name(get_args(annotation)[0])
    if origin is Literal:
        return " or ".join(f"`{value}`" for value in get_args(annotation))
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) > 1 and all(_models_in(member) for member in members):
            return "object"
        name = " or ".join(type_name(member) for member in members)
        return f"{name}, or null" if len(members) < len(get_args(annotation)) else name
    if origin in (tuple, list):
        return f"list of {type_name(get_args(annotation)[0])}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"map of {type_name(key)} to {type_name(value)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "object"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
        annotation, str(annotation)
    )


def _bounds(field: FieldInfo) -> str:
    found = []
    for item in field.metadata:
        for kind, attribute, sign in _BOUNDS:
            if isinstance(item, kind):
                found.append(f"{sign} {getattr(item, attribute)}")
    return ", ".join(found)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True, validated_data={})
    if isinstance(value, BaseModel):
        return "see below"
    if isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
        value = [item.model_dump(mode="json", exclude_defaults=True) for item in value]
    return f"`{json.dumps(value, default=list)}`"


def _sections(model: type[BaseModel], path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    """(path, model) for the model and every model nested in it, depth first."""
    yield path, model
    for name, field in model.model_fields.items():
        nested = _models_in(field.annotation)
        if name == "traffic":
            for source in TRAFFIC_SOURCES:
                literal = get_args(source.model_fields["source"].annotation)[0]
                yield from _sections(source, f"traffic (source: {literal})")
        elif name == "args" and model.__name__ == "StrategyConfig":
            for strategy_name, strategy in sorted(STRATEGIES.items()):
                yield from _sections(strategy.args_type, f"strategies[].args ({strategy_name})")
        elif nested:
            suffix = "[]" if get_origin(field.annotation) in (tuple, list) else ""
            yield from _sections(nested[0], f"{path}.{name}{suffix}" if path else name + suffix)


def reference_markdown() -> str:
    """One table per section of the policy: field, type, default and what it is for."""
    out = []
    for path, model in _sections(Policy, ""):
        out.append(f"#### `{path}`" if path else "#### top level")
        if model.__doc__ and path:
            out.append("\n" + " ".join(model.__doc__.split()))
        out.append("\n| Field | Type | Default | Meaning |\n|---|---|---|---|")
        for name, field in model.model_fields.items():
            kind = type_name(field.annotation)
            bounds = _bounds(field)
            kind = f"{kind} ({bounds})" if bounds else kind
            meaning = " ".join((field.description or "").split()).replace("|", "\\|")
            out.append(f"| `{name}` | {kind} | {_default(field)} | {meaning} |")
        out.append("")
    return "\n".join(out).strip() + "\n"


def _comment(text: str | None, indent: str) -> list[str]:
    if not text:
        return []
    return textwrap.wrap(
        " ".join(text.split()),
        96 - len(indent),
        initial_indent=f"{indent}# ",
        subsequent_indent=f"{indent}# ",
    )


def _flow(value: Any) -> str:
    return (
        str(yaml.safe_dump(value, default_flow_style=True, width=1000))
        .strip()
        .removesuffix("\n...")
        .removesuffix("...")
        .strip()
    )


def _yaml_lines(model: BaseModel, indent: str) -> Iterator[str]:
    fields = type(model).model_fields
    # A traffic source's discriminator first, where a reader looks for what kind it is.
    for name in sorted(fields, key=lambda name: name != "source"):
        field = fields[name]
        value = getattr(model, name)
        yield from _comment(field.description, indent)
        if isinstance(value, BaseModel):
            yield f"{indent}{name}:"
            yield from _yaml_lines(value, indent + "  ")
        elif isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
            yield f"{indent}{name}:"
            for item in value:
                yield f"{indent}  - {_flow(item.model_dump(mode='json'))}"
        else:
            yield f"{indent}{name}: {_flow(value if not isinstance(value, tuple) else list(value))}"


def default_policy_yaml(mode: Mode = "dry-run") -> str:
    """The defaults (but for `mode`) as a commented policy document that parses back to them."""
    head = [f"apiVersion: {API_VERSION}", f"kind: {KIND}"]
    return "\n".join([*head, *_yaml_lines(Policy(mode=mode), "")]) + "\n"


def default_policy_configmap(mode: Mode = "dry-run") -> str:
    header = (
        f"# The policy, in {mode} mode: generated by `python -m harness.policy_docs`\n"
        "# from the model, so every default and comment here is the controller's own. Edit the\n"
        "# data; the controller rereads it every cycle and keeps the last good policy if an edit\n"
        "# is bad.\n"
    )
    body = textwrap.indent(default_policy_yaml(mode), "    ")
    return (
        f"{header}apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: topology-rebalancer-policy\n"
        f"data:\n  policy.yaml: |\n{body}"
    )


def with_reference(document: str) -> str:
    """The document with the reference between its markers rendered anew."""
    before, _, rest = document.partition(BEGIN)
    _, _, after = rest.partition(END)
    return f"{before}{BEGIN}\n{reference_markdown()}{END}{after}"
