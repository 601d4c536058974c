"""A watch-based cache of what a snapshot needs, so large clusters are not listed every cycle.

One reflector per kind lists once, then follows a watch from the list's resourceVersion, as
client-go's informers do. A cycle takes its snapshot from memory. If any watch is broken and not
yet re-listed, the cache says so and the cycle does nothing: a stale picture must not evict.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from rebalancer.clients.kube_api import CONNECT_SECONDS, list_with_version, snapshot_listers
from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.parse import PodsRead, parse_items, prepared
from rebalancer.errors import SourceUnavailableError

WATCH_SECONDS = 300
"""Each watch request ends after this long and is renewed, so a silently dead one is noticed."""
RETRY_SECONDS = 2.0
_log = logging.getLogger(__name__)


def _key(item: dict[str, Any]) -> str:
    metadata = item.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _kept(item: dict[str, Any]) -> Any:
    """Only what a snapshot reads, converted once when the object arrives rather than at every
    cycle, so a cycle builds its snapshot from typed objects. An object that does not convert is
    kept as a dict, minus its managedFields (most of an object's size), and the snapshot names
    its fault as before."""
    (item.get("metadata") or {}).pop("managedFields", None)
    return prepared(item)


class Reflector:
    """List, then watch, one kind; `synced` is set only while the copy is known to be current."""

    def __init__(self, kind: str, api_version: str, lister: Callable[..., Any]) -> None:
        self.kind = kind
        self.api_version = api_version
        self.lister = lister
        self.items: dict[str, Any] = {}
        self.synced = threading.Event()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._watch: watch.Watch | None = None

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                version = self._relist()
                while not self.stopping.is_set():
                    version = self._follow(version)
            except ApiException as error:
                if error.status == 410:  # our version is too old to watch from: list again
                    continue
                self._lost(f"HTTP {error.status}")
            except (SourceUnavailableError, HTTPError, OSError, ValueError) as error:
                self._lost(str(error))

    def _lost(self, why: str) -> None:
        if self.stopping.is_set():
            return  # our own stop() ended the stream
        if self.synced.is_set():
            _log.warning("watch of %s lost (%s); re-listing", self.kind, why)
        self.synced.clear()
        self.stopping.wait(RETRY_SECONDS)

    def _relist(self) -> str:
        items, version = list_with_version(self.kind, self.lister)
        kept = {_key(item): _kept(item) for item in items}
        with self.lock:
            self.items = kept
        self.synced.set()
        return version

    def _follow(self, version: str) -> str:
        self._watch = watch.Watch()
        for event in self._watch.stream(
            self.lister,
            resource_version=version,
            timeout_seconds=WATCH_SECONDS,
            # a quiet watch may send nothing for minutes: the server ends it at WATCH_SECONDS
            _request_timeout=(CONNECT_SECONDS, WATCH_SECONDS + 30),
            allow_watch_bookmarks=True,
            deserialize=False,
        ):
            item = event["object"]
            version = str((item.get("metadata") or {}).get("resourceVersion", version))
            if event["type"] == "BOOKMARK":
                continue
            if event["type"] == "DELETED":
                with self.lock:
                    self.items.pop(_key(item), None)
            else:
                kept = _kept(item)
                with self.lock:
                    self.items[_key(item)] = kept
        return version

    def stop(self) -> None:
        self.stopping.set()
        if self._watch is not None:
            self._watch.stop()


class WatchCache:
    def __init__(self, api: client.ApiClient) -> None:
        self.reflectors = [Reflector(*lister) for lister in snapshot_listers(api)]
        self.threads = [
            threading.Thread(target=r.run, name=f"watch-{r.kind}", daemon=True)
            for r in self.reflectors
        ]
        self.pods_read = PodsRead()

    def start(self) -> WatchCache:
        for thread in self.threads:
            thread.start()
        return self

    def wait_synced(self, timeout: float) -> bool:
        return all(r.synced.wait(timeout) for r in self.reflectors)

    def snapshot(self) -> Snapshot:
        unsynced = [r.kind for r in self.reflectors if not r.synced.is_set()]
        if unsynced:
            raise SourceUnavailableError(f"Kubernetes API: watch cache not synced: {unsynced}")
        items: list[tuple[Any, str]] = []
        for reflector in self.reflectors:
            with reflector.lock:
                items.extend((item, reflector.kind) for item in reflector.items.values())
        return parse_items(items, "Kubernetes API", self.pods_read)

    def stop(self) -> None:
        for reflector in self.reflectors:
            reflector.stop()
