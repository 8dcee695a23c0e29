"""Exact changes of counters that reset, without reading their whole window.

A counter's change over a window, resets added back, is ``last - first``
plus, for every reset, the value just before it (the counter restarted from
0, so what it had counted until then is added back). A series without a
reset needs only ``max - min`` (see :mod:`~inference_obs.reading.counter_ratios`);
a restarted one needs the values before its drops. A rolling deploy restarts
every replica of a fleet, so reading each restarted series whole would bring
back the raw fetch the push-down avoids.

:func:`reset_changes` finds the drops instead: one range query of
``resets(x[L]) > 0`` every ``L/2`` (so every pair of neighbouring samples at
most ``L/2`` apart falls inside one of its ranges) marks the stretches with a
drop; only those stretches, and a stretch at each edge of the window for the
first and last samples, are read raw. The drops found are checked against
``resets(x[w])`` over the whole window: a series where they differ (a gap
longer than ``L/2`` across a drop, a NaN between the two samples, an edge
stretch without a sample) is read whole, as before. So the answer is always
the exact change, and usually costs a few stretches instead of the window.

Every range these changes read holds its start: :func:`closed_range` decides
the edges for every engine, in this one place.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial

import numpy as np

from inference_obs.engine.aggregation import without_name
from inference_obs.engine.rules import Rules
from inference_obs.query import Binary, Expr, Matcher, Number, Range, Selector, resets, to_promql
from inference_obs.reading.schedule import soon, together
from inference_obs.samples import Labels, SampleSet, Vector, Window
from inference_obs.source.base import LEFT_OPEN_MARGIN_S, Source

__all__ = [
    "NARROWED_BYTES",
    "PIECES",
    "closed_range",
    "counted_resets",
    "narrowed",
    "narrowings",
    "reset_changes",
    "reset_changes_of",
    "series_change",
]

#: The window is searched for drops in ranges of 1/PIECES of its length.
PIECES = 32


def closed_range(selector: Selector, seconds: float, rules: Rules) -> Range:
    """``selector``'s samples from ``seconds`` before an evaluation time to it, both included.

    An exact change runs from a series' first sample in the window, so a
    scrape exactly at the window's start must be read on every engine, or
    the requests of its first scrape interval are lost (and a mean loses
    them from ``_sum`` and ``_count`` alike, so nothing shows it).

    Parameters
    ----------
    selector
        The series.
    seconds
        The range, seconds (whole milliseconds).
    rules
        The rule set of the engine that evaluates the range.

    Returns
    -------
    Range
        ``selector[seconds]`` where ranges are closed (Prometheus 2.x:
        ``start <= t <= end``), so its answers stay as they are;
        ``selector[seconds + 1ms]`` where they leave their start out
        (Prometheus 3.x, VictoriaMetrics: ``start < t <= end``), which holds
        the sample at the start and none before it (timestamps are whole
        milliseconds).

    Examples
    --------
    >>> from inference_obs.query import to_promql
    >>> to_promql(closed_range(Selector("x_count"), 60, Rules.PROMETHEUS_2))
    'x_count[1m]'
    >>> to_promql(closed_range(Selector("x_count"), 60, Rules.VICTORIAMETRICS))
    'x_count[1m1ms]'
    """
    return selector.over(seconds + LEFT_OPEN_MARGIN_S if rules.left_open else seconds)


def counted_resets(selector: Selector, seconds: float, rules: Rules) -> Expr:
    """Drops of each series of ``selector`` in the ``seconds`` before an evaluation time.

    ``resets(x[w])`` over :func:`closed_range`: a drop from the sample at the
    range's start counts on every engine. The one reset detector: exact
    changes (:func:`reset_changes`) and the collection-health count both ask it.

    Examples
    --------
    >>> from inference_obs.query import to_promql
    >>> to_promql(counted_resets(Selector("x_total"), 60, Rules.VICTORIAMETRICS))
    'resets(x_total[1m1ms])'
    """
    return resets(closed_range(selector, seconds, rules))


def series_change(samples: SampleSet, i: int) -> float:
    """Change of series ``i`` from its first to its last sample, resets added back.

    NaN samples (staleness markers included) are skipped; a drop counts as a
    reset, so the value after it is added (the counter restarted from 0), as
    Prometheus's ``increase`` does before it extrapolates. Unit: the counter's.
    """
    values = _finite(samples, i)
    steps = np.diff(values)
    return float(np.where(steps < 0, values[1:], steps).sum())


def _finite(samples: SampleSet, i: int) -> np.ndarray:
    lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
    values = samples.values[lo:hi]
    return values[~np.isnan(values)]


def narrowed(selector: Selector, keys: list[Labels]) -> Selector:
    """``selector`` narrowed to the values ``keys`` take on each label they all carry."""
    names = set.intersection(*(set(k) for k in keys))
    extra = [Matcher.one_of(n, sorted({k[n] for k in keys})) for n in sorted(names)]
    return selector.where(*extra)


#: The longest narrowed selector, in bytes of PromQL: a question repeats its selector
#: up to three times and must stay under VictoriaMetrics's 16 KiB query limit.
NARROWED_BYTES = 4_000


def narrowings(
    selector: Selector, keys: list[Labels], limit: int = NARROWED_BYTES
) -> list[Selector]:
    """``selector`` :func:`narrowed` to ``keys`` in consecutive runs of them, each selector
    within ``limit`` bytes of PromQL (a key longer than that alone is a run of its own).

    Together they select every series of ``keys`` (a narrowed selector may select
    others too: callers keep the keys they asked for). A fleet restarted whole
    restarts every replica's series: one alternation of every pod would be longer
    than a query may be.

    >>> from inference_obs.query import to_promql
    >>> keys = [Labels({"pod": f"p{i}"}) for i in range(3)]
    >>> [to_promql(s) for s in narrowings(Selector("x"), keys, limit=15)]
    ['x{pod=~"p0|p1"}', 'x{pod="p2"}']
    """
    runs: list[list[Labels]] = []
    for key in keys:
        if runs and len(to_promql(narrowed(selector, [*runs[-1], key])).encode()) <= limit:
            runs[-1].append(key)
        else:
            runs.append([key])
    return [narrowed(selector, run) for run in runs]


def reset_changes_of(
    source: Source, selector: Selector, keys: list[Labels], window: Window
) -> dict[Labels, float]:
    """:func:`reset_changes` of the series of ``selector`` with ``keys`` (labels without
    ``__name__``), read through :func:`narrowings`, all at once."""
    found: dict[Labels, float] = {}
    for part in together(
        [partial(reset_changes, source, s, window) for s in narrowings(selector, keys)]
    ):
        found.update(part)
    return found


def _window(window: Window, start_s: float, end_s: float) -> Window:
    zone = window.start.tzinfo
    return Window(datetime.fromtimestamp(start_s, zone), datetime.fromtimestamp(end_s, zone))


def _spans(starts: list[float], length: float, window: Window) -> Iterator[Window]:
    """Merged ``[t - length, t]`` ranges for the marked ends ``starts``, within ``window``."""
    merged: list[list[float]] = []
    for end in sorted(starts):
        lo, hi = max(end - length, window.start_s), min(end, window.end_s)
        if hi <= lo:
            continue
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return (_window(window, lo, hi) for lo, hi in merged)


def reset_changes(source: Source, selector: Selector, window: Window) -> dict[Labels, float]:
    """Exact change over ``window`` of every series of ``selector``, for series that reset.

    Meant for a selector narrowed to series known to have reset (see the
    module docstring for how few samples it reads). Keys are the series'
    labels without ``__name__``; values are in the counter's unit, resets
    added back, no extrapolation: what :func:`series_change` gives on the
    series' raw samples.
    """
    seconds, rules = window.seconds, source.info().rules
    # PromQL durations are whole milliseconds: L and the step L/2 are rounded down.
    length_ms = max(2, int(seconds * 1000) // PIECES)
    length, edge = length_ms / 1000, (length_ms // 2) / 1000
    marked = Binary(">", counted_resets(selector, length, rules), Number(0))
    # Both asked at once: the stretches are wanted whenever a reset is counted.
    counted_over = counted_resets(selector, seconds, rules)
    counting = soon(lambda: source.instant(counted_over, window.end_s))
    marking = soon(
        lambda: source.range(marked, _window(window, window.start_s, window.end_s + edge), edge),
    )
    counted = counting.result().value
    expected = counted.as_dict() if isinstance(counted, Vector) else {}
    if not expected:
        return {}
    found: dict[Labels, dict[int, float]] = {k: {} for k in expected}
    matrix = marking.result()
    ends = sorted({float(t) / 1000 for t in matrix.t_ms.tolist()})
    # The stretches and both edges are independent reads: asked together.
    edges = (
        _window(window, window.start_s, window.start_s + edge),
        _window(window, window.end_s - edge, window.end_s),
    )
    spans = [*_spans(ends, length, window), *edges]
    *stretches, first, last = together([partial(source.raw, selector, s) for s in spans])
    for raw in stretches:
        for i, labels in enumerate(raw.labels):
            drops = found.get(without_name(labels))
            if drops is None:
                continue
            lo, hi = int(raw.offsets[i]), int(raw.offsets[i + 1])
            keep = ~np.isnan(raw.values[lo:hi])
            values, times = raw.values[lo:hi][keep], raw.t_ms[lo:hi][keep]
            for j in np.flatnonzero(np.diff(values) < 0).tolist():
                drops[int(times[j + 1])] = float(values[j])
    firsts = {without_name(lb): _finite(first, i) for i, lb in enumerate(first.labels)}
    lasts = {without_name(lb): _finite(last, i) for i, lb in enumerate(last.labels)}
    changes: dict[Labels, float] = {}
    whole: list[Labels] = []
    for key, count in expected.items():
        head, tail = firsts.get(key), lasts.get(key)
        if (
            len(found[key]) != count
            or head is None
            or not head.size
            or tail is None
            or not tail.size
        ):
            whole.append(key)
            continue
        changes[key] = float(tail[-1]) - float(head[0]) + sum(found[key].values())
    if whole:
        wanted = set(whole)
        for raw in together([partial(source.raw, s, window) for s in narrowings(selector, whole)]):
            for i, labels in enumerate(raw.labels):
                key = without_name(labels)
                if key in wanted:
                    changes[key] = series_change(raw, i)
    return changes
