"""What must hold while the controller acts on a live scenario, checked from the API server's
view rather than the controller's: no PodDisruptionBudget broken at any moment, every workload
back to its replicas, and hard spread constraints still met.

A background thread polls the pods, because a broken budget can last well under a second: an
extra eviction is followed within moments by a kwok replacement that is Ready again.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, watch

from harness.cluster import is_ready
from rebalancer.clients.kube_api import list_raw, list_with_version
from rebalancer.errors import SourceUnavailableError
from rebalancer.planning.state import RecentMove
from rebalancer.simulator.measures import domain_counts
from rebalancer.simulator.scenario import LEVEL_LABELS, Scenario


def undoing_moves(
    moves: Sequence[tuple[RecentMove, Mapping[str, str]]],
    cooldown_seconds: float,
    *,
    earlier_cycles_only: bool = False,
) -> list[str]:
    """Moves (each with the full location its pod left) that undo an earlier move of the same
    workload within the cooldown: the bounce that must never happen, whatever the traffic does.
    `earlier_cycles_only`: moves made at the same time are one decision (a job's ranks swapping
    racks), not one undoing the other."""
    ordered = sorted(moves, key=lambda pair: pair[0].at)
    found = []
    for index, (later, origin) in enumerate(ordered):
        for earlier, _origin in ordered[:index]:
            if earlier_cycles_only and earlier.at == later.at:
                continue
            recent = later.at - earlier.at < cooldown_seconds
            same = earlier.workload == later.workload
            if recent and same and earlier.undone_by(dict(origin), later.entered):
                found.append(
                    f"{later.workload}: {later.left} -> {later.entered} at {later.at:g} "
                    f"undoes {earlier.left} -> {earlier.entered} at {earlier.at:g}"
                )
    return found


def returning_moves(moves: Sequence[tuple[RecentMove, Mapping[str, str]]]) -> list[str]:
    """Moves (each with the full location its pod left) that put a pod back into a domain an
    earlier move of its workload took one out of, at any distance in time: back and forth."""
    ordered = sorted(moves, key=lambda pair: pair[0].at)
    found = []
    for index, (later, origin) in enumerate(ordered):
        for earlier, _origin in ordered[:index]:
            same = earlier.workload == later.workload and earlier.at < later.at
            if same and earlier.puts_back(dict(origin), later.entered):
                found.append(
                    f"{later.workload}: {later.left} -> {later.entered} at {later.at:g} "
                    f"returns where {earlier.left} -> {earlier.entered} at {earlier.at:g} left"
                )
                break
    return found


def crowded_moves(scenario: Scenario, moves: list[RecentMove], cooldown: float) -> list[str]:
    """Workloads that moved more pods within one cooldown than they have replicas."""
    replicas = {f"{w.kind}/{w.key}": w.replicas for w in scenario.workloads}
    found = []
    for move in moves:
        window = [
            m for m in moves if m.workload == move.workload and 0 <= m.at - move.at < cooldown
        ]
        if len(window) > replicas.get(move.workload, 0):
            found.append(f"{move.workload}: {len(window)} moves from {move.at:.0f}")
    return found


def ready_by_workload(scenario: Scenario, pods: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The scenario's workloads (namespace/name) -> their Ready pods, as raw JSON."""
    ready: dict[str, list[Any]] = {w.key: [] for w in scenario.workloads}
    for pod in pods:
        metadata = pod["metadata"]
        key = f"{metadata['namespace']}/{(metadata.get('labels') or {}).get('app', '')}"
        if key in ready and is_ready(pod):
            ready[key].append(pod)
    return ready


@dataclass
class InvariantWatch:
    """Watches one scenario's workloads; start it once every replica is Ready."""

    scenario: Scenario
    api: client.ApiClient
    poll_seconds: float = 0.2
    pdb_violations: list[str] = field(default_factory=list)
    """One line per moment a budget was seen broken: workload, Ready pods and the promise."""
    polls: int = 0
    """Polls that completed, so a watch that never saw the cluster cannot pass for a clean one."""
    failed_polls: list[str] = field(default_factory=list)
    uids_seen: set[str] = field(default_factory=set)
    """Every UID of a scenario pod a poll has seen: the pods replaced during a run are those
    gone by its end."""
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def pods(self) -> list[dict[str, Any]]:
        core = client.CoreV1Api(self.api)
        return list_raw("Pod", core.list_pod_for_all_namespaces)

    def check_budgets(self) -> None:
        pods = self.pods()
        namespaces = {workload.namespace for workload in self.scenario.workloads}
        self.uids_seen |= {
            pod["metadata"]["uid"] for pod in pods if pod["metadata"]["namespace"] in namespaces
        }
        ready = ready_by_workload(self.scenario, pods)
        for workload in self.scenario.workloads:
            promised = workload.promised_ready
            if len(ready[workload.key]) < promised:
                self.pdb_violations.append(
                    f"{workload.key}: {len(ready[workload.key])} Ready, PDB promises {promised}"
                )

    def spread_violations(self) -> list[str]:
        """Hard spread constraints the Ready pods break now, counting every domain with nodes."""
        core = client.CoreV1Api(self.api)
        nodes = {
            node["metadata"]["name"]: node["metadata"].get("labels") or {}
            for node in list_raw("Node", core.list_node)
        }
        ready = ready_by_workload(self.scenario, self.pods())
        broken = []
        for workload in self.scenario.workloads:
            for spread in (s for s in workload.spread if s.hard):
                counts = domain_counts(
                    LEVEL_LABELS[spread.level],
                    nodes.values(),
                    (nodes[pod["spec"]["nodeName"]] for pod in ready[workload.key]),
                )
                skew = max(counts.values()) - min(counts.values()) if counts else 0
                if skew > spread.max_skew:
                    broken.append(
                        f"{workload.key}: {spread.level} skew {skew} > {spread.max_skew} "
                        f"({dict(sorted(counts.items()))})"
                    )
        return broken

    def start(self) -> InvariantWatch:
        self._thread = threading.Thread(target=self._run, name="invariant-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_seconds):
            try:
                self.check_budgets()
            except SourceUnavailableError as error:  # list_raw's one error for any API failure
                self.failed_polls.append(f"{type(error).__name__}: {error}".splitlines()[0])
            else:
                self.polls += 1


@dataclass
class ReadyWatcher:
    """Each Deployment of the scenario's Ready pods (bound, Running, Ready, not terminating),
    kept from a pod watch and sampled every `period` seconds: a surge must never leave fewer
    than the desired replicas serving, even for a moment, and an eviction shows its dip."""

    scenario: Scenario
    api: client.ApiClient
    period: float = 0.05
    samples: int = 0
    below: dict[str, int] = field(default_factory=dict)
    """Deployment (namespace/name) -> samples with fewer Ready pods than its replicas."""
    least: dict[str, int] = field(default_factory=dict)
    """Deployment -> the fewest Ready pods any sample saw."""
    most: dict[str, int] = field(default_factory=dict)
    """Deployment -> the most Ready pods any sample or watch event saw (a surge's overlap shows
    here): counted at each event too, since an overlap shorter than the period, or one whose
    events a busy test process handles together, falls between samples."""
    relists: int = 0
    """Times the watch ended in an error and the pods were listed again."""
    _ready: dict[str, str] = field(default_factory=dict)
    """UID of each Ready pod of a watched Deployment -> its Deployment."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> ReadyWatcher:
        deployments = {w.key for w in self.scenario.workloads if w.kind == "Deployment"}
        version = self._relist(deployments)
        watching = threading.Thread(
            target=self._watch, args=(deployments, version), name="ready-watch", daemon=True
        )
        sampling = threading.Thread(target=self._sample, args=(deployments,), daemon=True)
        self._threads = [watching, sampling]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop; a thread that died would make the samples mean nothing, so that raises."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        assert self.samples > 0, "the Ready watcher took no sample"

    def figures(self) -> tuple[int, dict[str, int], dict[str, int], int]:
        """Samples, samples below desired, the fewest Ready and the relists, as one copy."""
        with self._lock:
            return self.samples, dict(self.below), dict(self.least), self.relists

    def _relist(self, deployments: set[str]) -> str:
        core = client.CoreV1Api(self.api)
        pods, version = list_with_version("Pod", core.list_pod_for_all_namespaces)
        ready = {}
        for pod in pods:
            key = self._workload(pod, deployments)
            if key is not None and is_ready(pod):
                ready[pod["metadata"]["uid"]] = key
        with self._lock:
            self._ready = ready
        return version

    @staticmethod
    def _workload(pod: dict[str, Any], deployments: set[str]) -> str | None:
        metadata = pod["metadata"]
        key = f"{metadata['namespace']}/{(metadata.get('labels') or {}).get('app', '')}"
        return key if key in deployments else None

    def _see(self, pod: dict[str, Any], deployments: set[str], *, deleted: bool) -> None:
        key = self._workload(pod, deployments)
        if key is None:
            return
        uid = pod["metadata"]["uid"]
        with self._lock:
            if not deleted and is_ready(pod):
                self._ready[uid] = key
            else:
                self._ready.pop(uid, None)
            count = sum(1 for known in self._ready.values() if known == key)
            self.most[key] = max(self.most.get(key, count), count)

    def _watch(self, deployments: set[str], version: str) -> None:
        core = client.CoreV1Api(self.api)
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    core.list_pod_for_all_namespaces,
                    resource_version=version,
                    timeout_seconds=5,
                    deserialize=False,
                )
                for event in stream:
                    if event["type"] == "ERROR":  # 410 Gone, or another: list again
                        raise ValueError(str(event.get("object")))
                    pod = event["object"]
                    version = pod["metadata"].get("resourceVersion", version)
                    self._see(pod, deployments, deleted=event["type"] == "DELETED")
                    if self._stop.is_set():
                        break
            except Exception:  # whatever ended the watch: the pods are listed again
                self.relists += 1
                while not self._stop.is_set():
                    try:
                        version = self._relist(deployments)
                        break
                    except SourceUnavailableError:
                        self._stop.wait(0.5)

    def _sample(self, deployments: set[str]) -> None:
        desired = {w.key: w.replicas for w in self.scenario.workloads if w.key in deployments}
        while not self._stop.wait(self.period):
            with self._lock:
                counts = dict.fromkeys(deployments, 0)
                for key in self._ready.values():
                    counts[key] += 1
                self.samples += 1
                for key, count in counts.items():
                    self.least[key] = min(self.least.get(key, count), count)
                    self.most[key] = max(self.most.get(key, count), count)
                    if count < desired[key]:
                        self.below[key] = self.below.get(key, 0) + 1
