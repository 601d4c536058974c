"""Placement hints become node affinity that keeps the pod's own rules, and the webhook answer
never blocks a pod."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from rebalancer.clients.hints import HintStore
from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.landing import Hint
from rebalancer.webhook.patch import affinity_patch
from rebalancer.webhook.review import review_response

ZONE = "topology.kubernetes.io/zone"
RACK = "topology.kubernetes.io/rack"
IN_ZONE_B = [
    {"key": ZONE, "operator": "In", "values": ["b"]},
    {"key": RACK, "operator": "In", "values": ["r1"]},
]


def hint(required: bool = False) -> Hint:
    return Hint(
        namespace="shop",
        owner_kind="ReplicaSet",
        owner_name="web-5d8c7",
        workload="w",
        domain={ZONE: "b", RACK: "r1"},
        required=required,
        weight=80,
        expires=100.0,
    )


def test_a_preferred_hint_adds_a_weighted_term_beside_the_pods_own() -> None:
    own = {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}
    pod = {
        "spec": {
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [own]}}
        }
    }
    [operation] = affinity_patch(pod, hint())
    assert operation["op"] == "replace" and operation["path"] == "/spec/affinity"
    preferred = operation["value"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert preferred == [own, {"weight": 80, "preference": {"matchExpressions": IN_ZONE_B}}]


def test_a_required_hint_is_added_to_every_required_term() -> None:
    terms = [
        {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
        {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
    ]
    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            }
        }
    }
    [operation] = affinity_patch(pod, hint(required=True))
    required = operation["value"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert [len(t["matchExpressions"]) for t in required["nodeSelectorTerms"]] == [3, 3]
    assert affinity_patch({"spec": {}}, hint(required=True))[0]["op"] == "add"


class FakeStore(HintStore):
    def __init__(self, found: Hint | None = None, broken: bool = False) -> None:
        self.found, self.broken, self.asked = found, broken, []  # type: ignore[var-annotated]
        self.ranks: list[str | None] = []

    def take(self, owner: tuple[str, str, str], now: float, rank: str | None = None) -> Hint | None:
        self.asked.append(owner)
        self.ranks.append(rank)
        if self.broken:
            raise SourceUnavailableError("hints ConfigMap: HTTP 500")
        return self.found


def review(owner: bool = True, operation: str = "CREATE") -> dict[str, Any]:
    metadata: dict[str, Any] = {"generateName": "web-5d8c7-"}
    if owner:
        metadata["ownerReferences"] = [
            {"kind": "ReplicaSet", "name": "web-5d8c7", "controller": True}
        ]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "operation": operation,
            "namespace": "shop",
            "kind": {"kind": "Pod"},
            "object": {"metadata": metadata, "spec": {}},
        },
    }


def test_a_pod_of_a_hinted_controller_is_patched_and_the_hint_consumed() -> None:
    store = FakeStore(found=hint())
    response = review_response(review(), store, lambda: 50.0)["response"]
    assert response["allowed"] is True and response["uid"] == "u1"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert patch[0]["value"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert store.asked == [("shop", "ReplicaSet", "web-5d8c7")]


def test_a_new_rank_of_a_job_asks_for_its_own_rank_s_hint() -> None:
    store = FakeStore(found=hint())
    ranked = review()
    metadata = ranked["request"]["object"]["metadata"]
    metadata["annotations"] = {"batch.kubernetes.io/job-completion-index": "3"}
    review_response(ranked, store, lambda: 50.0)
    review_response(review(), store, lambda: 50.0)
    assert store.ranks == ["3", None]


@pytest.mark.parametrize(
    ("store", "request_review"),
    [
        (FakeStore(), review()),
        (FakeStore(found=hint()), review(owner=False)),
        (FakeStore(found=hint()), review(operation="UPDATE")),
        (FakeStore(broken=True), review()),
    ],
    ids=["no-hint", "bare-pod", "not-a-create", "store-down"],
)
def test_everything_else_is_allowed_unchanged(
    store: FakeStore, request_review: dict[str, Any]
) -> None:
    response = review_response(request_review, store, lambda: 50.0)["response"]
    assert response == {"uid": "u1", "allowed": True}


def _changed(review: dict[str, Any], **request: Any) -> dict[str, Any]:
    return {**review, "request": {**review["request"], **request}}


@pytest.mark.parametrize(
    ("request_review", "uid"),
    [
        (_changed(review(), dryRun=True), "u1"),
        (_changed(review(), dryRun="yes"), "u1"),
        ({**review(), "apiVersion": "admission.k8s.io/v1beta1"}, "u1"),
        ({**review(), "kind": "ConversionReview"}, "u1"),
        (_changed(review(), kind="Pod"), "u1"),
        (_changed(review(), object=["not", "a", "pod"]), "u1"),
        (
            _changed(review(), object={"metadata": {"ownerReferences": {"kind": "ReplicaSet"}}}),
            "u1",
        ),
        (_changed(review(), object={"metadata": {"ownerReferences": ["x"]}}), "u1"),
        (_changed(review(), namespace=7), "u1"),
        (_changed(review(), uid=["u1"]), ""),
        ({**review(), "request": "CREATE"}, ""),
        (None, ""),
        (["AdmissionReview"], ""),
        ("{}", ""),
    ],
    ids=[
        "dry-run",
        "dry-run-not-a-boolean",
        "other-api-version",
        "other-kind",
        "kind-not-an-object",
        "object-not-an-object",
        "owners-not-a-list",
        "owner-not-an-object",
        "namespace-not-text",
        "uid-not-text",
        "request-not-an-object",
        "null",
        "a-list",
        "a-string",
    ],
)
def test_doubtful_reviews_are_answered_allowed_unchanged_and_spend_no_hint(
    request_review: Any, uid: str
) -> None:
    store = FakeStore(found=hint())
    answer = review_response(request_review, store, lambda: 50.0)
    assert answer == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": True},
    }
    assert store.asked == []
