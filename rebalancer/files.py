"""Reading the user's files (policy, scenario, snapshot, traffic), with the one-line errors every
input gets: the file, then the field path, then what is wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from rebalancer.errors import InputError, one_line

Model = TypeVar("Model", bound=BaseModel)
_UNION_TAGS = frozenset({"hubble", "istio", "custom"})
_PLAIN_KEY = re.compile(r"[\w./-]+")
_SHOWN_PROBLEMS = 5
_PROBLEM_CHARACTERS = 300


MIB = 1024 * 1024
LARGE_INPUT_BYTES = 1024 * MIB
"""A snapshot or a saved traffic answer: 100,000 pods' are about 90 and 210 MiB."""


def read_bytes(path: Path, what: str, limit: int) -> bytes:
    """At most `limit` bytes: a device such as /dev/zero, or a file given by mistake, would
    otherwise be read until memory runs out (its size says nothing: 0 for a device)."""
    try:
        with path.open("rb") as file:
            data = file.read(limit + 1)
    except OSError as error:
        raise InputError(f"{path}: cannot read {what} ({error.strerror})") from None
    if len(data) > limit:
        most = f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"
        raise InputError(f"{path}: a {what} is at most {most}; this is more")
    return data


def read_text(path: Path, what: str, limit: int) -> str:
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path}: cannot read {what} (not UTF-8 text: byte {error.start})"
        ) from None


def describe_validation_error(error: ValidationError) -> str:
    """The first few of pydantic's errors on one line, each led by the dotted path of its field,
    and how many more there are: a 1 MiB policy of wrong-typed items printed 22 million
    characters."""
    parts = []
    for item in error.errors(include_url=False)[:_SHOWN_PROBLEMS]:
        message = one_line(item["msg"].removeprefix("Value error, "), _PROBLEM_CHARACTERS)
        location = ".".join(_field_name(part) for part in item["loc"] if not _is_union_tag(part))
        parts.append(f"{location}: {message}" if location else message)
    more = error.error_count() - len(parts)
    return "; ".join(parts) + (f"; and {more} more problems" if more > 0 else "")


def _field_name(part: int | str) -> str:
    """A key as the user wrote it; quoted when it is no plain name (empty, spaces, newlines)."""
    text = str(part)
    return text if _PLAIN_KEY.fullmatch(text) else json.dumps(text)


def _is_union_tag(part: int | str) -> bool:
    return isinstance(part, str) and (part in _UNION_TAGS or "[" in part)


class _UniqueKeys:
    """Refuses a mapping that names a key twice: PyYAML keeps the last, so a policy saying
    `mode: dry-run` and, further down, `mode: evict` would load as evict."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        constructor: Any = self
        seen: set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = constructor.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:
                continue  # unhashable: the base class says so
            if repeated:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
        mapping: dict[Any, Any] = yaml.constructor.SafeConstructor.construct_mapping(
            constructor, node, deep
        )
        return mapping


class _FastLoader(_UniqueKeys, yaml.CSafeLoader):
    """libyaml's parser: the pure-Python one took 5 s for a ConfigMap-sized (1 MiB) policy."""


class _PortableLoader(_UniqueKeys, yaml.SafeLoader):
    """Where PyYAML was built without libyaml."""


_LOADER = _FastLoader if yaml.__with_libyaml__ else _PortableLoader


def parse_yaml_model(model: type[Model], text: str, origin: str, what: str) -> Model:
    """YAML text validated into `model`; an empty document is an empty mapping."""
    try:
        document = yaml.load(text, Loader=_LOADER)
    except yaml.constructor.ConstructorError as error:
        mark = error.problem_mark
        where = f" line {mark.line + 1}:" if mark is not None else ""
        raise InputError(f"{origin}:{where} {one_line(error.problem, 200)}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        # libyaml puts an unclosed bracket's mark past the last line: say the last line
        where = f" line {min(mark.line + 1, text.count(chr(10)) + 1)}" if mark is not None else ""
        raise InputError(f"{origin}:{where} not valid YAML") from None
    except ValueError as error:  # PyYAML's own constructors: a date such as 2021-13-45
        raise InputError(f"{origin}: not valid YAML ({error})") from None
    except RecursionError:
        raise InputError(f"{origin}: not valid YAML (nested too deeply)") from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise InputError(f"{origin}: a {what} is a mapping, got {type(document).__name__}")
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise InputError(f"{origin}: {describe_validation_error(error)}") from None
