"""A quantile point estimate from classic buckets and the histogram's exact mean.

Prometheus's ``histogram_quantile`` spreads each bucket's observations evenly
between its edges. That ignores two things a histogram also says: how the
neighbouring buckets' densities slope (latency densities fall steeply in the
tail, so a wide tail bucket's observations crowd its lower edge), and the
exact mean (``_sum`` over ``_count``), which says where the observations sit
on average. :func:`mean_constrained_quantile` uses both, and never leaves the
bucket that must hold the quantile
(:func:`~inference_obs.engine.histograms.quantile_bounds`):

1. Within each finite bucket the density is a truncated exponential, whose
   log-slope is the slope of the log-densities (count over width) of the
   buckets on either side: a decaying tail gives a density falling across
   the bucket, a flat region a uniform one.
2. The exact total (mean x count) fixes what is left unknown. The ``+Inf``
   bucket takes what the finite buckets do not account for, if it holds
   observations and that leaves its mean at or above its lower edge. The
   rest moves the lowest bucket first (whose shape no neighbour below shows:
   queue times pile up at 0): its tilt, then, past the steepest tilt, a share
   of its observations at exactly 0; what it cannot take moves the other
   finite buckets by one common tilt, each within its edges.
3. The quantile is read from the cumulative distribution of that model,
   inside the bucket that holds rank ``q x total``; it is clipped to that
   bucket's edges.

Without a usable mean (none, not finite, or not inside the range the
buckets allow) the shape of step 1 alone is used. A quantile in the ``+Inf``
bucket is its lower edge, the highest finite bound, as in Prometheus. See
``docs/quantile-estimate.md`` for the method, its accuracy against ground
truth and its limits.
"""

from __future__ import annotations

import math

import numpy as np

from inference_obs.engine.buckets import bucket_table, monotonic_249
from inference_obs.samples import Floats

__all__ = ["mean_constrained_quantile"]

#: Largest within-bucket log-slope, times the bucket's width: a density at one edge about
#: 3,000 times that at the other (e^8). Past it the neighbours' densities say little.
_MAX_TILT = 8.0
#: Half an observation added to every bucket's count before taking logarithms, so an empty
#: neighbour reads as "few" rather than minus infinity (the usual continuity correction).
_PSEUDO_COUNT = 0.5
#: Bisection steps for a tilt in [-_MAX_TILT, _MAX_TILT]: 2^-50 of its range.
_STEPS = 50


def _tilted_mean(tilt: Floats) -> Floats:
    """Mean position (0-1) in a bucket of a density proportional to ``exp(-tilt * x)`` on
    [0, 1]: ``1/t - 1/(e^t - 1)``; 1/2 for a flat one (t -> 0, series kept near 0)."""
    t = np.asarray(tilt, dtype=np.float64)
    small = np.abs(t) < 1e-6
    safe = np.where(small, 1.0, t)
    with np.errstate(over="ignore"):
        exact = 1.0 / safe - 1.0 / np.expm1(safe)
    out: Floats = np.where(small, 0.5 - t / 12.0, exact)
    return out


def _tilted_quantile(tilt: float, share: float) -> float:
    """Position (0-1) in a bucket below which ``share`` (0-1) of its mass lies, for a density
    proportional to ``exp(-tilt * x)`` on [0, 1]."""
    if abs(tilt) < 1e-9:
        return share
    # Inverse of F(x) = (1 - e^{-t x}) / (1 - e^{-t}).
    return float(-math.log1p(share * math.expm1(-tilt)) / tilt)


def _shape_tilts(lower: Floats, upper: Floats, counts: Floats) -> Floats:
    """Each finite bucket's tilt from its neighbours' log-densities (step 1)."""
    width = upper - lower
    log_density = np.log((counts + _PSEUDO_COUNT) / width)
    centre = (lower + upper) / 2.0
    size = counts.size
    tilts = np.zeros(size)
    for i in range(size):
        left, right = max(i - 1, 0), min(i + 1, size - 1)
        if left == right:
            continue
        slope = (log_density[right] - log_density[left]) / (centre[right] - centre[left])
        tilts[i] = -slope * width[i]
    clipped: Floats = np.clip(tilts, -_MAX_TILT, _MAX_TILT)
    return clipped


def _bucket_sum(lower: Floats, width: Floats, counts: Floats, tilts: Floats) -> float:
    """Total of the finite buckets' observations under ``tilts``."""
    return float(np.sum(counts * (lower + width * _tilted_mean(tilts))))


def _tilt_for(position: float) -> float:
    """The tilt whose mean position in a bucket is ``position`` (0-1), within the limits."""
    lo, hi = -_MAX_TILT, _MAX_TILT
    # The mean position falls as the tilt grows.
    for _ in range(_STEPS):
        mid = (lo + hi) / 2.0
        if float(_tilted_mean(np.array(mid))) > position:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _common_tilt(
    lower: Floats, width: Floats, counts: Floats, tilts: Floats, target: float
) -> Floats:
    """``tilts`` of buckets 1 and up moved by one common step so that all the finite buckets
    add up to ``target`` (as near as the limits allow)."""
    moved = (counts > 0) & (np.arange(counts.size) > 0)

    def total(step: float) -> float:
        t = np.where(moved, np.clip(tilts + step, -_MAX_TILT, _MAX_TILT), tilts)
        return _bucket_sum(lower, width, counts, t)

    lo, hi = -2 * _MAX_TILT, 2 * _MAX_TILT
    # The total falls as the step grows (mass moves to each bucket's lower edge).
    for _ in range(_STEPS):
        mid = (lo + hi) / 2.0
        if total(mid) > target:
            lo = mid
        else:
            hi = mid
    out: Floats = np.where(moved, np.clip(tilts + (lo + hi) / 2.0, -_MAX_TILT, _MAX_TILT), tilts)
    return out


def _constrained(
    lower: Floats, width: Floats, counts: Floats, tilts: Floats, target: float
) -> tuple[Floats, float]:
    """Step 2 on the finite buckets: the tilts, and the share of the lowest bucket's
    observations at 0. The lowest bucket takes the difference to ``target`` first: by its
    tilt, then, past the steepest tilt, by observations at 0; the other buckets take what it
    cannot, by one common tilt."""
    tilts = tilts.copy()
    at_zero = 0.0
    if counts[0] > 0:
        rest = _bucket_sum(lower[1:], width[1:], counts[1:], tilts[1:])
        position = (target - rest) / counts[0] / width[0]
        steepest = float(_tilted_mean(np.array(_MAX_TILT)))
        tilts[0] = _tilt_for(min(max(position, 0.0), 1.0))
        if position < steepest:
            # Lower than the steepest density allows: the rest sits at 0 (a queue time,
            # a TPOT of 0 for one-token requests).
            at_zero = 1.0 - max(position, 0.0) / steepest
    achieved = (1.0 - at_zero) * counts[0] * (lower[0] + width[0] * float(_tilted_mean(tilts[0])))
    achieved += _bucket_sum(lower[1:], width[1:], counts[1:], tilts[1:])
    if abs(achieved - target) > 1e-9 * max(abs(target), 1e-300):
        remaining = target - (1.0 - at_zero) * counts[0] * (
            lower[0] + width[0] * float(_tilted_mean(tilts[0]))
        )
        tilts = _common_tilt(lower, width, counts, tilts, remaining)
    return tilts, at_zero


def mean_constrained_quantile(q: float, upper: Floats, counts: Floats, mean: float | None) -> float:
    """The ``q``-quantile of one classic histogram, estimated with its exact mean.

    Parameters
    ----------
    q
        The quantile, 0 to 1.
    upper
        The buckets' upper bounds (parsed ``le``; ``+Inf`` among them).
    counts
        The buckets' cumulative counts (or increases of them) over the window,
        buckets merged across series.
    mean
        The exact mean of the same observations (change of ``_sum`` over change of
        ``_count``), in the unit of the bounds; None when unknown.

    Returns
    -------
    float
        The estimate, in the unit of the bounds, always inside the bucket
        :func:`~inference_obs.engine.histograms.quantile_bounds` gives (its
        lower edge for the ``+Inf`` bucket); NaN where ``histogram_quantile``
        has no value (no ``+Inf`` bucket, fewer than two buckets, no
        observation) or ``q`` is outside [0, 1].

    Notes
    -----
    Observations are taken to be non-negative: the lowest bucket starts at 0
    (its bound must be positive, else the lowest bucket's bound is returned,
    as Prometheus does).

    Examples
    --------
    Eight observations of 0 s and two of 0.25 s, all in the lowest of buckets
    of 1 s and 2 s: interpolation puts the median at 0.5 s; the mean (0.05 s)
    says most of them sit at 0.

    >>> up = np.array([1.0, 2.0, np.inf])
    >>> mean_constrained_quantile(0.5, up, np.array([10.0, 10.0, 10.0]), 0.05)
    0.0
    """
    if math.isnan(q) or q < 0 or q > 1:
        return math.nan
    table, _ = monotonic_249(bucket_table(upper, counts, np.zeros(len(upper), np.int64), 1))
    size = int(table.sizes[0])
    bounds, cumulative = table.upper[0, :size], table.counts[0, :size]
    if size < 2 or bounds[-1] != np.inf or not cumulative[-1] > 0:
        return math.nan
    total = float(cumulative[-1])
    rank = q * total
    finite = size - 1
    b = next((i for i in range(finite) if cumulative[i] >= rank and cumulative[i] > 0), finite)
    if b == finite:
        return float(bounds[finite - 1])
    if bounds[0] <= 0:
        if b == 0:
            return float(bounds[0])
        # No model of a bucket reaching to -Inf: Prometheus's interpolation.
        below = cumulative[b - 1]
        return float(
            bounds[b - 1] + (bounds[b] - bounds[b - 1]) * (rank - below) / (cumulative[b] - below)
        )
    upper_edges = bounds[:finite]
    lower_edges = np.concatenate(([0.0], upper_edges[:-1]))
    width = upper_edges - lower_edges
    per_bucket = np.diff(np.concatenate(([0.0], cumulative)))
    finite_counts, in_inf = per_bucket[:finite], float(per_bucket[finite])
    tilts = _shape_tilts(lower_edges, upper_edges, finite_counts)
    at_zero = 0.0
    if mean is not None and math.isfinite(mean) and mean >= 0:
        target = mean * total
        fitted = _bucket_sum(lower_edges, width, finite_counts, tilts)
        # The +Inf bucket's mean must be at least its lower edge.
        leftover = target - fitted - in_inf * float(upper_edges[-1])
        if in_inf == 0 or leftover < 0:
            finite_target = target - in_inf * float(upper_edges[-1])
            tilts, at_zero = _constrained(lower_edges, width, finite_counts, tilts, finite_target)
    below = float(cumulative[b - 1]) if b > 0 else 0.0
    inside = min(max((rank - below) / float(per_bucket[b]), 0.0), 1.0)
    if b == 0:
        if inside <= at_zero:
            return 0.0
        inside = (inside - at_zero) / (1.0 - at_zero)
    value = lower_edges[b] + width[b] * _tilted_quantile(float(tilts[b]), inside)
    return float(min(max(value, lower_edges[b]), upper_edges[b]))
