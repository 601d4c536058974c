"""The cost model: what a placement's traffic costs, per level crossed, and what a move saves."""
