"""One AdmissionReview answered: allowed, with a patch when a hint applies; never a refusal."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Any, Protocol

from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.landing import Hint
from rebalancer.webhook.patch import affinity_patch

_log = logging.getLogger(__name__)


class HintTaker(Protocol):
    def take(self, owner: tuple[str, str, str], now: float) -> Hint | None:
        """The oldest live hint for this controller, removed so it steers exactly one pod."""


def review_response(
    review: dict[str, Any], hints: HintTaker, now: Callable[[], float]
) -> dict[str, Any]:
    """The AdmissionReview answer for one request: allowed, with a patch when a hint applies."""
    request = review.get("request") or {}
    response: dict[str, Any] = {"uid": request.get("uid", ""), "allowed": True}
    answer = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    pod = request.get("object") or {}
    if request.get("operation") != "CREATE" or request.get("kind", {}).get("kind") != "Pod":
        return answer
    metadata = pod.get("metadata") or {}
    owner = next((o for o in metadata.get("ownerReferences") or () if o.get("controller")), None)
    if owner is None:
        return answer
    namespace = request.get("namespace") or metadata.get("namespace", "")
    try:
        hint = hints.take((namespace, owner.get("kind", ""), owner.get("name", "")), now())
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
        owner.get("kind"),
        owner.get("name"),
        hint.domain,
        "required" if hint.required else f"preferred, weight {hint.weight}",
    )
    return answer
