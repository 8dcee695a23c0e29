"""Range-vector functions with Prometheus's numeric semantics, vectorised across series.

Every function has the signature
``f(samples, windows, *, range_s, rules) -> Evaluation`` (``quantile_over_time``
takes ``q`` first): ``samples`` without staleness markers
(:func:`~inference_obs.engine.windows.drop_stale`), one window per series
(:meth:`~inference_obs.engine.windows.TimeIndex.window`, built with
``rules.left_open``), ``range_s`` the selector's range in seconds. The result
holds one value per series and whether that series is in the output.

The extrapolating functions live in :mod:`~inference_obs.engine.extrapolation`,
the ``*_over_time`` family in :mod:`~inference_obs.engine.over_time`; both are
re-exported here with ``resets`` and ``changes``. :data:`RANGE_FUNCTIONS` maps
PromQL names to them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from inference_obs.engine.extrapolation import delta, idelta, increase, irate, rate
from inference_obs.engine.facts import count_between
from inference_obs.engine.over_time import (
    avg_over_time,
    count_over_time,
    last_over_time,
    max_over_time,
    min_over_time,
    quantile_over_time,
    sum_over_time,
)
from inference_obs.engine.result import Evaluation
from inference_obs.engine.rules import Rules
from inference_obs.engine.segments import without_nan
from inference_obs.engine.windows import Windows
from inference_obs.samples import Ints, SampleSet

__all__ = [
    "RANGE_FUNCTIONS",
    "avg_over_time",
    "changes",
    "count_over_time",
    "delta",
    "idelta",
    "increase",
    "irate",
    "last_over_time",
    "max_over_time",
    "min_over_time",
    "quantile_over_time",
    "rate",
    "resets",
    "sum_over_time",
]


def _counted(windows: Windows, pairs: Ints) -> Evaluation:
    counts = pairs.astype(np.float64)
    # At least one sample, else no output; one sample counts 0.
    present = windows.counts >= 1
    return Evaluation(np.where(present, counts, np.nan), present)


def resets(samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules) -> Evaluation:
    """Number of counter resets in each window (Prometheus ``resets``).

    Counts the strict decreases between neighbouring samples; a NaN sample
    never counts (comparisons with NaN are false). Under
    ``Rules.VICTORIAMETRICS`` NaN samples are ignored first, so a drop across
    a NaN counts.

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
        A count; absent for windows without samples, 0 for a single sample.

    Examples
    --------
    >>> from inference_obs.engine.windows import TimeIndex
    >>> from inference_obs.samples import SampleSet, Series
    >>> s = SampleSet.from_series([Series("c", {}, [0, 60, 120, 180], [5, 1, 2, 0])])
    >>> w = TimeIndex(s).window(0, 180_000, left_open=False)
    >>> resets(s, w, range_s=180, rules=Rules.PROMETHEUS_2).values.tolist()
    [2.0]
    """
    if rules is Rules.VICTORIAMETRICS:
        samples, windows = without_nan(samples, windows)
    # The pairs (j, j + 1) inside a window have lo <= j < hi - 1.
    drops = windows.facts_for(samples).drops
    return _counted(windows, count_between(drops, windows.lo, windows.hi - 1))


def changes(samples: SampleSet, windows: Windows, *, range_s: float, rules: Rules) -> Evaluation:
    """Number of value changes in each window (Prometheus ``changes``).

    A pair of neighbours counts when the values differ and are not both NaN
    (NaN to a number, or a number to NaN, is a change). Under
    ``Rules.VICTORIAMETRICS`` NaN samples are ignored first.

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
        A count; absent for windows without samples, 0 for a single sample.
    """
    if rules is Rules.VICTORIAMETRICS:
        samples, windows = without_nan(samples, windows)
    return _counted(windows, windows.facts_for(samples).count_changes(windows.lo, windows.hi))


#: PromQL function name -> implementation (``quantile_over_time`` takes ``q`` first).
RANGE_FUNCTIONS: dict[str, Callable[..., Evaluation]] = {
    "avg_over_time": avg_over_time,
    "changes": changes,
    "count_over_time": count_over_time,
    "delta": delta,
    "idelta": idelta,
    "increase": increase,
    "irate": irate,
    "last_over_time": last_over_time,
    "max_over_time": max_over_time,
    "min_over_time": min_over_time,
    "quantile_over_time": quantile_over_time,
    "rate": rate,
    "resets": resets,
    "sum_over_time": sum_over_time,
}
