"""The calls of a surge migration: the Deployment's scale subresource, the old pod's
pod-deletion-cost, and the placement hint for the new pod.

Every scale change is a JSON patch that first tests the replicas the step expects, so a surge
never overwrites a scale someone else set meanwhile (an HPA, a user, GitOps): the API server
refuses the patch and the surge leaves that scale alone. Nothing here evicts or deletes a pod;
the ReplicaSet controller removes the old pod when the Deployment is scaled back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rebalancer.clients.events import EventRecorder
from rebalancer.clients.hints import HintStore
from rebalancer.clients.kube_api import ApiClient, list_raw, transport_problem
from rebalancer.cluster.parse_objects import condition_true, controller_of
from rebalancer.cluster.wire import WireMetadata, WireStatus
from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.surge import (
    DELETION_COST,
    LOWEST_COST,
    NewPod,
    OldPod,
    SurgeRecord,
    SurgeSeen,
)
from rebalancer.planning.types import Move

T = TypeVar("T")

TEMPLATE_HASH = "pod-template-hash"
"""The label the Deployment controller gives every pod of one ReplicaSet."""


class SurgeError(Exception):
    """A call of a surge failed, or may have: its answer was lost. The message names it."""


class NotMadeError(SurgeError):
    """A change that certainly was not made: the hint was not recorded (so no scale was sent),
    or the scale was not what the step expected (someone else's since)."""


@dataclass(frozen=True)
class Prepared:
    """What a surge records before its first change: the scale to return to, the pods already
    there, and the old pod's own deletion cost, to put back if the surge is undone."""

    replicas: int
    pods_before: list[str]
    previous_cost: str | None


class SurgeClient:
    def __init__(
        self, api: ApiClient, recorder: EventRecorder, hints: HintStore | None, *, dry_run: bool
    ) -> None:
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.recorder = recorder
        self.hints = hints
        self.dry_run = dry_run

    def prepare(self, move: Move, deployment: str) -> Prepared:
        """The Deployment's replicas and the UIDs of its ReplicaSet's pods, read now."""
        namespace = move.pod.split("/", 1)[0]
        replicas = self.replicas(namespace, deployment)
        if replicas is None:
            raise SurgeError(f"Deployment {namespace}/{deployment} is gone")
        assert move.controller is not None
        pods = self._replicaset_pods(namespace, move.controller[1])
        old = [p for p in pods if p["metadata"]["uid"] == move.uid]
        if not old:
            raise NotMadeError(f"pod {move.pod} is gone")
        cost = (old[0]["metadata"].get("annotations") or {}).get(DELETION_COST)
        return Prepared(replicas, sorted(p["metadata"]["uid"] for p in pods), cost)

    def scale_up(self, record: SurgeRecord, now: float) -> None:
        """Record the hint for the new pod, then add one replica (as a server-side dry run in a
        dry run, with no hint)."""
        if not self.dry_run:
            if self.hints is None:
                raise SurgeError("no hint store: migrate mode needs the webhook")
            try:
                self.hints.add(record.hint(), now)
            except SourceUnavailableError as error:
                raise NotMadeError(f"hint not recorded: {error}") from None
        self._scale(record, record.replicas, record.replicas + 1)

    def scale_back(self, record: SurgeRecord) -> None:
        self._scale(record, record.replicas + 1, record.replicas)

    def mark_old_pod(self, record: SurgeRecord) -> None:
        """The lowest pod-deletion-cost, so the ReplicaSet removes this pod when scaled back."""
        self._annotate(record.namespace, record.pod, record.pod_uid, LOWEST_COST)

    def unmark_old_pod(self, record: SurgeRecord) -> None:
        """Its own deletion cost back, or none."""
        self._annotate(record.namespace, record.pod, record.pod_uid, record.previous_cost)

    def withdraw_hint(self, record: SurgeRecord, now: float) -> None:
        """This surge's hint, if the webhook has not spent it, and no other."""
        if self.hints is not None:
            hint = record.hint()
            try:
                self.hints.withdraw_unless(lambda other: other != hint, now)
            except SourceUnavailableError as error:
                raise SurgeError(f"hint not withdrawn: {error}") from None

    def observe(self, record: SurgeRecord) -> SurgeSeen:
        replicas = self.replicas(record.namespace, record.deployment)
        old_pod, marked = self._old_pod(record)
        before = set(record.pods_before)
        new_pods = []
        for pod in self._replicaset_pods(record.namespace, record.replicaset):
            metadata = pod["metadata"]
            if metadata["uid"] in before or metadata.get("deletionTimestamp"):
                continue
            node = (pod.get("spec") or {}).get("nodeName")
            labels = self._node_labels(node) if node else None
            new_pods.append(NewPod(metadata["name"], metadata["uid"], _ready(pod), labels))
        return SurgeSeen(replicas, old_pod, marked, tuple(new_pods))

    def replicas(self, namespace: str, deployment: str) -> int | None:
        try:
            scale = self.apps.read_namespaced_deployment_scale(deployment, namespace)
        except ApiException as error:
            if error.status == 404:
                return None
            raise SurgeError(
                f"read scale of {namespace}/{deployment}: HTTP {error.status}"
            ) from None
        except (HTTPError, OSError) as error:
            raise SurgeError(f"read scale: {transport_problem(error)}") from None
        spec = scale.spec
        return int(spec.replicas or 0) if spec is not None else 0

    def event(self, record: SurgeRecord, reason: str, message: str, warning: bool = False) -> None:
        name = record.pod.split("/", 1)[1]
        self.recorder.record(
            "Pod", record.namespace, name, reason=reason, message=message, warning=warning
        )

    def _scale(self, record: SurgeRecord, expected: int, replicas: int) -> None:
        patch = [
            {"op": "test", "path": "/spec/replicas", "value": expected},
            {"op": "replace", "path": "/spec/replicas", "value": replicas},
        ]
        target = f"Deployment {record.namespace}/{record.deployment}"
        try:
            self.apps.patch_namespaced_deployment_scale(
                record.deployment,
                record.namespace,
                patch,
                dry_run="All" if self.dry_run else None,
                _content_type="application/json-patch+json",
            )
        except ApiException as error:
            if error.status == 422 and "test failed" in str(error.body or ""):
                raise NotMadeError(f"{target} no longer has {expected} replicas") from None
            raise SurgeError(f"scale {target}: HTTP {error.status} {error.reason}") from None
        except (HTTPError, OSError) as error:
            raise SurgeError(f"scale {target}: {transport_problem(error)}") from None

    def _annotate(self, namespace: str, pod: str, uid: str, value: str | None) -> None:
        """The deletion cost of the pod with this UID (a namesake is refused), or none."""
        name = pod.split("/", 1)[1]
        patch: dict[str, Any] = {"metadata": {"uid": uid, "annotations": {DELETION_COST: value}}}
        try:
            self.core.patch_namespaced_pod(
                name,
                namespace,
                patch,
                dry_run="All" if self.dry_run else None,
                _content_type="application/merge-patch+json",
            )
        except ApiException as error:
            if error.status in {404, 409, 422}:
                raise NotMadeError(f"pod {pod} is gone or replaced") from None
            raise SurgeError(f"annotate pod {pod}: HTTP {error.status}") from None
        except (HTTPError, OSError) as error:
            raise SurgeError(f"annotate pod {pod}: {transport_problem(error)}") from None

    def _old_pod(self, record: SurgeRecord) -> tuple[OldPod, bool]:
        name = record.pod.split("/", 1)[1]
        try:
            pod = self.core.read_namespaced_pod(name, record.namespace)
        except ApiException as error:
            if error.status == 404:
                return "gone", False
            raise SurgeError(f"read pod {record.pod}: HTTP {error.status}") from None
        except (HTTPError, OSError) as error:
            raise SurgeError(f"read pod {record.pod}: {transport_problem(error)}") from None
        metadata = pod.metadata
        if metadata is None or metadata.uid != record.pod_uid:
            return "gone", False
        marked = (metadata.annotations or {}).get(DELETION_COST) == LOWEST_COST
        return ("terminating" if metadata.deletion_timestamp else "running"), marked

    def _replicaset_pods(self, namespace: str, replicaset: str) -> list[Any]:
        """The ReplicaSet's pods: those with its template hash (the Deployment controller names
        a ReplicaSet `<deployment>-<hash>` and labels its pods with the hash) that it owns."""
        selector = f"{TEMPLATE_HASH}={replicaset.rsplit('-', 1)[-1]}"
        try:
            pods = list_raw(
                "Pod",
                lambda **kw: self.core.list_namespaced_pod(
                    namespace, label_selector=selector, **kw
                ),
            )
        except SourceUnavailableError as error:
            raise SurgeError(str(error)) from None
        return [pod for pod in pods if _controller_name(pod) == replicaset]

    def _node_labels(self, node: str) -> dict[str, str] | None:
        """Its node's labels; None for a node gone since (the pod is as good as unbound)."""
        try:
            found = self.core.read_node(node)
        except ApiException as error:
            if error.status == 404:
                return None
            raise SurgeError(f"read node {node}: HTTP {error.status}") from None
        except (HTTPError, OSError) as error:
            raise SurgeError(f"read node {node}: {transport_problem(error)}") from None
        return dict((found.metadata.labels if found.metadata else None) or {})


def _controller_name(pod: dict[str, Any]) -> str | None:
    """The name of the pod's controller, read as the parser reads it."""
    controller = controller_of(_converted(pod, "metadata", WireMetadata))
    return controller[1] if controller is not None else None


def _ready(pod: dict[str, Any]) -> bool:
    """Running and Ready, its conditions read as the parser reads them."""
    status = _converted(pod, "status", WireStatus)
    return status.phase == "Running" and condition_true(status, "Ready")


def _converted(pod: dict[str, Any], part: str, kind: type[T]) -> T:
    """A part of a listed pod as the parser reads it; one the API server would never send is a
    failed call, not a crash of the cycle."""
    try:
        return msgspec.convert(pod.get(part) or {}, kind)
    except msgspec.ValidationError as error:
        name = (pod.get("metadata") or {}).get("name")
        raise SurgeError(f"pod {name}: {part}: {error}") from None
