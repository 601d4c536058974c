"""The node affinity a hint adds to a new pod, as a JSONPatch, keeping the pod's own rules."""

from __future__ import annotations

from typing import Any

from rebalancer.planning.landing import Hint


def patchable(pod: dict[str, Any]) -> bool:
    """Whether the pod's affinity has the shapes a Pod's can have, so the patch can keep its
    rules; checked before a hint is spent on it. Mutating admission runs before validation, so
    a review can carry anything."""
    spec = pod.get("spec")
    if spec is None:
        return True
    if not isinstance(spec, dict):
        return False
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {} if isinstance(affinity, dict) else None
    if not isinstance(node_affinity, dict):
        return False
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    if not (isinstance(required, dict) and isinstance(preferred, list)):
        return False
    terms = required.get("nodeSelectorTerms") or []
    return isinstance(terms, list) and all(
        isinstance(term, dict) and isinstance(term.get("matchExpressions") or [], list)
        for term in terms
    )


def affinity_patch(pod: dict[str, Any], hint: Hint) -> list[dict[str, Any]]:
    """JSONPatch that adds the hint's domain as node affinity, keeping the pod's own rules.

    Preferred hints add a weighted preference. Required hints add the domain to every existing
    required term (terms are ORed, so each must carry it), or create the one term. The pod must
    be `patchable`.
    """
    expressions = [
        {"key": label, "operator": "In", "values": [value]} for label, value in hint.domain.items()
    ]
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    if hint.required:
        required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        terms = required.get("nodeSelectorTerms") or [{}]
        terms = [
            {**term, "matchExpressions": [*(term.get("matchExpressions") or []), *expressions]}
            for term in terms
        ]
        node_affinity = {
            **node_affinity,
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
        }
    else:
        preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        term = {"weight": hint.weight, "preference": {"matchExpressions": expressions}}
        node_affinity = {
            **node_affinity,
            "preferredDuringSchedulingIgnoredDuringExecution": [*preferred, term],
        }
    operation = "replace" if "affinity" in (pod.get("spec") or {}) else "add"
    return [
        {
            "op": operation,
            "path": "/spec/affinity",
            "value": {**affinity, "nodeAffinity": node_affinity},
        }
    ]
