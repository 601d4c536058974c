"""Leader election on a coordination.k8s.io Lease, with the kubernetes client's own elector.

With two replicas only the lease holder acts; the other waits and takes over within the lease
duration when the holder dies. Losing the lease ends the process, so that it restarts as a clean
standby (as kube-controller-manager does), and the controller stops sending evictions at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubernetes.client import ApiClient, CoordinationV1Api
from kubernetes.leaderelection.electionconfig import Config
from kubernetes.leaderelection.leaderelection import LeaderElection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from rebalancer.waiting import wait_set

LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2
EXIT_LOST_LEADERSHIP = 1
_log = logging.getLogger(__name__)


def run_as_candidate(
    api: ApiClient,
    *,
    lease: tuple[str, str],
    identity: str,
    lead: Callable[[threading.Event], None],
    stop: threading.Event,
) -> int:
    """Block until `stop` is set or the lease (namespace, name) is lost; returns the exit code.
    While leading, `lead(stop)` runs (the controller's loop) and must return once `stop` is set;
    the process then waits for it, so a running cycle ends before the process does."""
    namespace, name = lease
    lock = LeaseLock(name, namespace, identity)  # type: ignore[no-untyped-call]
    lock.api_instance = CoordinationV1Api(api)  # its default client has no configuration
    lost = threading.Event()
    stopped = threading.Event()

    started = threading.Event()

    def leading() -> None:
        _log.info("leading as %s", identity)
        started.set()
        try:
            lead(stop)
        finally:
            stopped.set()

    def lose() -> None:
        _log.error("lost the lease %s/%s; stopping", namespace, name)
        lost.set()
        stop.set()

    config = Config(  # type: ignore[no-untyped-call]
        lock, LEASE_SECONDS, RENEW_DEADLINE_SECONDS, RETRY_SECONDS, leading, lose
    )
    election = LeaderElection(config)  # type: ignore[no-untyped-call]
    threading.Thread(target=election.run, name="leader-election", daemon=True).start()
    wait_set(stop)  # in the main thread: its SIGTERM handler sets `stop`
    if started.is_set():
        wait_set(stopped)  # let the running cycle end before the process does
    return EXIT_LOST_LEADERSHIP if lost.is_set() else 0
