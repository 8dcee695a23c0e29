"""Many windows read position by position: the layout behind the compensated sums.

Prometheus folds a window's samples one at a time. Vectorised across windows,
that fold is a loop over sample *positions*: step ``k`` handles the ``k``-th
sample of every window still running. :class:`Blocks` orders the windows
longest first (so those still running are always a prefix) and hands out the
samples of a few dozen positions at a time, small enough to stay in cache.
:func:`two_sum_error` and :func:`fold_rows` then finish a block's
compensation in a handful of numpy calls.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.lib.stride_tricks import as_strided

from inference_obs.samples import Floats, Ints

__all__ = ["Blocks", "fold_rows", "two_sum_error"]

# Elements per block: the few arrays of a block's size stay in cache.
_BLOCK = 1 << 16


def two_sum_error(a: Floats, b: Floats, s: Floats, out: Floats) -> Floats:
    """The exact rounding error of ``s = a + b`` (Knuth's TwoSum) into ``out`` (finite operands)."""
    with np.errstate(invalid="ignore", over="ignore"):
        b_part = s - a
        a_part = s - b_part
        np.subtract(a, a_part, out=a_part)
        np.subtract(b, b_part, out=b_part)
        return np.add(a_part, b_part, out=out)


def _reduces_in_order() -> bool:
    """Whether ``numpy.add.reduce`` over axis 0 of a C-ordered block adds row after row.

    numpy documents pairwise summation only along the fast (contiguous) axis;
    along the other it adds each row to the running result in turn. Checked
    once, on blocks of the shapes used where the two orders differ, so that a
    numpy that changed this would only make the engine slower, never different.
    """
    for rows, columns in ((9, 2), (40, 3), (257, 1000)):
        block = np.full((rows, columns), 2.0**-53)
        block[0] = 1.0  # each tiny term alone rounds away against 1.0; together they do not
        if not np.all(np.add.reduce(block, axis=0) == 1.0):
            return False
    return True


_IN_ORDER = _reduces_in_order()


def fold_rows(stack: Floats) -> Floats:
    """``((stack[0] + stack[1]) + stack[2]) + ...``: rows added strictly one after another."""
    with np.errstate(invalid="ignore", over="ignore"):
        if _IN_ORDER and stack.shape[1] > 1 and stack.flags.c_contiguous:
            total: Floats = np.add.reduce(stack, axis=0)
            return total
        total = stack[0].copy()
        for row in stack[1:]:
            np.add(total, row, out=total)
        return total


class Blocks:
    """Windows ordered longest first, read position by position in blocks.

    ``active[k]`` windows (a prefix, in this order) have a sample at position
    ``k``. :meth:`blocks` yields, per block of positions ``k0:k1``, ``x`` with
    ``x[j, i]`` sample ``k0 + j`` of window ``i`` (0 past a window's end),
    stored window by window (Fortran order) so that it is read with few cache
    misses; a block is small enough to stay in cache while it is used.
    """

    def __init__(self, values: Floats, lo: Ints, hi: Ints) -> None:
        sizes = hi - lo
        self.order = np.argsort(-sizes, kind="stable")
        self.lo, self.sizes = lo[self.order], sizes[self.order]
        self.width = int(self.lo.size)
        self.length = int(self.sizes[0]) if self.width else 0
        # Ascending negated sizes: searchsorted counts the windows longer than k.
        self.active = np.searchsorted(-self.sizes, -np.arange(self.length + 1), side="left")
        self.rows = max(8, _BLOCK // max(self.width, 1))
        self.values = values
        # Equal windows at equal distances (regular scrapes, every series
        # complete) are a strided view of the samples: no index needed.
        self.view: Floats | None = None
        steps = np.diff(self.lo)
        if self.width and self.sizes[-1] == self.length and np.all(steps == steps[:1]):
            stride = int(steps[0]) if steps.size else 0
            item = values.itemsize
            self.view = as_strided(
                values[int(self.lo[0]) :],
                shape=(self.length, self.width),
                strides=(item, item * stride),
                writeable=False,
            )

    def blocks(self) -> Iterator[tuple[int, int, Floats]]:
        """``(k0, k1, x)`` per block; ``x`` may be a read-only view of the samples."""
        for k0 in range(0, self.length, self.rows):
            k1 = min(k0 + self.rows, self.length)
            width = int(self.active[k0])
            if self.view is not None:
                yield k0, k1, self.view[k0:k1, :width]
                continue
            positions = np.arange(k0, k1)[None, :]
            sizes = self.sizes[:width, None]
            index = self.lo[:width, None] + np.minimum(positions, sizes - 1)
            yield k0, k1, np.where(positions < sizes, self.values[index], 0.0).T

    def unsort(self, sorted_values: Floats) -> Floats:
        out = np.empty_like(sorted_values)
        out[self.order] = sorted_values
        return out
