"""The heavy-domain search of the workload cost model (`WorkloadCostModel.heavy_domains`).

Apart from the model, which holds what a placement costs: this is one search over every workload
and domain at once, in numpy, with bookkeeping of its own (`_Sent`), that reads the model's
counts and asks it only for a move's gain.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from typing import Protocol, cast

import numpy as np

from rebalancer.arrays import Floats, Indices, group_sums, spans
from rebalancer.cluster.topology import Domain, DomainKey, Location, first_split
from rebalancer.cost.model import HeavyDomain
from rebalancer.cost.workload_counts import DomainCounts, HeldTraffic, WorkloadPeers


class CountedWorkloads(Protocol):
    """What the search reads of the model: who talks to whom, where each pod is, how many of
    each workload's pods each domain holds, and what moving a pod gains."""

    workloads: WorkloadPeers
    locations: dict[str, Location]
    counts: list[DomainCounts]

    def gain(self, pod: str, target: Domain) -> float: ...


def find_heavy_domains(
    model: CountedWorkloads,
    held_at: dict[int, HeldTraffic],
    levels: range,
    min_share: float,
    *,
    above_home: bool,
    heaviest: int | None,
) -> list[HeavyDomain]:
    """Per workload: a domain holds the same traffic of each of its pods, but for the pod's
    own domain, which holds the pod itself too. With `heaviest`, the workloads' domains are
    taken heaviest first, so the rows are made only until there are enough."""
    rates, sizes = model.workloads.rates, [len(pods) for pods in model.workloads.members]
    source = np.repeat(np.arange(len(rates)), [len(peers) for peers in rates])
    peer = np.fromiter(chain.from_iterable(rates), np.int64, len(source))
    rate = np.fromiter(chain.from_iterable(peers.values() for peers in rates), float)
    total = group_sums(source, rate * (np.array(sizes)[peer] - (peer == source)), len(rates))
    within = np.array([peers.get(workload, 0.0) for workload, peers in enumerate(rates)])

    def held_once(level: int) -> HeldTraffic:
        if level not in held_at:
            held_at[level] = _held(model, level, source, peer, rate)
        return held_at[level]

    sent = _Sent(held_once, model, total, within)
    found: list[HeavyDomain] = []
    for level in levels:
        held = sent.held(level)
        heavy = np.flatnonzero(held.weight >= min_share * sent.least_scope(level))
        if heaviest is not None:
            heavy = heavy[np.argsort(-held.weight[heavy], kind="stable")]
        at_level: list[HeavyDomain] = []
        for workload, number, weight in zip(
            held.workload[heavy].tolist(),
            held.domain[heavy].tolist(),
            held.weight[heavy].tolist(),
            strict=True,
        ):
            wanted = None if heaviest is None else heaviest - len(at_level)
            if wanted == 0:
                break  # every row still to come holds no more than those found
            at_level += _heavy_for_pods(
                model,
                workload,
                level,
                (held.keys[number], weight),
                sent,
                min_share=min_share,
                above_home=above_home,
                most=wanted,
            )
        found += at_level
    return found


def _held(
    model: CountedWorkloads, level: int, source: Indices, peer: Indices, rate: Floats
) -> HeldTraffic:
    """The traffic each workload sends each domain at `level`: per pair of workloads, the
    rate times the peer's count in every domain where it has pods, summed in numpy rather
    than in a loop over the pairs."""
    counts = [model.counts[workload][level] for workload in range(len(model.counts))]
    keys: dict[DomainKey, int] = {}
    entries = np.fromiter(map(len, counts), np.int64, len(counts))
    domain = np.fromiter(
        (keys.setdefault(key, len(keys)) for at_level in counts for key in at_level),
        np.int64,
        int(entries.sum()),
    )
    count = np.fromiter(chain.from_iterable(c.values() for c in counts), float, len(domain))
    first_entry = np.cumsum(entries) - entries
    pair, entry = spans(first_entry[peer], entries[peer])  # each peer's domains in turn
    width = max(len(keys), 1)
    sums, position = np.unique(source[pair] * width + domain[entry], return_inverse=True)
    weight = group_sums(position, rate[pair] * count[entry], len(sums))
    return HeldTraffic(sums // width, sums % width, weight, list(keys))


def _heavy_for_pods(
    model: CountedWorkloads,
    workload: int,
    level: int,
    heavy: tuple[DomainKey, float],
    sent: _Sent,
    *,
    min_share: float,
    above_home: bool,
    most: int | None,
) -> list[HeavyDomain]:
    """The workload's pods for which the `heavy` domain, with the traffic it holds, is
    another than their own, holding `min_share` of what they send within the narrowest
    domain holding both (and, with `above_home`, more than their own); `most` of them at
    most, as all hold the same traffic there. Only the pods in the widest domain holding
    the `heavy` one where some could are looked at: that is mostly a rack or a zone of a
    workload spread over the cluster."""
    key, weight = heavy
    found = []
    for pod in sent.could_hold(workload, key, weight, min_share):
        own = model.locations[pod][: level + 1]
        if None in own or key == own:
            continue  # a pod in an unknown domain holds nothing; its own is no move
        scope, within = sent.scope(workload, ()), -1
        for wider in range(first_split(own, key)):  # on while the pod stays where it belongs
            home = cast(DomainKey, own[: wider + 1])
            local = sent.scope(workload, home)
            if local < sent.most_elsewhere(workload, home):
                break
            scope, within = local, wider
        if weight < min_share * scope:
            continue
        if weight > sent.scope(workload, cast(DomainKey, own)) or not above_home:
            gain = model.gain(pod, Domain(level, key))
            found.append(HeavyDomain(pod, level, weight, weight / scope, key, gain, within))
            if len(found) == most:
                break
    return found


class _Sent:
    """What a workload's pods send each domain, per level, as `find_heavy_domains` asks for
    it: the share of a pod's traffic a domain holds is of what the pod sends within a wider
    domain holding both (`HeavyDomain.share`)."""

    def __init__(
        self,
        held: Callable[[int], HeldTraffic],
        model: CountedWorkloads,
        total: Floats,
        within: Floats,
    ) -> None:
        self.held = held
        self._model = model
        self._total, self._within = total, within
        self._by_domain: dict[tuple[int, int], dict[DomainKey, float]] = {}
        self._top_two: dict[tuple[int, int], list[tuple[float, DomainKey]]] = {}
        self._members_in: dict[tuple[int, int], dict[DomainKey, list[str]]] = {}

    def could_hold(
        self, workload: int, key: DomainKey, weight: float, min_share: float
    ) -> Sequence[str]:
        """The workload's pods in the widest domain holding `key` (all of them: the cluster)
        within which what they send could be so little that `weight` is `min_share` of it.
        Pods outside it send more within any domain they share with `key`."""
        if weight >= min_share * self.scope(workload, ()):
            return self._model.workloads.members[workload]
        for level in range(len(key) - 1):
            wider = key[: level + 1]
            pods = self._members(workload, level).get(wider, [])
            if not pods or weight >= min_share * self.scope(workload, wider):
                return pods
        return []

    def _members(self, workload: int, level: int) -> dict[DomainKey, list[str]]:
        if (workload, level) not in self._members_in:
            members: dict[DomainKey, list[str]] = {}
            for pod in self._model.workloads.members[workload]:
                where = self._model.locations[pod][: level + 1]
                if None not in where:
                    members.setdefault(cast(DomainKey, where), []).append(pod)
            self._members_in[workload, level] = members
        return self._members_in[workload, level]

    def scope(self, workload: int, key: DomainKey) -> float:
        """What a pod of the workload in the domain `key` sends within it (`()`: everywhere)."""
        if not key:
            return float(self._total[workload])
        return self._sent_at(workload, len(key) - 1).get(key, 0.0) - float(self._within[workload])

    def most_elsewhere(self, workload: int, key: DomainKey) -> float:
        """The most a pod of the workload in the domain `key` sends any other domain at its
        level."""
        level = len(key) - 1
        if (workload, level) not in self._top_two:
            self._top_two[workload, level] = heapq.nlargest(
                2, ((weight, domain) for domain, weight in self._sent_at(workload, level).items())
            )
        return next(
            (weight for weight, domain in self._top_two[workload, level] if domain != key), 0.0
        )

    def _sent_at(self, workload: int, level: int) -> dict[DomainKey, float]:
        if (workload, level) not in self._by_domain:
            self._by_domain[workload, level] = self.held(level).by_domain(workload)
        return self._by_domain[workload, level]

    def least_scope(self, level: int) -> Floats:
        """Per row of `held(level)`, the least `scope` any pod of its workload can have for
        its domain: that of the narrowest domain holding it where the workload has pods, which
        every pod sharing only a wider one exceeds. It sifts the rows before each pod's own is
        worked out."""
        held = self.held(level)
        least = self._total[held.workload]
        for wider in range(level):
            outer = self.held(wider)
            numbered = {key: number for number, key in enumerate(outer.keys)}
            holder = np.fromiter(
                (numbered.get(key[: wider + 1], -1) for key in held.keys),
                np.int64,
                len(held.keys),
            )[held.domain]
            width = len(outer.keys) + 1
            present = np.isin(held.workload * width + holder, self._present(wider, numbered, width))
            present &= holder >= 0
            sent = outer.weights(held.workload, holder) - self._within[held.workload]
            least = np.where(present, sent, least)
        return least

    def _present(self, level: int, numbered: Mapping[DomainKey, int], width: int) -> Indices:
        """workload x `width` + domain number, for every domain at `level` where the workload
        has pods."""
        counts = self._model.counts
        return np.fromiter(
            (
                workload * width + numbered[key]
                for workload in range(len(counts))
                for key, count in counts[workload][level].items()
                if count > 0
            ),
            np.int64,
        )
