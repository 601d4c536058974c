"""The sections of the modes that move pods: how evict mode judges a move, and how migrate mode
steers replacements, by eviction or by a surge."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rebalancer.strict import Strict


class Surge(Strict):
    """Make-before-break for Deployments (`migrate.method: surge`): scale up by one with the new
    pod steered to the target, wait for it to be Ready there, give the old pod the lowest
    pod-deletion-cost, scale back. Ready replicas never fall below the desired count."""

    ready_timeout_seconds: Annotated[float, Field(gt=0)] = 300
    """How long the new pod has to be Ready in the target; then the surge is undone (scaled
    back, the old pod kept) and the workload backs off as after a missed landing."""
    single_replica: bool = True
    """Single-replica Deployments may be moved by surge, whatever `protections.evict_single_
    replica` says: the old pod serves until the new one is Ready, so there is no downtime."""
    zero_disruption_pdb: bool = True
    """Deployments whose PDB allows no disruption (minAvailable equal to the replicas, the
    usual guard of a single replica) may be moved by surge: nothing is evicted, and as many
    pods are Ready throughout as the PDB asks for. False: a surge needs a disruption allowed,
    for PDBs set to zero as a freeze."""
    autoscaled: bool = False
    """Deployments a HorizontalPodAutoscaler scales may be surged. Off: the autoscaler may undo
    the extra replica, or scale while the surge holds it, and the surge would then be undone."""


class Evict(Strict):
    """How evict mode, which steers nothing, judges a move before it is made."""

    predict_landing: bool = True
    """Evict a pod only where kube-scheduler's default profile would put its replacement in the
    target: more than half of the nodes it scores highest lie there (least allocated, the
    default zone and host spreading, the pod's own rules). Elsewhere the eviction is a
    disruption for nothing, or for worse. Turn it off where the scheduler scores otherwise (a
    profile of your own, MostAllocated, another scheduler): moves are then judged only by where
    replacements land, and misses back a workload off."""


class Migrate(Strict):
    """How migrate mode steers replacements (through placement hints and the webhook)."""

    method: Literal["evict", "surge"] = "evict"
    """`evict`: evict the pod, then steer its replacement to the target. `surge`: for
    Deployments, start the new pod at the target first and remove the old one once it is
    Ready there (see `surge`); StatefulSets and Jobs are still evicted. A dry run previews
    the method: the scale-up goes out as a server-side dry run."""
    surge: Surge = Surge()
    """How a surge waits, and which Deployments it may move (with `method: surge`)."""

    hint_ttl_seconds: Annotated[float, Field(gt=0)] = 300
    """A hint not used by then is dropped, so it never steers an unrelated later pod."""
    required: bool = False
    """Required node affinity lands surely but can leave a pod Pending if the room is taken."""
    weight: Annotated[int, Field(ge=1, le=100)] = 100
    """Weight of the preferred node affinity term."""
    predict_landing: bool = True
    """Move a pod only where kube-scheduler's default profile, the hint's preferred affinity
    among its scores, would put the replacement in the target: more than half of the nodes it
    scores highest lie there. The hint is one score among several (spreading, least
    allocated), and a target it loses is a miss: a disruption for nothing, then a backoff.
    Moot with `required`. Turn it off where the scheduler scores otherwise, as
    `evict.predict_landing`."""
