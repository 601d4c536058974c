"""Worths of one-pod candidates judged in numpy batches, ahead of the planner's loop."""

from __future__ import annotations

from dataclasses import dataclass, field

from rebalancer.cost.model import CostModel, Worth
from rebalancer.strategies.framework import Candidate

_FIRST_BATCH = 256
"""Candidates judged at once by the first batch of Prejudged."""


@dataclass
class Prejudged:
    """The worth of every one-pod candidate on the cycle's starting model, judged in numpy a
    batch at a time, in the order the loop pops them, each batch as large as all before it.
    A pod whose cost no pick has changed keeps it, so the loop works out a worth again only next
    to the moves already made, instead of one by one for tens of thousands of candidates; and
    batches, not all at once, because with the default limits the loop ends after a few dozen."""

    cost: CostModel
    candidates: list[Candidate]
    order: list[int]
    """The one-pod candidates' indexes, largest proposed gain first, as the heap pops them."""
    rank: dict[int, int]
    """Index -> its place in `order`."""
    worths: dict[int, Worth] = field(default_factory=dict)
    judged: int = 0
    """How many of `order` have been judged."""

    @classmethod
    def of(cls, cost: CostModel, candidates: list[Candidate]) -> Prejudged:
        alone = [index for index, candidate in enumerate(candidates) if not candidate.companions]
        order = sorted(alone, key=lambda index: (-candidates[index].gain, index))
        return cls(cost, candidates, order, {index: rank for rank, index in enumerate(order)})

    def get(self, index: int) -> Worth | None:
        """None for a joint candidate, and where the arrays leave the worth to `worth`."""
        rank = self.rank.get(index)
        while rank is not None and self.judged <= rank:
            batch = self.order[self.judged : self.judged + max(_FIRST_BATCH, self.judged)]
            moves = [(self.candidates[i].pod, self.candidates[i].target) for i in batch]
            for judged_index, worth in zip(batch, self.cost.worths_alone(moves), strict=True):
                if worth is not None:
                    self.worths[judged_index] = worth
            self.judged += len(batch)
        return self.worths.get(index)
