"""rate, increase, delta, irate and idelta over range vectors, vectorised across series.

Prometheus's ``extrapolatedRate`` (``promql/functions.go``) in both orders it
has had (2.42: zero clamp before the 110% test; 2.51 and every 3.x: after),
``instantValue`` for ``irate``/``idelta``, and a documented model of
VictoriaMetrics's rollups. See ``shared/reference/promql-semantics.md``
section 3 (Prometheus) and section 11 (VictoriaMetrics).

Every function takes the samples with staleness markers already dropped
(:func:`~inference_obs.engine.windows.drop_stale`) and one window per series.
"""

from __future__ import annotations

import numpy as np

from inference_obs.engine.facts import Facts
from inference_obs.engine.result import Evaluation
from inference_obs.engine.rules import Rules
from inference_obs.engine.segments import fold_positions, without_nan
from inference_obs.engine.windows import Windows
from inference_obs.errors import Annotation
from inference_obs.samples import Floats, Ints, SampleSet

__all__ = ["delta", "idelta", "increase", "irate", "rate"]

# Prometheus extrapolates to a window edge only when the first/last sample is
# within 110% of the mean sample spacing of it (extrapolatedRate).
_EXTRAPOLATION_THRESHOLD = 1.1


def rate(samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules) -> Evaluation:
    """Per-second increase of counters over each window.

    Follows Prometheus ``rate`` (``extrapolatedRate`` with ``isCounter`` and
    ``isRate``): the :func:`increase` divided by the selector's range, not by
    the span the samples cover. Under ``Rules.VICTORIAMETRICS`` the increase is
    divided by the seconds between the base sample and the last one instead.

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds.
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        Per second; absent where a window holds fewer than two samples.

    Examples
    --------
    >>> from inference_obs.engine.windows import TimeIndex
    >>> from inference_obs.samples import SampleSet, Series
    >>> c = Series("c", {}, [0, 60, 120, 180, 240, 300], [0, 6, 12, 18, 24, 30])
    >>> s = SampleSet.from_series([c])
    >>> w = TimeIndex(s).window(0, 300_000, left_open=False)
    >>> rate(s, w, range_s=300, rules=Rules.PROMETHEUS_2).values.tolist()
    [0.1]
    """
    return _extrapolated(samples, windows, range_s, rules, "rate", counter=True, per_second=True)


def increase(samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules) -> Evaluation:
    """Increase of counters over each window, corrected for resets and extrapolated.

    Prometheus ``increase`` (``extrapolatedRate`` with ``isCounter``): every
    strict decrease adds the value before it (the counter restarted from 0);
    the first-to-last difference is stretched to the window edges where the
    edge samples lie within 110% of the mean spacing, else by half a spacing,
    never below the counter's zero point at the start. ``Rules.PROMETHEUS_2``
    applies that zero clamp before the 110% test (2.42), ``Rules.PROMETHEUS_3``
    after it (2.51 and all 3.x).

    ``Rules.VICTORIAMETRICS`` (a model of MetricsQL ``increase``, documented
    rather than copied): NaN samples are ignored; the base is the last sample
    *before* the window when the series has one (however old), else the first
    sample in the window; the result is the last value minus the base plus
    the same reset correction, not extrapolated; fewer than two points (base
    included) or a NaN result gives no output. Real VictoriaMetrics adds
    heuristics this model leaves out (a counter first seen inside the window
    may be assumed to start at 0; small decreases may be taken as jitter; the
    earlier sample is only used within a look-behind limit).

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused by ``increase`` itself).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        In the counter's unit; absent where a window holds fewer than two samples.

    Examples
    --------
    >>> from inference_obs.engine.windows import TimeIndex
    >>> from inference_obs.samples import SampleSet, Series
    >>> s = SampleSet.from_series([Series("c", {}, [60, 120, 180], [10, 20, 30])])
    >>> w = TimeIndex(s).window(0, 240_000, left_open=True)
    >>> increase(s, w, range_s=240, rules=Rules.PROMETHEUS_3).values.tolist()
    [40.0]
    """
    return _extrapolated(
        samples, windows, range_s, rules, "increase", counter=True, per_second=False
    )


def delta(samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules) -> Evaluation:
    """Last minus first value of gauges, extrapolated to the window edges.

    Prometheus ``delta`` (``extrapolatedRate`` without ``isCounter``): no reset
    correction and no zero clamp, otherwise as :func:`increase`. Under
    ``Rules.VICTORIAMETRICS``: last value minus the base sample (see
    :func:`increase`), not extrapolated.

    Parameters
    ----------
    samples
        Series without staleness markers.
    windows
        The range selector's window for every series.
    range_s
        The selector's range, seconds (unused by ``delta`` itself).
    rules
        Which engine's rules to follow.

    Returns
    -------
    Evaluation
        In the gauge's unit; absent where a window holds fewer than two samples.
    """
    return _extrapolated(samples, windows, range_s, rules, "delta", counter=False, per_second=False)


def irate(samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules) -> Evaluation:
    """Per-second rate from the last two samples of each window.

    Prometheus ``irate`` (``instantValue`` with ``isRate``): the last value
    alone if it is below the one before (a reset), else their difference,
    divided by their distance in seconds. ``Rules.PROMETHEUS_3`` states the
    v3.4 rule (NaN if either sample is NaN) explicitly; for float samples the
    2.42 arithmetic yields the same NaN. Under ``Rules.VICTORIAMETRICS`` NaN
    samples are ignored and the sample before the window counts as one of the
    two when the window holds only one.

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
        Per second; absent where fewer than two samples are available.
    """
    return _instant(samples, windows, rules, per_second=True)


def idelta(samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules) -> Evaluation:
    """Difference of the last two samples of each window.

    Prometheus ``idelta`` (``instantValue`` without ``isRate``): no reset
    handling, no division. Under ``Rules.VICTORIAMETRICS`` as for :func:`irate`.

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
        In the series' unit; absent where fewer than two samples are available.
    """
    return _instant(samples, windows, rules, per_second=False)


def _reset_corrected(
    change: Floats, facts: Facts, first: Ints, last: Ints, *, apart: bool = False
) -> Floats:
    """``change`` plus, per window ``first..last``, the value before every counter reset in it.

    A strict decrease between neighbours is a counter reset: the counter is
    assumed to have restarted from 0, so the value before the drop is added.
    NaN never counts (comparisons with NaN are false). Prometheus adds these
    values to the change one by one, in time order; with ``apart`` they are
    first summed on their own, in time order, and the sum added (as
    VictoriaMetrics accumulates its correction). Either way the cost is the
    number of resets in the windows, read from the set's cached drop
    positions, not the windows' length; nothing runs when no window holds one.
    """
    drops = facts.drops
    # The pairs (j, j + 1) inside a window have first <= j < last.
    begin = np.searchsorted(drops, first, side="left")
    end = np.searchsorted(drops, last, side="left")
    held = end > begin
    with np.errstate(invalid="ignore", over="ignore"):
        if not held.any():
            # Adding 0.0 keeps the sign of zero the engine has always given (+0).
            return change + 0.0

        def step(x: Floats, k: float, state: tuple[Floats, ...]) -> tuple[Floats, ...]:
            with np.errstate(invalid="ignore", over="ignore"):
                return (state[0] + x,)

        # Only the drops the windows hold are read.
        first_drop, last_drop = int(begin[held].min()), int(end[held].max())
        added = facts.samples.values[drops[first_drop:last_drop]]
        start = np.zeros(change.shape) if apart else change + 0.0
        (total,) = fold_positions(added, begin - first_drop, end - first_drop, (start,), step)
        corrected: Floats = change + total if apart else total
        return corrected


def _too_few(function: str, count: int) -> tuple[Annotation, ...]:
    if count == 0:
        return ()
    return (
        Annotation(
            "too_few_samples",
            f"{function}: too few samples to extrapolate in {count} series "
            "(a window needs at least 2); they are left out of the result",
        ),
    )


def _extrapolated(
    samples: SampleSet,
    windows: Windows,
    range_s: float,
    rules: Rules,
    function: str,
    *,
    counter: bool,
    per_second: bool,
) -> Evaluation:
    if rules is Rules.VICTORIAMETRICS:
        return _from_base(samples, windows, function, counter=counter, per_second=per_second)
    counts = windows.counts
    # Fewer than two samples: no result at all (the series is dropped).
    present = counts >= 2
    # Usually every window has two: then no selection, no copy into a NaN array.
    every = bool(present.all())
    first, last = windows.lo, windows.hi - 1
    if not every:
        first, last = first[present], last[present]
    v, t = samples.values, samples.t_ms
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        change = v[last] - v[first]
        if counter:
            change = _reset_corrected(change, windows.facts_for(samples), first, last)
        to_start = (t[first] - windows.start_ms) / 1000.0
        to_end = (windows.end_ms - t[last]) / 1000.0
        covered = (t[last] - t[first]) / 1000.0
        spacing = covered / ((counts if every else counts[present]) - 1)
        limit = spacing * _EXTRAPOLATION_THRESHOLD
        # Counters only: never extrapolate back past the point where the
        # straight line through the samples would reach zero.
        clamp = (change > 0) & (v[first] >= 0) if counter else np.zeros(change.shape, bool)
        to_zero = covered * v[first] / change
        if rules is Rules.PROMETHEUS_2:
            # 2.42: the zero clamp comes first, so a start edge it shortens
            # below the 110% limit is extrapolated to in full.
            to_start = np.where(clamp, np.minimum(to_start, to_zero), to_start)
            to_start = np.where(to_start < limit, to_start, spacing / 2)
            to_end = np.where(to_end < limit, to_end, spacing / 2)
        else:
            # 2.51+ and 3.x: an edge beyond 110% of the spacing is taken as the
            # series starting/stopping there (half a spacing), then clamped.
            to_start = np.where(to_start >= limit, spacing / 2, to_start)
            to_start = np.where(clamp, np.minimum(to_start, to_zero), to_start)
            to_end = np.where(to_end >= limit, spacing / 2, to_end)
        extended = covered + to_start + to_end
        result = change * extended / covered
        if per_second:
            # rate divides by the selector's range, not by the extended span.
            result = result / range_s
    if every:
        return Evaluation(result, present)
    out = np.full(counts.shape, np.nan)
    out[present] = result
    too_few = int(np.count_nonzero(counts == 1))
    return Evaluation(out, present, _too_few(function, too_few))


def _bases(samples: SampleSet, windows: Windows) -> tuple[Ints, Ints]:
    """VictoriaMetrics: the base index (sample before the window if any) and the last index."""
    counts = windows.counts
    before = windows.lo - 1
    has_before = (before >= samples.offsets[:-1]) & (counts >= 1)
    base = np.where(has_before, before, windows.lo)
    return base, windows.hi - 1


def _from_base(
    samples: SampleSet, windows: Windows, function: str, *, counter: bool, per_second: bool
) -> Evaluation:
    # VictoriaMetrics ignores NaN samples in every rollup.
    samples, windows = without_nan(samples, windows)
    base, last = _bases(samples, windows)
    # The base and at least one later sample in the window are needed.
    present = (windows.counts >= 1) & (last > base)
    out = np.full(base.shape, np.nan)
    b, e = base[present], last[present]
    v, t = samples.values, samples.t_ms
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        change = v[e] - v[b]
        if counter:
            change = _reset_corrected(change, windows.facts_for(samples), b, e, apart=True)
        if per_second:
            # No extrapolation: divided by the span of the samples used.
            change = change / ((t[e] - t[b]) / 1000.0)
    out[present] = change
    too_few = int(np.count_nonzero((windows.counts >= 1) & ~present))
    # NaN results are removed from VictoriaMetrics's output.
    present &= ~np.isnan(out)
    return Evaluation(out, present, _too_few(function, too_few))


def _instant(samples: SampleSet, windows: Windows, rules: Rules, *, per_second: bool) -> Evaluation:
    if rules is Rules.VICTORIAMETRICS:
        samples, windows = without_nan(samples, windows)
        base, last = _bases(samples, windows)
        previous = np.maximum(last - 1, base)
        present = (windows.counts >= 1) & (last > base)
    else:
        last = windows.hi - 1
        previous = last - 1
        # Fewer than two samples: no result.
        present = windows.counts >= 2
    # (Prometheus also drops a pair 0 ms apart; timestamps in a sample set
    # are strictly increasing, so that cannot happen here.)
    out = np.full(last.shape, np.nan)
    e, p = last[present], previous[present]
    v, t = samples.values, samples.t_ms
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if per_second:
            # irate: a drop is a counter reset, so the last value alone is the increase.
            change = np.where(v[e] < v[p], v[e], v[e] - v[p])
            change = change / ((t[e] - t[p]) / 1000.0)
            if rules is Rules.PROMETHEUS_3:
                # v3.4+: NaN if either sample is NaN.
                change = np.where(np.isnan(v[e]) | np.isnan(v[p]), np.nan, change)
        else:
            change = v[e] - v[p]
    out[present] = change
    if rules is Rules.VICTORIAMETRICS:
        # NaN results are removed from VictoriaMetrics's output.
        present &= ~np.isnan(out)
    return Evaluation(out, present)
