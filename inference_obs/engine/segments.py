"""Reductions over every series' window at once: the vectorised building blocks.

A window selects, for series ``i``, the samples ``lo[i]:hi[i]`` of a
:class:`~inference_obs.samples.SampleSet`'s flat arrays. The functions here
reduce all those segments together with numpy (``ufunc.reduce`` over a
strided view, ``ufunc.reduceat``), so no Python code runs per sample and the
cost follows the samples in the windows, not in the set. Only
:func:`fold_positions`, used where Prometheus's step must be reproduced
exactly and no faster way is proven equal, loops in Python, and then over
sample *positions* within windows, each step vectorised across every series
still active. Counting pairs (resets, changes) uses the positions cached in
:class:`~inference_obs.engine.facts.Facts`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import as_strided

from inference_obs.engine.windows import Windows
from inference_obs.samples import Floats, Ints, SampleSet

__all__ = [
    "Floats",
    "Ints",
    "fold_positions",
    "gather",
    "segment_reduce",
    "without_nan",
]

Mask = npt.NDArray[np.bool_]

#: One step of a fold: (sample values, 1-based position, state arrays) -> new state arrays.
Step = Callable[[Floats, float, tuple[Floats, ...]], tuple[Floats, ...]]


def gather(values: Floats, lo: Ints, hi: Ints) -> tuple[Floats, Ints, Ints]:
    """The samples of the ordered windows ``lo:hi``, copied back to back, and their new bounds."""
    sizes = hi - lo
    ends = np.cumsum(sizes)
    starts = ends - sizes
    positions = np.repeat(lo - starts, sizes) + np.arange(int(ends[-1]) if ends.size else 0)
    return values[positions], starts.astype(np.int64), ends.astype(np.int64)


def segment_reduce(
    ufunc: np.ufunc, values: Floats, lo: Ints, hi: Ints, *, empty: float = np.nan
) -> Floats:
    """``ufunc.reduce(values[lo[i]:hi[i]])`` for every ``i``; ``empty`` where ``lo[i] >= hi[i]``.

    Segments must be ordered (``hi[i] <= lo[i + 1]``), as the windows of a
    sample set's series are. For ``numpy.add`` the order of additions is
    numpy's (partly pairwise), not strictly left to right: use
    :func:`fold_positions` where the order matters. Costs O(samples in the
    windows), not O(samples in the set).
    """
    out = np.full(lo.shape, empty, dtype=np.float64)
    nonempty = hi > lo
    if not nonempty.any():
        return out
    a, b = lo[nonempty], hi[nonempty]
    values = np.asarray(values, dtype=np.float64)
    sizes, starts = b - a, np.diff(a)
    if np.all(sizes == sizes[0]) and np.all(starts == starts[:1]):
        # Equal windows at equal distances (regular scrapes): a strided view,
        # one window per row, reduced along the rows.
        item = values.itemsize
        rows = as_strided(
            values[int(a[0]) :],
            shape=(a.size, int(sizes[0])),
            strides=(item * (int(starts[0]) if starts.size else 0), item),
            writeable=False,
        )
        with np.errstate(invalid="ignore", over="ignore"):
            out[nonempty] = ufunc.reduce(rows, axis=1)
        return out
    if 2 * int((b - a).sum()) < int(b[-1] - a[0]):
        # reduceat also reduces the gaps between windows: when the windows
        # hold a small part of the span, copying them together first is cheaper.
        values, a, b = gather(values, a, b)
    # reduceat reduces between consecutive indices; interleaving each window's
    # start and end and keeping every other result gives exactly the windows.
    # The last index may equal len(values), which reduceat rejects; leaving it
    # out makes the last window run to the end of the array, as it should.
    bounds = np.empty(2 * a.size, dtype=np.int64)
    bounds[0::2] = a
    bounds[1::2] = b
    if bounds[-1] == values.size:
        bounds = bounds[:-1]
    with np.errstate(invalid="ignore", over="ignore"):
        out[nonempty] = ufunc.reduceat(values, bounds)[0::2]
    return out


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
    this gives the engine that view without re-selecting windows (the cleaned
    set is cached with the sample set's facts).
    """
    cleaned, kept_before, facts = windows.facts_for(samples).nan_free()
    if cleaned is samples:
        return samples, windows
    moved = Windows(
        windows.start_ms, windows.end_ms, kept_before[windows.lo], kept_before[windows.hi], facts
    )
    return cleaned, moved
