"""Classic histogram buckets as one padded table per call: sort, merge, monotonicity.

The histogram functions receive one row per bucket sample (its parsed ``le``,
its cumulative count, its group). :func:`bucket_table` turns them into a
``(groups, buckets)`` table, sorted by upper bound within each group, with
buckets of equal bound merged by adding their counts, as Prometheus's
``bucketQuantile`` does before anything else (``"0.2"``, ``"2e-1"`` and
``"2.0e-1"`` are one bucket). The two monotonicity repairs Prometheus has used
then work column by column, vectorised across groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inference_obs.samples import Floats, Ints

__all__ = ["BucketTable", "bucket_table", "monotonic_242", "monotonic_249"]

Mask = npt.NDArray[np.bool_]

# Prometheus 2.49+ treats bucket counts whose relative difference is below
# this as equal (float noise from rate() and sum()), in either direction.
_SMALL_DELTA = 1e-12
_SMALLEST_NORMAL = float(np.finfo(np.float64).tiny)
_LARGEST = float(np.finfo(np.float64).max)


@dataclass(frozen=True, slots=True)
class BucketTable:
    """Buckets of every group, one row per group, NaN-padded on the right.

    ``upper[g, j]`` is the ``j``-th smallest distinct upper bound of group
    ``g`` and ``counts[g, j]`` its (merged) cumulative count, for
    ``j < sizes[g]``.
    """

    upper: Floats
    counts: Floats
    sizes: Ints

    @property
    def valid(self) -> Mask:
        """Which cells hold a bucket."""
        columns = np.arange(self.upper.shape[1])
        valid: Mask = columns[None, :] < self.sizes[:, None]
        return valid

    def column(self, table: Floats, index: Ints) -> Floats:
        """``table[g, index[g]]`` for every group (``index`` clipped into the table)."""
        rows = np.arange(table.shape[0])
        picked: Floats = table[rows, np.clip(index, 0, table.shape[1] - 1)]
        return picked

    @property
    def has_inf(self) -> Mask:
        """Whether each group's highest bound is ``+Inf`` (else its quantiles are NaN)."""
        highest = self.column(self.upper, self.sizes - 1)
        has_inf: Mask = (self.sizes > 0) & (highest == np.inf)
        return has_inf

    @property
    def total(self) -> Floats:
        """The count of each group's highest bucket (NaN for empty groups)."""
        total = self.column(self.counts, self.sizes - 1)
        return np.where(self.sizes > 0, total, np.nan)


def bucket_table(upper: Floats, counts: Floats, groups: Ints, n_groups: int) -> BucketTable:
    """Sort each group's buckets by bound and merge equal bounds by adding their counts.

    Samples whose bound is NaN (a missing or unparsable ``le``) are ignored.

    Parameters
    ----------
    upper
        Each bucket sample's upper bound (parsed ``le``).
    counts
        Each bucket sample's cumulative count.
    groups
        Each bucket sample's group, ``0 <= groups < n_groups``.
    n_groups
        Number of groups.

    Returns
    -------
    BucketTable
        The groups' merged buckets.
    """
    upper = np.asarray(upper, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    groups = np.asarray(groups, dtype=np.int64)
    keep = ~np.isnan(upper)
    upper, counts, groups = upper[keep], counts[keep], groups[keep]
    order = np.lexsort((upper, groups))
    upper, counts, groups = upper[order], counts[order], groups[order]
    # Equal bounds in one group are one bucket: their counts are added.
    new = np.ones(upper.size, dtype=bool)
    new[1:] = (groups[1:] != groups[:-1]) | (upper[1:] != upper[:-1])
    starts = np.flatnonzero(new)
    if starts.size:
        counts = np.add.reduceat(counts, starts)
    upper, groups = upper[starts], groups[starts]
    sizes = np.bincount(groups, minlength=n_groups).astype(np.int64)
    first = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    position = np.arange(groups.size) - first[groups]
    width = max(int(sizes.max(initial=0)), 1)
    table_upper = np.full((n_groups, width), np.nan)
    table_counts = np.full((n_groups, width), np.nan)
    table_upper[groups, position] = upper
    table_counts[groups, position] = counts
    return BucketTable(table_upper, table_counts, sizes)


def monotonic_242(table: BucketTable) -> tuple[BucketTable, Mask]:
    """Prometheus 2.42 ``ensureMonotonic``: raise every count to the largest one before it.

    A NaN count is left as it is and does not take part in the maximum.

    Returns
    -------
    tuple
        The repaired table, and per group whether any count was raised.
    """
    with np.errstate(invalid="ignore"):
        running = np.fmax.accumulate(table.counts, axis=1)
        raised = table.valid & (table.counts < running)
    counts = np.where(np.isnan(table.counts), table.counts, running)
    any_raised: Mask = np.any(raised, axis=1)
    return BucketTable(table.upper, counts, table.sizes), any_raised


def _almost_equal(a: Floats, b: Floats) -> Mask:
    # Relative difference |a - b| / (|a| + |b|) below 1e-12; with a zero or
    # subnormal operand the absolute difference must be below 1e-12 of the
    # smallest normal float (so, in practice, equal).
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - b)
        scale = np.abs(a) + np.abs(b)
        tiny = (a == 0) | (b == 0) | (scale < _SMALLEST_NORMAL)
        relative = diff < _SMALL_DELTA * np.minimum(scale, _LARGEST)
        near: Mask = (a == b) | np.where(tiny, diff < _SMALL_DELTA * _SMALLEST_NORMAL, relative)
    return near


def monotonic_249(table: BucketTable) -> tuple[BucketTable, Mask]:
    """Prometheus 2.49+ monotonicity repair, walking the buckets in bound order.

    With ``prev`` the first count: a count equal to ``prev`` is kept; one
    within a relative 1e-12 of it (float noise, either direction) is set to
    ``prev``; one below it is set to ``prev`` (forced); a larger one is kept
    and becomes ``prev``. A NaN count is kept and becomes ``prev``.

    Returns
    -------
    tuple
        The repaired table, and per group whether a decrease had to be removed
        (noise-level corrections are not reported, as in Prometheus).
    """
    counts = table.counts.copy()
    forced = np.zeros(counts.shape[0], dtype=bool)
    if counts.shape[1] == 0:
        return table, forced
    previous = counts[:, 0].copy()
    for j in range(1, counts.shape[1]):
        current = counts[:, j]
        inside = j < table.sizes
        with np.errstate(invalid="ignore"):
            same = current == previous
            noise = ~same & _almost_equal(previous, current)
            lower = ~same & ~noise & (current < previous)
        counts[:, j] = np.where(inside & (noise | lower), previous, current)
        forced |= inside & lower
        previous = np.where(inside & ~same & ~noise & ~lower, current, previous)
    return BucketTable(table.upper, counts, table.sizes), forced
