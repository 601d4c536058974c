"""The bound's objective: the traffic each pair of classes keeps inside a domain, bounded from
above by what the pods counted there can send and receive, and the program's solve.

Apart from the counts and rules it bounds (bound_program.py): those hold for any objective, this
is the one cost that is minimised over them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import highspy

from rebalancer.cluster.topology import Domain
from rebalancer.simulator.bound_program import DomainProgram, up

MAX_EXACT_CLASS = 32
"""Up to this many pods, what a class keeps inside a domain is bounded by a choice of its count
(n (n - 1) / 2 pairs at most); larger classes by n x each pod's share, which needs no binaries."""


@dataclass
class _Pair:
    """Traffic between two classes (or within one), with what bounds the part kept local."""

    rate: float
    first_max: float
    """Most that one pod of the first class sends to and receives from the second."""
    second_max: float
    pair_max: float
    """Most between any two of their pods: with n pods in a domain, a class keeps at most
    n (n - 1) / 2 pairs of its own local."""


class Objective:
    """The cost a program's counts allow at the least: the traffic crossing each level, less
    what the counts can keep inside its domains."""

    def __init__(self, program: DomainProgram) -> None:
        self.program = program
        self.choices: dict[tuple[int, Domain], list[Any] | None] = {}
        self.proven = False
        """Whether the last solve proved its optimum, not only a bound on it."""

    def _departures(self) -> Any:
        """How many pods the counts put out of the domain they run in, at the least."""
        program = self.program
        highs = program.highs
        out: list[Any] = []
        for item in program.classes:
            if item.fixed_at is not None:
                continue
            running: dict[Domain, int] = defaultdict(int)
            for pod in item.pods:
                running[program.home[program.snapshot.pods[pod].node_name or ""]] += 1
            for domain, count in running.items():
                if domain not in item.count:
                    out.append(count)  # no room there now: all of them leave
                    continue
                leaving = highs.addVariable(lb=0, ub=count)
                highs.addConstr(leaving >= count - item.count[domain])
                out.append(leaving)
        return sum(out)

    def solve(
        self, rates: dict[tuple[str, str], float], penalty: float = 0.0
    ) -> tuple[float, float] | None:
        """The bound on the cost plus `penalty` per pod out of its domain, and that number in
        the solution found (infinite without one)."""
        program = self.program
        highs = program.highs
        weights = [level.weight for level in program.topology.levels] + [0.0]
        steps = [weights[i] - weights[i + 1] for i in range(len(program.topology.levels))]
        # Levels finer than the counted one pay as if split wherever it is.
        charged = [*steps[: program.level], sum(steps[program.level :])]
        cost: list[Any] = []
        for (first, second), pair in self._pairs(rates).items():
            local_above: dict[Domain, Any] = {}
            for level, step in enumerate(charged):
                if step <= 0:
                    continue
                kept = {d: self._kept(first, second, pair, d) for d in program.domains[level]}
                for domain, amount in kept.items():
                    parent = local_above.get(up(domain, level - 1)) if level else None
                    if parent is not None and not isinstance(amount, float | int):
                        within: Any = amount <= parent
                        highs.addConstr(within)
                local_above = kept
                cost.append(step * (pair.rate - sum(kept.values())))
        moved = self._departures() if penalty else 0
        objective = (sum(cost) if cost else 0.0) + penalty * moved
        self.proven = True
        if isinstance(objective, float | int):  # every pod of it stays where it runs
            return max(float(objective), 0.0), float(moved)
        highs.minimize(objective)
        info = highs.getInfo()
        solved = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
        if isinstance(moved, int | float):
            counted = float(moved)
        else:
            counted = float(highs.val(moved)) if solved else math.inf
        if highs.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            return max(float(info.objective_function_value), 0.0), counted
        self.proven = False
        bound = float(info.mip_dual_bound)
        return (max(bound, 0.0), counted) if math.isfinite(bound) else None

    def _pairs(self, rates: dict[tuple[str, str], float]) -> dict[tuple[int, int], _Pair]:
        """Class pair -> its traffic, both directions, and each pod's share at most."""
        program = self.program
        total: dict[tuple[int, int], float] = defaultdict(float)
        per_pod: dict[tuple[int, int, str], float] = defaultdict(float)
        pair_max: dict[tuple[int, int], float] = defaultdict(float)
        both: dict[tuple[str, str], float] = defaultdict(float)
        for (a, b), rate in rates.items():
            if rate > 0 and a in program.class_of and b in program.class_of and a != b:
                both[min(a, b), max(a, b)] += rate
        for (a, b), rate in both.items():
            key = (
                min(program.class_of[a], program.class_of[b]),
                max(program.class_of[a], program.class_of[b]),
            )
            total[key] += rate
            per_pod[(*key, a)] += rate
            per_pod[(*key, b)] += rate
            pair_max[key] = max(pair_max[key], rate)
        pairs = {}
        for key, rate in total.items():
            first, second = key
            pairs[key] = _Pair(
                rate,
                max(per_pod[(*key, p)] for p in program.classes[first].pods),
                max(per_pod[(*key, p)] for p in program.classes[second].pods),
                pair_max[key],
            )
        return pairs

    def _kept(self, first: int, second: int, pair: _Pair, domain: Domain) -> Any:
        """An upper bound on the pair's traffic inside `domain`."""
        program = self.program
        highs = program.highs
        one, other = program.classes[first], program.classes[second]
        if first == second:
            return self._kept_within(first, pair, domain)
        here, there = program.counted(one, domain), program.counted(other, domain)
        if isinstance(here, int) and isinstance(there, int):
            return min(
                here * pair.first_max,
                there * pair.second_max,
                pair.rate,
                _pairs_of(here, there, pair),
            )
        kept = highs.addVariable(lb=0, ub=pair.rate)
        highs.addConstr(kept <= here * pair.first_max)
        highs.addConstr(kept <= there * pair.second_max)
        # At most one pair's rate per two pods: n x m pairs, linear when one side is known...
        if isinstance(here, int) or isinstance(there, int):
            known, unknown = (here, there) if isinstance(here, int) else (there, here)
            highs.addConstr(kept <= (known * pair.pair_max) * unknown)
            return kept
        # ...else through the choice of the smaller class's count (m x a bounded integer).
        small, large = (first, second) if len(one.pods) <= len(other.pods) else (second, first)
        choice = self._choice(small, domain)
        if choice is None:
            return kept
        largest = program.upper(program.classes[large], domain)
        others = program.counted(program.classes[large], domain)
        products = []
        for size, chosen in enumerate(choice):
            if size == 0:
                continue
            product = highs.addVariable(lb=0, ub=largest)
            highs.addConstr(product <= largest * chosen)
            highs.addConstr(product <= others)
            products.append(size * product)
        highs.addConstr(kept <= pair.pair_max * sum(products))
        return kept

    def _kept_within(self, index: int, pair: _Pair, domain: Domain) -> Any:
        """Within one class: n pods keep at most min(n x each one's share, n (n-1)/2 pairs)."""
        program = self.program
        highs = program.highs
        pods = program.counted(program.classes[index], domain)
        if isinstance(pods, int):
            return _within_class(pods, pair)
        kept = highs.addVariable(lb=0, ub=pair.rate)
        choice = self._choice(index, domain)
        if choice is None:
            highs.addConstr(kept <= pods * (pair.first_max / 2))
            return kept
        bound = sum(_within_class(size, pair) * chosen for size, chosen in enumerate(choice))
        highs.addConstr(kept <= bound)
        return kept

    def _choice(self, index: int, domain: Domain) -> list[Any] | None:
        """Binaries choosing the class's count in the domain, one per possible count; None for
        classes too large to expand."""
        program = self.program
        highs = program.highs
        key = (index, domain)
        if key not in self.choices:
            item = program.classes[index]
            if len(item.pods) > MAX_EXACT_CLASS:
                self.choices[key] = None
            else:
                choice = [highs.addBinary() for _ in range(program.upper(item, domain) + 1)]
                highs.addConstr(sum(choice) == 1)
                counted = program.counted(item, domain)
                highs.addConstr(sum(k * c for k, c in enumerate(choice)) == counted)
                self.choices[key] = choice
        return self.choices[key]


def _pairs_of(here: int, there: int, pair: _Pair) -> float:
    return here * there * pair.pair_max


def _within_class(pods: int, pair: _Pair) -> float:
    return min(pods * pair.first_max / 2, pods * (pods - 1) / 2 * pair.pair_max, pair.rate)
