"""Cluster input refused, with the object named: fields of the wrong type, and data no API
server hands over, so that nothing is planned on a picture that cannot be true (a handmade or
merged snapshot file that lists a node or a pod twice, or two pods under one UID: which one would
an eviction's precondition name?)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import msgspec

from rebalancer.cluster.model import Pod, Snapshot
from rebalancer.errors import InputError, where_and_what


def refuse_duplicates(
    origin: str, snapshot: Snapshot, node_names: Sequence[str], pods: Collection[Pod]
) -> None:
    """After reading `node_names` and `pods` into `snapshot`, whose dicts keep one of each
    name: a count that does not match is a name listed twice, looked for only then, so the usual
    case costs one pass over the UIDs."""
    if len(snapshot.nodes) != len(node_names):
        raise InputError(f"{origin}: Node {_repeated(node_names)} is listed twice")
    if len(snapshot.pods) != len(pods):
        raise InputError(f"{origin}: Pod {_repeated([pod.key for pod in pods])} is listed twice")
    uids = [pod.uid for pod in pods if pod.uid]
    if len(set(uids)) != len(uids):
        owner: dict[str, str] = {}
        for pod in pods:
            other = owner.setdefault(pod.uid, pod.key) if pod.uid else pod.key
            if other != pod.key:
                raise InputError(f"{origin}: Pods {other} and {pod.key} share uid {pod.uid}")


def stray_pods(snapshot: Snapshot) -> dict[str, str]:
    """Pods bound to a node the snapshot does not list, by key, with that node: a snapshot file
    cut down by hand, or a node deleted while its pods are still being removed. They are never
    moved (nothing is known of where they run) and are said in warnings; refusing the whole
    snapshot for them would stop the controller during every node deletion."""
    return {
        key: pod.node_name
        for key, pod in snapshot.pods.items()
        if pod.node_name and pod.node_name not in snapshot.nodes
    }


def _repeated(names: Sequence[str]) -> str:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            return name
        seen.add(name)
    return "?"


def misread(error: msgspec.ValidationError, origin: str, items: list[Any]) -> InputError:
    """The error about a List's field, with the object it is in named as in every other error
    about one: "origin: items[3] (Pod web-1): metadata.name: expected `str`, got `int`"."""
    path, problem = where_and_what(error)
    found = re.fullmatch(r"\.items\[(\d+)\]\.?(.*)", path)
    if found is None:
        return InputError(f"{origin}: {path.lstrip('.') or 'the List'}: {problem}")
    index = int(found.group(1))
    return item_error(f"{origin}: items[{index}]", items[index], found.group(2), problem)


def item_error(where: str, item: Any, field_path: str, problem: str) -> InputError:
    if not field_path:
        return InputError(f"{where}: {problem}")
    return InputError(f"{where}{_naming(item)}: {field_path}: {problem}")


def _naming(item: Any) -> str:
    """ " (Pod web-1)" for an item whose kind and name are readable, else nothing."""
    if not isinstance(item, Mapping):
        return ""
    metadata = item.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    kind = item.get("kind")
    named = [text for text in (kind, name) if isinstance(text, str) and text]
    return f" ({' '.join(named)})" if named else ""
