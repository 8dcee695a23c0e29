"""The ``*_over_time`` functions over range vectors, vectorised across series.

Prometheus's ``aggrOverTime`` family (``promql/functions.go``) on float
samples, per ``shared/reference/promql-semantics.md`` section 5: every sample
weighs the same (none is time-weighted) and a window without samples gives no
output. Sums and means use Prometheus's compensated (Kahan-Babuska/Neumaier)
addition with Prometheus's rounding, bit for bit (see
:mod:`~inference_obs.engine.compensated` for how that is done without a
Python step per sample); everything else is a single numpy reduction.

Under ``Rules.VICTORIAMETRICS`` NaN samples are ignored, sums are plain float
sums, the mean is sum / count, and NaN results are removed, as MetricsQL
documents.
"""

from __future__ import annotations

import numpy as np

from inference_obs.engine.compensated import mean_35, mean_242, plain_sum, sum_242, sum_254
from inference_obs.engine.result import Evaluation
from inference_obs.engine.rules import Rules
from inference_obs.engine.segments import segment_reduce, without_nan
from inference_obs.engine.windows import Windows
from inference_obs.samples import Floats, SampleSet

__all__ = [
    "avg_over_time",
    "count_over_time",
    "last_over_time",
    "max_over_time",
    "min_over_time",
    "quantile_over_time",
    "sum_over_time",
]


def _finish(samples: SampleSet, windows: Windows, out: Floats, rules: Rules) -> Evaluation:
    # At least one sample, else no output.
    present = windows.counts >= 1
    out = np.where(present, out, np.nan)
    if rules is Rules.VICTORIAMETRICS:
        # NaN results are removed from VictoriaMetrics's output.
        present &= ~np.isnan(out)
    return Evaluation(out, present)


def sum_over_time(
    samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules
) -> Evaluation:
    """Sum of each window's samples.

    Prometheus ``sum_over_time``: compensated addition in time order, the sum
    itself if it is infinite, else sum plus compensation. ``Rules.PROMETHEUS_3``
    resets the compensation when the sum overflows (2.54+), which cannot change
    the final value. ``Rules.VICTORIAMETRICS``: plain sum of the non-NaN samples.

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        In the series' unit; absent for windows without samples.

    Examples
    --------
    >>> from inference_obs.engine.windows import TimeIndex
    >>> from inference_obs.samples import SampleSet, Series
    >>> s = SampleSet.from_series([Series("g", {}, [10, 20, 30, 40], [1, 1e100, 1, -1e100])])
    >>> w = TimeIndex(s).window(0, 60_000, left_open=True)
    >>> sum_over_time(s, w, range_s=60, rules=Rules.PROMETHEUS_3).values.tolist()
    [2.0]
    """
    if rules is Rules.VICTORIAMETRICS:
        samples, windows = without_nan(samples, windows)
        return _finish(samples, windows, plain_sum(samples, windows), rules)
    out = (sum_242 if rules is Rules.PROMETHEUS_2 else sum_254)(samples, windows)
    return _finish(samples, windows, out, rules)


def avg_over_time(
    samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules
) -> Evaluation:
    """Mean of each window's samples (every sample weighs the same).

    Prometheus ``avg_over_time``. ``Rules.PROMETHEUS_2`` follows 2.42: an
    incremental mean with compensation, ``mean += x/k - mean/k``, skipping
    samples that cannot move an infinite mean. ``Rules.PROMETHEUS_3`` follows
    3.5+ (commit ff67596a82; the intermediate 2.55 variant is not modelled):
    a compensated direct sum divided by the count, switching to a compensated
    incremental mean only if the sum would overflow. For ``1, 1e100, 1, -1e100`` 2.42 returns
    about ``-2.43e83``, 3.x exactly ``0.5``. ``Rules.VICTORIAMETRICS``: plain sum
    of the non-NaN samples over their count.

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        In the series' unit; absent for windows without samples.

    Examples
    --------
    >>> from inference_obs.engine.windows import TimeIndex
    >>> from inference_obs.samples import SampleSet, Series
    >>> s = SampleSet.from_series([Series("g", {}, [10, 20, 30, 40], [1, 1e100, 1, -1e100])])
    >>> w = TimeIndex(s).window(0, 60_000, left_open=True)
    >>> avg_over_time(s, w, range_s=60, rules=Rules.PROMETHEUS_3).values.tolist()
    [0.5]
    """
    if rules is Rules.VICTORIAMETRICS:
        samples, windows = without_nan(samples, windows)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return _finish(samples, windows, plain_sum(samples, windows) / windows.counts, rules)
    mean = mean_242 if rules is Rules.PROMETHEUS_2 else mean_35
    return _finish(samples, windows, mean(samples, windows), rules)


def count_over_time(
    samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules
) -> Evaluation:
    """Number of samples in each window (Prometheus ``count_over_time``).

    Staleness markers are never counted (callers drop them); under
    ``Rules.VICTORIAMETRICS`` NaN samples are not counted either.

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        A count of samples; absent for windows without samples.
    """
    if rules is Rules.VICTORIAMETRICS:
        samples, windows = without_nan(samples, windows)
    return _finish(samples, windows, windows.counts.astype(np.float64), rules)


def min_over_time(
    samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules
) -> Evaluation:
    """Smallest sample of each window (Prometheus ``min_over_time``).

    Prometheus replaces the running minimum when a sample is smaller *or the
    minimum so far is NaN*: NaN samples are skipped and NaN is returned only
    when every sample is NaN. ``numpy.fmin`` has exactly that rule.

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        In the series' unit; absent for windows without samples (and, under
        ``Rules.VICTORIAMETRICS``, for all-NaN windows).
    """
    out = segment_reduce(np.fmin, samples.values, windows.lo, windows.hi)
    return _finish(samples, windows, out, rules)


def max_over_time(
    samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules
) -> Evaluation:
    """Largest sample of each window (Prometheus ``max_over_time``).

    NaN samples are skipped as in :func:`min_over_time`.

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        In the series' unit; absent for windows without samples.
    """
    out = segment_reduce(np.fmax, samples.values, windows.lo, windows.hi)
    return _finish(samples, windows, out, rules)


def last_over_time(
    samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules
) -> Evaluation:
    """Newest sample of each window (Prometheus ``last_over_time``; keeps ``__name__``).

    Under ``Rules.VICTORIAMETRICS`` the newest non-NaN sample.

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        In the series' unit; absent for windows without samples.
    """
    if rules is Rules.VICTORIAMETRICS:
        samples, windows = without_nan(samples, windows)
    newest = np.maximum(windows.hi - 1, 0)
    out = samples.values[newest] if samples.values.size else np.full(newest.shape, np.nan)
    return _finish(samples, windows, out, rules)


def quantile_over_time(
    q: float, samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules
) -> Evaluation:
    """The ``q``-quantile of each window's samples (Prometheus ``quantile_over_time``).

    Prometheus's ``quantile``: ``q`` NaN gives NaN, below 0 ``-Inf``, above 1
    ``+Inf``; otherwise the sorted samples (NaN sorting below every number)
    are interpolated linearly at rank ``q * (n - 1)``. Under
    ``Rules.VICTORIAMETRICS`` NaN samples are ignored first.

    Parameters
    ----------
    q
        The quantile, 0 to 1.
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        In the series' unit; absent for windows without samples.
    """
    if rules is Rules.VICTORIAMETRICS:
        samples, windows = without_nan(samples, windows)
    counts = windows.counts
    out = np.full(counts.shape, np.nan)
    present = counts >= 1
    if np.isnan(q):
        # A NaN quantile is NaN.
        return _finish(samples, windows, out, rules)
    if q < 0 or q > 1:
        # Out of range: -Inf below 0, +Inf above 1.
        return _finish(samples, windows, np.full(counts.shape, -np.inf if q < 0 else np.inf), rules)
    sizes = counts[present]
    # Gather every window's samples, then sort within each window (NaN first).
    owner = np.repeat(np.arange(sizes.size), sizes)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    positions = windows.lo[present][owner] + (np.arange(owner.size) - starts[owner])
    gathered = samples.values[positions]
    nan_last = ~np.isnan(gathered)
    ordered = gathered[np.lexsort((gathered, nan_last, owner))]
    rank = q * (sizes - 1)
    below = np.floor(rank).astype(np.int64)
    above = np.minimum(below + 1, sizes - 1)
    weight = rank - below
    with np.errstate(invalid="ignore", over="ignore"):
        out[present] = ordered[starts + below] * (1 - weight) + ordered[starts + above] * weight
    return _finish(samples, windows, out, rules)
