"""The numpy kernels the cost models and the traffic mapping share: group sums, runs, unique keys.

Each is the numpy function it replaces (np.unique, a stable argsort), with the same result, for
the shapes a cycle feeds it (keys already in runs, non-negative pod numbers).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Indices = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]


def spans(starts: Indices, lengths: Indices) -> tuple[Indices, Indices]:
    """The positions of several runs of an array laid end to end, run starts[i] being
    lengths[i] long, with the number i of the run each position is in: how one row per pod
    gathers each pod's pairs from arrays grouped by pod."""
    run = np.repeat(np.arange(len(starts)), lengths)
    offsets = np.cumsum(lengths) - lengths
    return run, np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))


def group_sums(groups: Indices, values: Floats, count: int) -> Floats:
    """values summed per group number, 0..count-1. In input order: np.bincount adds as it goes,
    so the sums are those of a loop over the same values."""
    return np.bincount(groups, values, count).astype(np.float64, copy=False)


def unique_in_runs(keys: Indices) -> tuple[Indices, Indices]:
    """np.unique(keys, return_inverse=True) for keys that come in runs already (each pod's pairs
    together, its number the high part of the key): a stable sort keeps the runs and sorts only
    within them, where np.unique sorts from scratch."""
    found, position, _starts = _grouped(keys, np.argsort(keys, kind="stable"))
    return found, position


def stable_order(keys: Indices) -> Indices:
    """np.argsort(keys, kind="stable") for non-negative keys: an unstable sort of the keys made
    unique by their positions gives the same order, and numpy's unstable sort is the faster;
    the stable sort is kept where the product would not fit in 64 bits."""
    count = len(keys)
    if not count or int(keys.max()) >= np.iinfo(np.int64).max // count - 1:
        return np.argsort(keys, kind="stable")
    return np.argsort(keys * count + np.arange(count))


def unique_first_seen(keys: Indices) -> tuple[Indices, Indices, Indices]:
    """np.unique(keys, return_index=True, return_inverse=True), the same three arrays, from an
    unstable sort and the least position per key: asked for the first of each key, np.unique
    sorts stably, the slower sort."""
    order = np.argsort(keys)
    found, position, starts = _grouped(keys, order)
    first_seen = np.minimum.reduceat(order, np.flatnonzero(starts)) if len(keys) else order
    return found, first_seen, position


def _grouped(keys: Indices, order: Indices) -> tuple[Indices, Indices, npt.NDArray[np.bool_]]:
    """Given the order that sorts `keys`: each distinct key once, in order; each key's place
    among them; and where in the sorted keys each distinct key starts."""
    ordered = keys[order]
    starts = np.ones(len(keys), np.bool_)
    starts[1:] = ordered[1:] != ordered[:-1]
    position = np.empty(len(keys), np.int64)
    position[order] = np.cumsum(starts) - 1
    return ordered[starts], position, starts
