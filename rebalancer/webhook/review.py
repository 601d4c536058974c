"""One AdmissionReview answered: allowed, with a patch when a hint applies; never a refusal."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.landing import Hint, rank_of
from rebalancer.webhook.patch import affinity_patch, patchable

_log = logging.getLogger(__name__)


class HintTaker(Protocol):
    def take(self, owner: tuple[str, str, str], now: float, rank: str | None = None) -> Hint | None:
        """The oldest live hint for this controller that may steer a pod of this rank, removed
        so it steers exactly one pod."""


def review_response(review: Any, hints: HintTaker, now: Callable[[], float]) -> dict[str, Any]:
    """The AdmissionReview answer for one request: allowed, with a patch when a hint applies.
    Anything unexpected in the review (a shape, a version, a dry run) is allowed unchanged."""
    request = _mapping(_mapping(review).get("request"))
    answer = allowed_unchanged(review)
    response = answer["response"]
    if (_mapping(review).get("apiVersion"), _mapping(review).get("kind")) != (
        "admission.k8s.io/v1",
        "AdmissionReview",
    ) or not response["uid"]:
        return answer
    if request.get("dryRun", False) is not False:
        return answer  # a dry run creates no pod: no hint may be spent on it
    if request.get("operation") != "CREATE" or _mapping(request.get("kind")).get("kind") != "Pod":
        return answer
    pod = _mapping(request.get("object"))
    metadata = _mapping(pod.get("metadata"))
    owners = metadata.get("ownerReferences")
    owner = next(
        (
            o
            for o in (owners if isinstance(owners, list) else ())
            if isinstance(o, dict) and o.get("controller") is True
        ),
        None,
    )
    if owner is None or not patchable(pod):
        return answer
    namespace = request.get("namespace") or metadata.get("namespace", "")
    kind, name = owner.get("kind"), owner.get("name")
    if not (isinstance(namespace, str) and isinstance(kind, str) and isinstance(name, str)):
        return answer
    if not (namespace and kind and name):
        return answer
    try:
        rank = rank_of(_mapping(metadata.get("labels")), _mapping(metadata.get("annotations")))
        hint = hints.take((namespace, kind, name), now(), rank)
    except SourceUnavailableError as error:
        _log.warning("hint lookup failed, pod left as it is: %s", error)
        return answer
    if hint is None:
        return answer
    patch = affinity_patch(pod, hint)
    response["patchType"] = "JSONPatch"
    response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    _log.info(
        "steering a new pod of %s/%s %s to %s (%s)",
        namespace,
        kind,
        name,
        hint.domain,
        "required" if hint.required else f"preferred, weight {hint.weight}",
    )
    return answer


def allowed_unchanged(review: Any) -> dict[str, Any]:
    """The answer on any doubt: allowed, no patch, with the request's uid where it has one (the
    API server discards an answer whose uid is not its request's)."""
    uid = _mapping(_mapping(review).get("request")).get("uid")
    response: dict[str, Any] = {"uid": uid if isinstance(uid, str) else "", "allowed": True}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
