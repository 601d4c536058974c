"""What a placement costs: the protocol both cost models keep, and the pricing of a move.

The planner, the strategies and the reports must agree to the last digit on what a placement
costs, so a gain the planner counts is exactly the drop in the figure: all of them read cost
through this protocol.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import NamedTuple, Protocol, Self

import msgspec
import networkx as nx

from rebalancer.cluster.model import Snapshot
from rebalancer.cluster.topology import Domain, DomainKey, Location, Topology
from rebalancer.cost.figures import Figures, Price, Tally


class Worth(msgspec.Struct, frozen=True, gc=False):
    """A Struct, cheap to make: the planner judges candidates in batches of thousands."""

    gain: float
    """Weighted cost saved."""
    cost: float
    """What the moving pods cost now: a gain is judged as a share of it."""


class HeavyDomain(NamedTuple):
    """A domain holding much of a pod's traffic, as split-peers looks for them."""

    pod: str
    level: int
    weight: float
    """The pod's traffic to peers in the domain."""
    share: float
    """Of the pod's traffic that a move there can change: that within the narrowest domain
    holding both the pod and this one (`within`). A move inside its own rack changes only what
    the pod sends within the rack, so a host holding most of that is worth proposing even when
    the rest of the pod's traffic leaves the rack. Only within domains that hold at least as
    much of its traffic as any other at their level, and whose wider ones do too: where another
    holds more, the pod is likely to move out of it later, and a move inside it first would be
    undone."""
    key: DomainKey
    gain: float
    """What moving the pod alone into the domain saves."""
    within: int
    """The level of that narrowest domain; -1 when there is none and the share is of all the
    pod's traffic."""


class CostModel(Protocol):
    """Pod locations and the cost they imply; the planner moves pods in a copy to predict the
    result. Pod traffic is held pair by pair (PodCostModel), workload traffic workload pair by
    workload pair (WorkloadCostModel), to the same figures: strategies and the planner read both
    alike."""

    topology: Topology
    locations: dict[str, Location]
    """Every pod with traffic, where it is (or, once moved, what is known of where it goes)."""
    moved: dict[str, Domain]

    @property
    def peers(self) -> Mapping[str, Mapping[str, float]]:
        """Pod -> peer -> rate."""

    @property
    def graph(self) -> nx.Graph[str]:
        """The graph in networkx, for its algorithms (Louvain)."""

    def edge_count(self) -> int: ...

    def gain(self, pod: str, target: Domain) -> float:
        """Cost saved by moving `pod` into `target`, assuming nothing below the target's level."""

    def gains(self, pod: str, targets: Sequence[Domain]) -> list[float]:
        """`gain` into each of the targets, as one pass would work them out."""

    def pod_cost(self, pod: str, location: Location | None = None) -> float:
        """What the pod's traffic costs where it is, or at `location`."""

    def worth(self, targets: Mapping[str, Domain]) -> Worth:
        """What moving these pods at once saves, and what they cost now."""

    def joint_gain(self, targets: Mapping[str, Domain]) -> float:
        """Cost saved by moving several pods at once; traffic between two of them counts once."""

    def worths_alone(self, moves: Sequence[tuple[str, Domain]]) -> list[Worth | None]:
        """`worth` of each move of one pod on this model as it is, for many at once; None where
        it is left to `worth`."""

    def heavy_domains(
        self,
        levels: range,
        min_share: float,
        *,
        above_home: bool = True,
        heaviest: int | None = None,
    ) -> list[HeavyDomain]:
        """Every pod and domain at these levels holding at least `min_share` of the pod's
        traffic (see `HeavyDomain.share`), and (with `above_home`) more of it than the pod's own
        domain there; with `heaviest`, only that many at each level, those holding the most
        traffic."""

    def group_traffic(self, members: Collection[str]) -> tuple[float, float]:
        """The traffic among these pods, each pair once, and between them and all others."""

    def untouched(self, pod: str) -> bool:
        """Whether the pod's cost is as it was before any move in this model."""

    def move(self, pod: str, target: Domain) -> None: ...

    def copy(self) -> Self:
        """A model to move pods in, leaving this one as it is."""

    def tally(self, snapshot: Snapshot) -> Tally:
        """The sums behind the figures, over every pair."""

    def retally(self, tally: Tally, original: Self) -> Tally:
        """`tally` of the `original` model, changed to this copy of it by re-counting only what
        the moves since changed: a plan's figures without a second pass over the whole graph."""

    def figures(self, snapshot: Snapshot, price: Price) -> Figures: ...


class PodPricing(ABC):
    """A move's gain and worth, the same for both models, from what one pod costs."""

    topology: Topology

    @abstractmethod
    def pod_cost(self, pod: str, location: Location | None = None) -> float:
        """What the pod's traffic costs where it is, or at `location`."""

    @abstractmethod
    def _several_gain(self, targets: Mapping[str, Domain]) -> float:
        """`joint_gain` of two pods or more."""

    def gain(self, pod: str, target: Domain) -> float:
        """Cost saved by moving `pod` into `target`, assuming nothing below the target's level."""
        return self.pod_cost(pod) - self.pod_cost(pod, self.topology.location_within(target))

    def gains(self, pod: str, targets: Sequence[Domain]) -> list[float]:
        """`gain` into each of the targets, the pod's cost where it is worked out once."""
        now = self.pod_cost(pod)
        within = self.topology.location_within
        return [now - self.pod_cost(pod, within(target)) for target in targets]

    def worth(self, targets: Mapping[str, Domain]) -> Worth:
        """What moving these pods saves, and what they cost now, from one pass when one pod moves:
        the planner judges every candidate by both."""
        if len(targets) == 1:
            ((pod, target),) = targets.items()
            now = self.pod_cost(pod)
            return Worth(now - self.pod_cost(pod, self.topology.location_within(target)), now)
        return Worth(self.joint_gain(targets), sum(self.pod_cost(pod) for pod in targets))

    def joint_gain(self, targets: Mapping[str, Domain]) -> float:
        """Cost saved by moving several pods at once; traffic between two of them counts once."""
        if len(targets) == 1:
            ((pod, target),) = targets.items()
            return self.gain(pod, target)
        return self._several_gain(targets)


class PeerView(Mapping[str, Mapping[str, float]]):
    """Pod -> peer -> rate, each pod's peers worked out only when read: both models hold their
    traffic in another shape, and a million pairs spelled out as dicts took seconds to build."""

    def __init__(self, pods: Collection[str], peers_of: Callable[[str], dict[str, float]]) -> None:
        self._pods = pods
        self._peers_of = peers_of

    def __getitem__(self, pod: str) -> dict[str, float]:
        return self._peers_of(pod)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pods)

    def __len__(self) -> int:
        return len(self._pods)
