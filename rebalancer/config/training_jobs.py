"""The jobs section: how non-elastic training jobs are moved, whole and only when a restart
pays."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rebalancer.strict import Strict


class Jobs(Strict):
    """Training jobs (NCCL, MPI, parameter servers) are not elastic: a pod lost restarts the
    whole job, so such a job is moved as one. Its pods are those of a Job or a Kubeflow training
    job (PyTorchJob, MPIJob, TFJob, ...), grouped by the first of `group_labels` they carry, else
    by their owner; it counts as non-elastic when its pods talk to each other (independent
    shards do not), always for the Kubeflow kinds. Pods of any owner annotated
    `topology-rebalancer.io/job: <name>` are one non-elastic job; pods annotated
    `topology-rebalancer.io/elastic: "true"` never are. Gangs another scheduler owns are never
    moved at all. Jobs are moved in migrate mode only (previewed in its dry run), and never
    past their Jobs' backoffLimit: a restart fails every pod of them, or under restartPolicy
    OnFailure the evicted ones, and restarts the containers of the rest."""

    whole: bool = True
    """Move a non-elastic job's pods in one cycle or not at all, counting the disruption once
    against every limit (one per cycle, namespace, workload, zone and node it touches). False:
    its pods are moved one by one, as any other pod, each move restarting the job."""
    group_labels: tuple[str, ...] = ("training.kubeflow.org/job-name", "app.kubernetes.io/part-of")
    """Pod labels naming the job several owners make up (BytePS workers, servers and scheduler
    as three Jobs), first match wins; pods of one namespace with the same value are one job."""
    restart_seconds: Annotated[float, Field(gt=0)] = 600
    """What a restart loses: the time back to the last checkpoint plus the restart itself."""
    remaining_seconds: Annotated[float, Field(gt=0)] = 14400
    """The job's remaining run, assumed when no pod of it carries the annotation
    `topology-rebalancer.io/expected-end` (an RFC 3339 time)."""
    min_interval_seconds: Annotated[float, Field(ge=0)] = 3600
    """A job the rebalancer restarted is not restarted again for this long."""

    def worth_share(self, remaining: float) -> float | None:
        """The least share of the job's weighted traffic a restart must save: the share of its
        remaining run the restart loses. None when the job ends before a restart would pay."""
        if remaining <= self.restart_seconds:
            return None
        return self.restart_seconds / remaining
