"""The search for where a non-elastic job's pods should go, all moved at once.

Apart from recognising jobs and merging their candidates (planning/jobs.py): a job's own
Kernighan-Lin style search, over a copy of the cost model and the occupancy, capped by the work
it does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from rebalancer.cluster.fit import first_fit
from rebalancer.cluster.topology import Domain
from rebalancer.strategies.framework import ClusterView

_GAIN_TOLERANCE = 1e-9

SEARCH_PASSES = 4
SEARCH_WORK = 50_000
"""Steps judged per job and cycle, at most: work, not seconds, so a plan does not depend on
the machine's load; a 16-rank ring needs a few thousand."""


@dataclass(frozen=True)
class _Step:
    gain: float
    placed: dict[str, tuple[Domain, str]]
    """Pod -> (target, node)."""


def search_job(
    view: ClusterView, movable: list[str], levels: list[int], honor_soft: bool
) -> dict[str, Domain]:
    """Where the job's pods should go, in passes as Kernighan and Lin partition a graph: each
    pass takes the best step of a pod not yet stepped in it, even one that loses, and keeps the
    steps up to the point where the pass had gained most; passes end when one gains nothing.
    Greedy steps alone stop at a ring split over four racks whose fix needs two steps, the
    first of which loses."""
    kept: list[_Step] = []
    work = [0]
    for _pass in range(SEARCH_PASSES):
        search = JobSearch(view, movable, levels, honor_soft, work)
        for step in kept:
            search.apply(step)
        locked: set[str] = set()
        steps: list[_Step] = []
        total, best, best_at = 0.0, 0.0, 0
        while work[0] < SEARCH_WORK:
            taken = search.best_step(locked)
            if taken is None:
                break
            search.apply(taken)
            steps.append(taken)
            locked.update(taken.placed)
            total += taken.gain
            if total > best + _GAIN_TOLERANCE:
                best, best_at = total, len(steps)
        if best_at == 0:
            break
        kept += steps[:best_at]
    return {pod: domain for step in kept for pod, (domain, _node) in step.placed.items()}


class JobSearch:
    """One pass's model of the job: its steps are one pod moved into a domain with room, two
    pods that talk moved there together (a ring's two ranks at the end of a run, neither of
    which gains alone), or two of the job's pods swapped between their domains (ranks reordered
    so each rack holds a contiguous run, which needs no free room). Targets are the domains, at
    the levels the strategies proposed, where a pod's peers run; room a pod leaves is room for
    the others, as all go in one cycle."""

    def __init__(
        self,
        view: ClusterView,
        movable: list[str],
        levels: list[int],
        honor_soft: bool,
        work: list[int],
    ) -> None:
        self.view, self.movable, self.levels, self.honor_soft = view, movable, levels, honor_soft
        self.cost, self.occupancy = view.cost.copy(), view.occupancy.copy()
        self.peers = {pod: view.cost.peers[pod] for pod in movable}
        """Read once: the cost model builds a pod's peers on each read."""
        self.work = work
        """Steps judged so far, shared by the passes."""

    def apply(self, step: _Step) -> None:
        pods = self.view.snapshot.pods
        for pod, (domain, node) in step.placed.items():
            self.cost.move(pod, domain)
            self.occupancy.release(pods[pod])
            self.occupancy.reserve(pods[pod], node)

    def best_step(self, locked: set[str]) -> _Step | None:
        """The step of the most gain (or least loss) among pods not in `locked`."""
        alone: dict[tuple[str, Domain], float] = {}
        where = {
            (pod, level): self.view.topology.domain_of(self.cost.locations[pod], level)
            for pod in self.movable
            for level in self.levels
        }
        judged: list[tuple[float, int, dict[str, Domain]]] = []
        for pod in self.movable:
            if pod in locked or self.work[0] >= SEARCH_WORK:
                continue
            for domain in self._domains(pod):
                for targets in self._steps(pod, domain, locked, where):
                    self.work[0] += 1
                    judged.append((self._gain(targets, alone), len(judged), targets))
        judged.sort(key=lambda item: (-item[0], item[1]))
        for gain, _order, targets in judged:  # the best that fits
            placed = self._fit(targets)
            if placed is not None:
                return _Step(gain, placed)
        return None

    def _gain(self, targets: dict[str, Domain], alone: dict[tuple[str, Domain], float]) -> float:
        """`joint_gain` of one or two pods, from each one's gain alone (kept in `alone` for the
        step) corrected for the pair's own traffic: a step costs a lookup, not a pass over the
        peers of both."""
        cost, topology = self.cost, self.view.topology
        gains = 0.0
        for pod, domain in targets.items():
            if (pod, domain) not in alone:
                alone[(pod, domain)] = cost.gain(pod, domain)
            gains += alone[(pod, domain)]
        if len(targets) == 1:
            return gains
        (a, a_to), (b, b_to) = targets.items()
        rate = self.peers[a].get(b, 0.0)
        if not rate:
            return gains
        a_at, b_at = cost.locations[a], cost.locations[b]
        a_new, b_new = topology.location_within(a_to), topology.location_within(b_to)
        distance = topology.distance
        # Each gain alone counted the pair as if the other stayed; together it goes from
        # (a_at, b_at) to (a_new, b_new).
        return gains - rate * (
            distance(a_at, b_at)
            - distance(a_new, b_at)
            - distance(a_at, b_new)
            + distance(a_new, b_new)
        )

    def _domains(self, pod: str) -> list[Domain]:
        topology, locations = self.view.topology, self.cost.locations
        here = locations[pod]
        domains = {
            domain
            for peer in self.peers[pod]
            for level in self.levels
            if (domain := topology.domain_of(locations[peer], level)) is not None
            and topology.domain_of(here, level) != domain
        }
        return sorted(domains, key=lambda d: (d.level, d.key))

    def _steps(
        self,
        pod: str,
        domain: Domain,
        locked: set[str],
        where: dict[tuple[str, int], Domain | None],
    ) -> Iterator[dict[str, Domain]]:
        yield {pod: domain}
        home = where[(pod, domain.level)]
        if home is None:
            return
        for other in self.movable:
            if other == pod or other in locked:
                continue
            there = where[(other, domain.level)]
            if there == domain and other > pod:  # each swap once
                yield {pod: domain, other: home}
            elif there == home and other in self.peers[pod]:
                yield {pod: domain, other: domain}

    def fits(self, targets: dict[str, Domain]) -> bool:
        """Whether these pods, all moved at once, each find a node in their targets."""
        return not targets or self._fit(targets) is not None

    def _fit(self, targets: dict[str, Domain]) -> dict[str, tuple[Domain, str]] | None:
        """A node in its target for each pod, with the room all of them leave counted free;
        the occupancy is left as it was."""
        pods, nodes = self.view.snapshot.pods, self.view.snapshot.nodes
        occupancy = self.occupancy
        were = {pod: occupancy.placement[pod] for pod in targets}
        for pod in targets:
            occupancy.release(pods[pod])
        placed: dict[str, tuple[Domain, str]] = {}
        for pod, domain in targets.items():
            node = first_fit(
                pods[pod],
                self.view.topology.nodes_by_domain.get(domain, []),
                nodes,
                occupancy,
                self.honor_soft,
                besides=were[pod],
            )
            if node is None:
                break
            occupancy.reserve(pods[pod], node)
            placed[pod] = (domain, node)
        for pod in placed:
            occupancy.release(pods[pod])
        for pod, node in were.items():
            occupancy.reserve(pods[pod], node)
        return placed if len(placed) == len(targets) else None
