"""Arrays derived once from a sample set, so that a query costs what its windows hold.

Several range functions need a property of *pairs* or *runs* of samples:
where a counter drops (``increase``, ``rate``, ``resets``), where a value
changes (``changes``), which samples are not finite, and whether a window's
samples can be added without any rounding (``sum_over_time``,
``avg_over_time``). Computing these over the whole set on every call made a
1-hour query over a day of data cost as much as a 24-hour one. A
:class:`Facts` computes each on first use and keeps it; the engine's
:class:`~inference_obs.engine.windows.TimeIndex` holds one per sample set, so
an :class:`~inference_obs.engine.evaluate.Evaluator` pays for them once.

Everything here is exact: positions are integers and the exactness
certificate (:meth:`Facts.exactly_summable`) is a proof, not an estimate.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from inference_obs.samples import Floats, Ints, SampleSet

__all__ = ["Facts", "count_between"]

Mask = npt.NDArray[np.bool_]

# Grid exponent given to zero, non-finite samples and empty series: any sum
# of them is exact (non-finite samples are excluded separately).
_NO_GRID = 4096
# Samples below this magnitude cannot overflow the incremental mean, its
# compensation or the error-free transformations applied to them (every
# intermediate stays below 8 * 2**1019 = 2**1022). For sums, the same bound
# applies to count * max|x|.
_SAFE_MAGNITUDE = 2.0**1019


def count_between(positions: Ints, lo: Ints, hi: Ints) -> Ints:
    """How many of the sorted ``positions`` lie in ``[lo[i], hi[i])``, for every ``i``."""
    counts: Ints = np.searchsorted(positions, hi, side="left") - np.searchsorted(
        positions, lo, side="left"
    )
    return np.maximum(counts, 0)


class Facts:
    """Lazily computed, cached properties of one sample set (which must not change).

    Positions index the set's flat arrays; a pair ``(j, j + 1)`` is named by
    ``j`` (pairs straddling two series are listed too, but no window holds
    both of their samples).
    """

    __slots__ = (
        "_changes",
        "_drops",
        "_grid",
        "_maxabs",
        "_nan_free",
        "_nonfinite",
        "samples",
    )

    def __init__(self, samples: SampleSet) -> None:
        self.samples = samples
        self._drops: Ints | None = None
        self._changes: tuple[Ints, bool] | None = None
        self._nonfinite: Ints | None = None
        self._grid: Ints | None = None
        self._maxabs: Floats | None = None
        self._nan_free: tuple[SampleSet, Ints, Facts] | None = None

    @property
    def drops(self) -> Ints:
        """Pairs whose second value is strictly below the first (never with a NaN)."""
        if self._drops is None:
            v = self.samples.values
            with np.errstate(invalid="ignore"):
                self._drops = np.flatnonzero(v[1:] < v[:-1]).astype(np.int64)
        return self._drops

    def count_changes(self, lo: Ints, hi: Ints) -> Ints:
        """Per window ``lo:hi``, the pairs inside whose values differ and are not both NaN."""
        if self._changes is None:
            v = self.samples.values
            nan = np.isnan(v)
            with np.errstate(invalid="ignore"):
                changed = (v[1:] != v[:-1]) & ~(nan[1:] & nan[:-1])
            # Most pairs of a gauge change: then the few that do not are kept.
            dense = 2 * int(np.count_nonzero(changed)) > changed.size
            self._changes = (np.flatnonzero(~changed if dense else changed), dense)
        positions, complement = self._changes
        # The pairs (j, j + 1) inside a window have lo <= j < hi - 1.
        inside = count_between(positions, lo, hi - 1)
        counts: Ints = np.maximum(hi - lo - 1, 0) - inside if complement else inside
        return counts

    @property
    def nonfinite(self) -> Ints:
        """Positions of NaN and infinite samples."""
        if self._nonfinite is None:
            self._nonfinite = np.flatnonzero(~np.isfinite(self.samples.values)).astype(np.int64)
        return self._nonfinite

    def _series_bounds(self) -> tuple[Ints, Floats]:
        """Per series: the coarsest power-of-two grid of its finite samples, and their max |x|."""
        if self._grid is None or self._maxabs is None:
            v = self.samples.values
            finite = np.isfinite(v)
            bits = v.view(np.int64)
            biased = (bits >> 52) & 0x7FF
            fraction = bits & ((1 << 52) - 1)
            # A finite double is significand * 2**(max(biased, 1) - 1075).
            significand = np.where(biased > 0, fraction | (1 << 52), fraction)
            lowest = significand & -significand
            # lowest is a power of two below 2**53, so frexp reads its log2 exactly.
            _, log2_plus_one = np.frexp(lowest.astype(np.float64))
            grid = np.maximum(biased, 1) - 1075 + log2_plus_one.astype(np.int64) - 1
            grid = np.where(finite & (significand != 0), grid, _NO_GRID)
            magnitude = np.where(finite, np.abs(v), 0.0)
            offsets = self.samples.offsets
            nonempty = offsets[1:] > offsets[:-1]
            self._grid = np.full(len(self.samples), _NO_GRID, dtype=np.int64)
            self._maxabs = np.zeros(len(self.samples))
            if nonempty.any():
                # reduceat over the non-empty series' starts reduces exactly
                # each series (empty ones in between hold no samples).
                starts = offsets[:-1][nonempty]
                self._grid[nonempty] = np.minimum.reduceat(grid, starts)
                self._maxabs[nonempty] = np.maximum.reduceat(magnitude, starts)
        return self._grid, self._maxabs

    def finite_in(self, lo: Ints, hi: Ints) -> Mask:
        """Per series window ``lo[i]:hi[i]``: no NaN or infinite sample in it."""
        finite: Mask = count_between(self.nonfinite, lo, hi) == 0
        return finite

    def safe_for_means(self, lo: Ints, hi: Ints) -> Mask:
        """Windows of finite samples small enough that no mean or its compensation can overflow."""
        _, maxabs = self._series_bounds()
        safe: Mask = self.finite_in(lo, hi) & (maxabs < _SAFE_MAGNITUDE)
        return safe

    def safe_for_sums(self, lo: Ints, hi: Ints) -> Mask:
        """Windows of finite samples whose running sums (and their errors) cannot overflow."""
        _, maxabs = self._series_bounds()
        counts = (hi - lo).astype(np.float64)
        with np.errstate(over="ignore"):
            small = counts * maxabs * (1.0 + 2.0**-50) < _SAFE_MAGNITUDE
        safe: Mask = self.finite_in(lo, hi) & small
        return safe

    def exactly_summable(self, lo: Ints, hi: Ints) -> Mask:
        """Windows (one per series) whose samples add up without a single rounding, in any order.

        Proof: every finite sample of series ``i`` is an integer multiple of
        ``2**g[i]`` (its grid); if the window holds no NaN or infinity and
        ``count * max|x| <= 2**(53 + g[i])`` (and below ``2**1023``), every
        partial sum, in any order and grouping, is a multiple of ``2**g[i]``
        no larger than that bound, hence a float64 exactly. Then a compensated
        (Kahan/Neumaier) sum, a plain left-to-right one and a pairwise one are
        all the exact sum, and the compensation stays exactly 0.
        """
        grid, maxabs = self._series_bounds()
        counts = (hi - lo).astype(np.float64)
        with np.errstate(over="ignore"):
            limit = np.ldexp(1.0, np.minimum(53 + grid, 2000).astype(np.int32))
            # The product may round down by half an ulp; the slack keeps the
            # test conservative.
            bound = counts * maxabs * (1.0 + 2.0**-50)
        # Multiples of a coarse grid are floats only below the overflow threshold.
        fits = (bound <= limit) & (bound < 2.0**1023)
        summable: Mask = fits & self.finite_in(lo, hi)
        return summable

    def nan_free(self) -> tuple[SampleSet, Ints, Facts]:
        """The set without NaN samples, where each old position lands, and its own facts.

        ``kept_before[j]`` is the new position of the first kept sample at or
        after old position ``j`` (so old windows ``lo:hi`` become
        ``kept_before[lo]:kept_before[hi]``).
        """
        if self._nan_free is None:
            samples = self.samples
            keep = ~np.isnan(samples.values)
            kept_before = np.concatenate(([0], np.cumsum(keep))).astype(np.int64)
            if keep.all():
                self._nan_free = (samples, kept_before, self)
            else:
                offsets = kept_before[samples.offsets]
                t_ms, values = samples.t_ms[keep], samples.values[keep]
                for array in (offsets, t_ms, values):
                    array.flags.writeable = False
                cleaned = SampleSet(samples.names, samples.labels, offsets, t_ms, values)
                self._nan_free = (cleaned, kept_before, Facts(cleaned))
        return self._nan_free
