"""What objects of every kind are read by alike: their parts, their controller, their conditions.
Apart so the parser's readers of each kind share them, and the surge client reads the pods it
lists with the same rules."""

from __future__ import annotations

from rebalancer.cluster.wire import (
    NO_METADATA,
    NO_SPEC,
    NO_STATUS,
    WireMetadata,
    WireObject,
    WireSpec,
    WireStatus,
)


def parts(item: WireObject) -> tuple[WireMetadata, WireSpec, WireStatus]:
    return item.metadata or NO_METADATA, item.spec or NO_SPEC, item.status or NO_STATUS


def controller_of(metadata: WireMetadata) -> tuple[str, str] | None:
    for owner in metadata.ownerReferences or ():
        if owner.controller:
            return owner.kind, owner.name
    return None


def condition_true(status: WireStatus, kind: str) -> bool:
    for condition in status.conditions or ():
        if condition.type == kind and condition.status == "True":
            return True
    return False
