"""Kubernetes label and node selector semantics, on the API's own dict shapes.

Kept pure and literal to the API reference so the planner's fit check agrees with kube-scheduler:
an empty label selector matches everything, a null one nothing; node selector terms are ORed and
their expressions ANDed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def matches_label_selector(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    return all(
        _matches_expression(requirement, labels)
        for requirement in selector.get("matchExpressions") or ()
    )


def _matches_expression(requirement: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = requirement.get("key", "")
    operator = requirement.get("operator")
    values = requirement.get("values") or ()
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in {"Gt", "Lt"} and present and values:
        try:
            actual, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return actual > bound if operator == "Gt" else actual < bound
    return False


def matches_node_selector_terms(
    terms: list[Mapping[str, Any]], node_name: str, node_labels: Mapping[str, str]
) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: any term may match."""
    fields = {"metadata.name": node_name}
    for term in terms:
        expressions = term.get("matchExpressions") or ()
        field_expressions = term.get("matchFields") or ()
        if not expressions and not field_expressions:
            continue  # an empty term matches no node
        if all(_matches_expression(e, node_labels) for e in expressions) and all(
            _matches_expression(e, fields) for e in field_expressions
        ):
            return True
    return False
