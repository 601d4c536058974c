"""Did the replacement land where we meant it to? Judged from the next snapshots, purely.

After an eviction the controller remembers which controller will create the replacement and which
domain it should land in: in migrate mode that is the published hint, in evict mode the same record
kept only to judge by, since there the scheduler alone picks the node. The first pod that
controller creates after the eviction is the replacement: once it is bound to a node, it landed in
the target or elsewhere; if none is bound when the hint expires, it was not scheduled. A workload
whose replacements keep landing elsewhere backs off, since moving it again would only churn.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rebalancer.cluster.model import Pod, Snapshot
from rebalancer.planning.types import Move

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"
POD_INDEX = "apps.kubernetes.io/pod-index"
"""A StatefulSet pod's ordinal (Kubernetes 1.28 and later), which its replacement keeps."""


def rank_of(labels: Mapping[str, Any], annotations: Mapping[str, Any]) -> str | None:
    """The pod's fixed place in its job, which its replacement carries too: an indexed Job's
    completion index, a Kubeflow job's replica type and index, a StatefulSet pod's ordinal.
    None for interchangeable pods."""
    index = annotations.get(COMPLETION_INDEX) or labels.get(COMPLETION_INDEX)
    if isinstance(index, str) and index:
        return index
    kind, number = labels.get(KUBEFLOW_REPLICA_TYPE), labels.get(KUBEFLOW_REPLICA_INDEX)
    if isinstance(kind, str) and isinstance(number, str) and kind and number:
        return f"{kind}/{number}"
    ordinal = labels.get(POD_INDEX)
    return ordinal if isinstance(ordinal, str) and ordinal else None


class Hint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str
    owner_kind: str
    owner_name: str
    """The evicted pod's controller, which creates the replacement."""
    workload: str
    domain: dict[str, str]
    """Node label -> value of every level down to the target, e.g. zone and rack labels."""
    required: bool = False
    weight: Annotated[int, Field(ge=1, le=100)] = 100
    expires: float
    """Unix seconds; after this the hint is dropped unused."""
    rank: str | None = None
    """The evicted pod's rank (`rank_of`): the hint steers only the replacement of that rank,
    so a job whose ranks move to different racks gets each where the plan put it."""

    @property
    def owner(self) -> tuple[str, str, str]:
        return (self.namespace, self.owner_kind, self.owner_name)


def hint_for(hints: list[Hint], owner: tuple[str, str, str], rank: str | None) -> Hint | None:
    """The first of these hints that steers a new pod of this controller and rank: one with
    the pod's rank, or one for any pod of the controller. A ranked hint never steers another
    rank, or an unranked pod."""
    return next((h for h in hints if h.owner == owner and h.rank in (None, rank)), None)


LandingResult = Literal["landed-in-target", "landed-elsewhere", "not-scheduled"]


def expected_landing(move: Move, *, required: bool, weight: int, expires: float) -> Hint | None:
    """The hint for the replacement of `move`; None when no controller will create one."""
    if move.controller is None:
        return None
    return Hint(
        namespace=move.pod.split("/", 1)[0],
        owner_kind=move.controller[0],
        owner_name=move.controller[1],
        workload=move.workload or "",
        domain=move.target_labels,
        required=required,
        weight=weight,
        expires=expires,
        rank=move.rank,
    )


class Landing(BaseModel):
    """One replacement we are waiting for: where it should go, and the eviction it replaces."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hint: Hint
    evicted_pod: str
    evicted_at: float


@dataclass(frozen=True)
class Judged:
    landing: Landing
    result: LandingResult
    pod: str = ""
    """The replacement, when one exists; for not-scheduled it is the pod still Pending."""


def _created(timestamp: str) -> float:
    try:
        return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _made_since(pod: Pod | None, landing: Landing, claimed: set[str]) -> bool:
    """A pod of the hint's controller, not yet claimed, created after the eviction
    (creationTimestamp has whole seconds: the second of the eviction counts)."""
    hint = landing.hint
    return (
        pod is not None
        and pod.namespace == hint.namespace
        and pod.controller_kind == hint.owner_kind
        and pod.controller_name == hint.owner_name
        and pod.key not in claimed
        and _created(pod.created) >= int(landing.evicted_at)
        and (hint.rank is None or rank_of(pod.labels, pod.annotations) == hint.rank)
    )


def judge(
    landings: list[Landing], snapshot: Snapshot, now: float
) -> tuple[list[Judged], list[Landing]]:
    """Results for the landings that can be judged now, and the ones still pending."""
    claimed: set[str] = set()
    judged: list[Judged] = []
    pending: list[Landing] = []
    oldest_first = sorted(snapshot.pods.values(), key=lambda p: (_created(p.created), p.key))
    for landing in sorted(landings, key=lambda item: item.evicted_at):
        hint = landing.hint
        # A StatefulSet's replacement has the evicted pod's own name: that one, when several
        # were made in one second, else the oldest.
        namesake = snapshot.pods.get(landing.evicted_pod)
        replacement = (
            namesake
            if _made_since(namesake, landing, claimed)
            else next((pod for pod in oldest_first if _made_since(pod, landing, claimed)), None)
        )
        if replacement is not None and replacement.node_name in snapshot.nodes:
            claimed.add(replacement.key)
            labels = snapshot.nodes[replacement.node_name].labels
            inside = all(labels.get(key) == value for key, value in hint.domain.items())
            result: LandingResult = "landed-in-target" if inside else "landed-elsewhere"
            judged.append(Judged(landing, result, replacement.key))
        elif now >= hint.expires:
            if replacement is not None:
                claimed.add(replacement.key)
            judged.append(Judged(landing, "not-scheduled", replacement.key if replacement else ""))
        else:
            if replacement is not None:
                claimed.add(replacement.key)
            pending.append(landing)
    return judged, pending
