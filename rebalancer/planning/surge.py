"""Make-before-break for a Deployment's pod, as steps recorded in the state: scale up by one with
the new pod steered to the target, wait for it to be Ready there, give the old pod the lowest
pod-deletion-cost, scale back, and check that the old pod is the one removed.

Each step is decided here from what was recorded and what the cluster shows now, with no I/O, so
a controller killed between any two calls leaves a record the next leader can finish or undo.
A leader that inherits a surge does not wait on it: it finishes it if the new pod is Ready in the
target, and undoes it otherwise, so no Deployment stays scaled up past its first cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from rebalancer.planning.landing import Hint
from rebalancer.planning.types import Move

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
LOWEST_COST = str(-(2**31))
"""The lowest value the ReplicaSet controller accepts (an int32): the old pod goes first."""
SCALED_DOWN_GRACE_SECONDS = 60.0
"""How long after scaling back the old pod may take to start terminating."""

SurgePhase = Literal["started", "scaled-up", "scaled-down"]
"""`started`: recorded, the hint and the scale-up maybe not yet made; `scaled-up`: the
Deployment has one replica more; `scaled-down`: back to its replicas, the old pod marked to go."""


class SurgeRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: str
    """The Deployment as the planner names it (Deployment/namespace/name)."""
    namespace: str
    deployment: str
    replicaset: str
    """The old pod's ReplicaSet: the new pod is its, and the hint is for it."""
    pod: str
    """namespace/name of the pod being moved."""
    pod_uid: str
    replicas: int
    """spec.replicas when the surge started: what it goes back to."""
    pods_before: list[str]
    """UIDs of the ReplicaSet's pods when the surge started: the new pod is none of them."""
    target: dict[str, str]
    """Node label -> value of the target domain."""
    destination: dict[str, str]
    """Level name -> value of the target domain, for people."""
    origin: dict[str, str]
    strategy: str
    started_at: float
    deadline: float
    """Unix seconds by which the new pod must be Ready in the target."""
    phase: SurgePhase
    leader: str
    """The process that started it; another one inherits it."""
    previous_cost: str | None = None
    """The old pod's own pod-deletion-cost before the surge, put back if it is undone."""

    @property
    def hint_owner(self) -> tuple[str, str, str]:
        return (self.namespace, "ReplicaSet", self.replicaset)

    def hint(self) -> Hint:
        """Required: a new pod outside the target would only be undone. The same every time it
        is made, so it is withdrawn by what it is, never another surge's or eviction's."""
        return Hint(
            namespace=self.namespace,
            owner_kind="ReplicaSet",
            owner_name=self.replicaset,
            workload=self.workload,
            domain=self.target,
            required=True,
            expires=self.deadline,
        )

    def at(self, phase: SurgePhase) -> SurgeRecord:
        return self.model_copy(update={"phase": phase})


def surge_record(
    move: Move,
    replicas: int,
    pods_before: list[str],
    *,
    now: float,
    timeout: float,
    leader: str,
    previous_cost: str | None = None,
) -> SurgeRecord:
    assert move.workload is not None and move.controller is not None
    namespace, _pod = move.pod.split("/", 1)
    return SurgeRecord(
        workload=move.workload,
        namespace=namespace,
        deployment=move.workload.rsplit("/", 1)[-1],
        replicaset=move.controller[1],
        pod=move.pod,
        pod_uid=move.uid,
        replicas=replicas,
        pods_before=sorted(pods_before),
        target=move.target_labels,
        destination=move.destination,
        origin=move.origin,
        strategy=move.strategy,
        started_at=now,
        deadline=now + timeout,
        phase="started",
        leader=leader,
        previous_cost=previous_cost,
    )


@dataclass(frozen=True)
class NewPod:
    name: str
    uid: str
    ready: bool
    node_labels: dict[str, str] | None
    """Its node's labels once bound; None while it is not."""


OldPod = Literal["running", "terminating", "gone"]


@dataclass(frozen=True)
class SurgeSeen:
    """What the cluster shows of a surge now."""

    replicas: int | None
    """The Deployment's spec.replicas; None when it is gone."""
    old_pod: OldPod
    old_pod_marked: bool
    """The old pod carries the lowest deletion cost (set by this surge)."""
    new_pods: tuple[NewPod, ...]
    """The ReplicaSet's pods that were not there when the surge started, not terminating."""


Step = Literal["wait", "switch", "scaled-back", "done", "revert", "abandon"]
"""`switch`: mark the old pod and scale back; `scaled-back`: that was done, only not recorded;
`done`: the old pod is going and the new one runs in the target; `revert`: scale back (if
scaled up), unmark, withdraw the hint; `abandon`: the scale is not this surge's any more (or
never was), so leave it and only unmark and withdraw the hint."""


def next_step(
    record: SurgeRecord, seen: SurgeSeen, now: float, inherited: bool
) -> tuple[Step, str]:
    """The step to take now, and why (for the Event and the log)."""
    if seen.replicas is None:
        return "abandon", "the Deployment is gone"
    up, before = record.replicas + 1, record.replicas
    if record.phase == "started":
        # Recorded, then killed before the scale-up was recorded: made or not, it is undone.
        if seen.replicas == up:
            return "revert", "taken over before the scale-up was recorded"
        if seen.replicas == before:
            return "abandon", "taken over before the scale-up"
        return "abandon", f"replicas changed to {seen.replicas} by someone else"
    if record.phase == "scaled-down":
        if seen.old_pod != "running":
            return "done", f"the old pod is {seen.old_pod}; the new one runs in the target"
        if now > record.deadline + SCALED_DOWN_GRACE_SECONDS:
            return "abandon", "scaled back, but another pod than the old one was removed"
        return "wait", "scaled back; waiting for the old pod to go"
    if seen.replicas == before:
        # Scaled back by this surge, only not recorded (killed after the call), or by others.
        if seen.old_pod_marked:
            return "scaled-back", "taken over after the scale back"
        if seen.old_pod != "running" and _landed(record, seen):
            return "done", "taken over after the scale back; the new pod runs in the target"
    if seen.replicas != up:
        return "abandon", f"replicas changed to {seen.replicas} by someone else"
    if seen.old_pod != "running":
        return "revert", f"the old pod is {seen.old_pod}: its own replacement is on its way"
    ready = [pod for pod in seen.new_pods if pod.ready and pod.node_labels is not None]
    landed = _landed(record, seen)
    if landed:
        return "switch", f"{landed[0].name} is Ready in the target"
    if ready:
        return "revert", f"{ready[0].name} is Ready outside the target"
    if now > record.deadline:
        return "revert", "the new pod was not Ready in the target in time"
    if inherited:
        return "revert", "taken over while the new pod was not yet Ready"
    return "wait", "waiting for the new pod to be Ready in the target"


def _landed(record: SurgeRecord, seen: SurgeSeen) -> list[NewPod]:
    """The new pods Ready in the target."""
    return [
        pod
        for pod in seen.new_pods
        if pod.ready and pod.node_labels is not None and _inside(pod.node_labels, record.target)
    ]


def _inside(labels: dict[str, str], target: dict[str, str]) -> bool:
    return target.items() <= labels.items()
