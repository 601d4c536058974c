"""Quantities to Resources, for the parser: a node's allocatable and a pod's effective requests,
with the Reader that names where a bad value came from. Apart, as nodes and pods share them."""

from __future__ import annotations

from rebalancer.cluster.model import Resources
from rebalancer.cluster.quantity import REFUSED, whole_units
from rebalancer.cluster.wire import WireContainer, WireQuantities, WireSpec
from rebalancer.errors import InputError


class Reader:
    """Names where in the input a value came from, for the one-line error when it is bad."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def whole(self, path: str, raw: str | int | float, scale: int) -> int:
        try:
            return whole_units(raw, scale)
        except REFUSED:
            raise self._refused(path, raw) from None

    def request(
        self, field: str, index: int, resource: str, raw: str | int | float, scale: int
    ) -> int:
        """`whole`, for a container's request, its path put together only for an error."""
        try:
            return whole_units(raw, scale)
        except REFUSED:
            path = f"spec.{field}[{index}].resources.requests.{resource}"
            raise self._refused(path, raw) from None

    def _refused(self, path: str, raw: object) -> InputError:
        return InputError(f"{self.origin}: {path}: invalid quantity {raw!r}")


_NAMED = frozenset({"cpu", "memory", "pods"})
"""The resources Resources has a field for; every other one is a scalar."""


def resources(reader: Reader, path: str, values: WireQuantities) -> Resources:
    def whole(resource: str, scale: int) -> int:
        raw = values.get(resource)
        return 0 if raw is None else reader.whole(f"{path}.{resource}", raw, scale)

    scalars = tuple(
        sorted(
            (name, reader.whole(f"{path}.{name}", raw, 1))
            for name, raw in values.items()
            if name not in _NAMED
        )
    )
    return Resources(
        whole("cpu", 1000),
        whole("memory", 1),
        whole("pods", 1),
        tuple((name, amount) for name, amount in scalars if amount),
    )


def pod_requests(reader: Reader, spec: WireSpec) -> Resources:
    """Effective requests, as the scheduler counts them: containers summed, init containers max,
    for every resource. Counted in plain integers, one Resources at the end: a Resources per
    container and per sum took a third of the time to read a pod."""
    cpu = memory = 0
    scalars: dict[str, int] = {}
    for index, container in enumerate(spec.containers or ()):
        container_cpu, container_memory = _cpu_and_memory(reader, "containers", index, container)
        cpu, memory = cpu + container_cpu, memory + container_memory
        for name, amount in _scalar_requests(reader, "containers", index, container):
            scalars[name] = scalars.get(name, 0) + amount
    for index, container in enumerate(spec.initContainers or ()):
        init_cpu, init_memory = _cpu_and_memory(reader, "initContainers", index, container)
        cpu, memory = max(cpu, init_cpu), max(memory, init_memory)
        for name, amount in _scalar_requests(reader, "initContainers", index, container):
            scalars[name] = max(scalars.get(name, 0), amount)
    if not scalars:
        return Resources(cpu, memory, 1)
    return Resources(cpu, memory, 1, tuple(sorted((n, a) for n, a in scalars.items() if a)))


def _cpu_and_memory(
    reader: Reader, field: str, index: int, container: WireContainer
) -> tuple[int, int]:
    requests = container.resources.requests if container.resources else None
    if not requests:
        return 0, 0
    cpu, memory = requests.get("cpu"), requests.get("memory")
    return (
        reader.request(field, index, "cpu", cpu, 1000) if cpu is not None else 0,
        reader.request(field, index, "memory", memory, 1) if memory is not None else 0,
    )


def _scalar_requests(
    reader: Reader, field: str, index: int, container: WireContainer
) -> list[tuple[str, int]]:
    """A container's requests of resources other than CPU and memory, such as GPUs."""
    requests = container.resources.requests if container.resources else None
    if not requests or all(name in _NAMED for name in requests):
        return []
    return [
        (name, reader.request(field, index, name, raw, 1))
        for name, raw in requests.items()
        if name not in _NAMED
    ]
