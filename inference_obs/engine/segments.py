"""Reductions over every series' window at once: the vectorised building blocks.

A window selects, for series ``i``, the samples ``lo[i]:hi[i]`` of a
:class:`~inference_obs.samples.SampleSet`'s flat arrays. The functions here
reduce all those segments together with numpy (``ufunc.reduceat``, prefix
sums), so no Python code runs per sample. Only :func:`fold_positions`, used
where Prometheus's float summation order must be reproduced exactly, loops in
Python, and then over sample *positions* within windows, each step vectorised
across every series still active.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from inference_obs.engine.windows import Windows
from inference_obs.samples import SampleSet

__all__ = [
    "Floats",
    "Ints",
    "fold_positions",
    "pair_counts",
    "segment_reduce",
    "without_nan",
]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

#: One step of a fold: (sample values, 1-based position, state arrays) -> new state arrays.
Step = Callable[[Floats, float, tuple[Floats, ...]], tuple[Floats, ...]]


def segment_reduce(
    ufunc: np.ufunc, values: Floats, lo: Ints, hi: Ints, *, empty: float = np.nan
) -> Floats:
    """``ufunc.reduce(values[lo[i]:hi[i]])`` for every ``i``; ``empty`` where ``lo[i] >= hi[i]``.

    Segments must be ordered (``hi[i] <= lo[i + 1]``), as the windows of a
    sample set's series are. For ``numpy.add`` the order of additions is
    numpy's (partly pairwise), not strictly left to right: use
    :func:`fold_positions` where the order matters.
    """
    out = np.full(lo.shape, empty, dtype=np.float64)
    nonempty = hi > lo
    if not nonempty.any():
        return out
    # reduceat reduces between consecutive indices; interleaving each window's
    # start and end and keeping every other result gives exactly the windows.
    # One trailing element makes an end index equal to len(values) valid.
    padded = np.append(np.asarray(values, dtype=np.float64), 0.0)
    bounds = np.empty(2 * int(nonempty.sum()), dtype=np.int64)
    bounds[0::2] = lo[nonempty]
    bounds[1::2] = hi[nonempty]
    with np.errstate(invalid="ignore", over="ignore"):
        out[nonempty] = ufunc.reduceat(padded, bounds)[0::2]
    return out


def pair_counts(flags: Mask, lo: Ints, hi: Ints) -> Ints:
    """How many adjacent pairs ``(j, j + 1)`` inside each window have ``flags[j]`` set.

    ``flags`` has one entry per adjacent pair of the flat sample arrays (length
    ``N - 1``); pairs straddling two series are never inside a window. Exact:
    integer prefix sums.
    """
    prefix = np.concatenate(([0], np.cumsum(flags, dtype=np.int64)))
    # An empty window (possibly at the very end) counts 0 pairs.
    first = np.minimum(lo, prefix.size - 1)
    last = np.clip(hi - 1, first, prefix.size - 1)
    counts: Ints = prefix[last] - prefix[first]
    return counts


def fold_positions(
    values: Floats, lo: Ints, hi: Ints, initial: tuple[Floats, ...], step: Step
) -> tuple[Floats, ...]:
    """Fold ``step`` over each window's samples in time order, all windows together.

    Step ``k`` (1-based) receives the ``k``-th sample of every window that has
    one and the matching slices of the state; the windows are processed
    longest first, so the active ones are always a prefix and each step costs
    only the windows still running. The Python loop runs once per *position*
    (the longest window's length), never once per sample.

    Parameters
    ----------
    values
        The sample set's flat values.
    lo, hi
        Window bounds per series (indices into ``values``).
    initial
        State arrays, one entry per series.
    step
        ``step(x, k, state) -> state`` on the active windows.

    Returns
    -------
    tuple of numpy.ndarray
        The final state, in series order. Windows without samples keep ``initial``.
    """
    sizes = hi - lo
    order = np.argsort(-sizes, kind="stable")
    starts = lo[order]
    # Ascending negated sizes: searchsorted counts the windows longer than k.
    negated = -sizes[order]
    state = [np.array(part[order], dtype=np.float64) for part in initial]
    longest = int(sizes.max(initial=0))
    for k in range(longest):
        active = int(np.searchsorted(negated, -k, side="left"))
        x = values[starts[:active] + k]
        updated = step(x, float(k + 1), tuple(part[:active] for part in state))
        for part, new in zip(state, updated, strict=True):
            part[:active] = new
    result = []
    for part in state:
        unsorted = np.empty_like(part)
        unsorted[order] = part
        result.append(unsorted)
    return tuple(result)


def without_nan(samples: SampleSet, windows: Windows) -> tuple[SampleSet, Windows]:
    """The same series and windows with every NaN sample removed.

    VictoriaMetrics drops NaN samples before any rollup function sees them;
    this gives the engine that view without re-selecting windows.
    """
    keep = ~np.isnan(samples.values)
    if keep.all():
        return samples, windows
    kept_before = np.concatenate(([0], np.cumsum(keep))).astype(np.int64)
    offsets = kept_before[samples.offsets]
    t_ms, values = samples.t_ms[keep], samples.values[keep]
    for array in (offsets, t_ms, values):
        array.flags.writeable = False
    cleaned = SampleSet(samples.names, samples.labels, offsets, t_ms, values)
    moved = Windows(
        windows.start_ms, windows.end_ms, kept_before[windows.lo], kept_before[windows.hi]
    )
    return cleaned, moved
