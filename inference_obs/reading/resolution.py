"""How finely the per-scrape analyses read a window: each app scrape, or tiles the server reduces.

Queueing, the boundary analysis and the sampled shares (requests waiting,
requests running) look at a deployment's app scrapes one by one. Read raw, a
fleet's scrapes of a few gauges per replica already weigh about 1 % of
everything the fleet exports over the window, whatever its size. So a report
of a large scope reads them in **tiles**: the window is cut into equal spans of
``step`` seconds and the server reduces each span, one range query at step
``step`` of ``f(x[step])`` (:func:`tile_window`): each tile is the range
``x[step]`` that ends at its step, a multiple of ``step`` since the epoch
(not of the window's start, so a tile is the same in every window that
holds it), as the engine defines ranges
(Prometheus 2.x closed at both ends, 3.x and VictoriaMetrics open at the
start). A tile is one row: the largest sample of each series in it, the mean
of its GPU samples, the rate over it.

:func:`tile_step` chooses the width for a report: per scrape while a
deployment's app series times its scrapes in the window fit in :data:`ROWS`,
else the narrowest tile of at least two scrapes that fits (preferring a
whole number of scrape intervals) and divides the window. Everything that
takes a ``step`` reads per scrape with ``None``.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError, SourceUnavailable
from inference_obs.metrics import vllm
from inference_obs.query import (
    Binary,
    Expr,
    Number,
    Selector,
    count_over_time,
    max_over_time,
    to_promql,
)

if TYPE_CHECKING:
    from inference_obs.samples import Window
    from inference_obs.source.base import Source

__all__ = [
    "ENGINE_LABELS",
    "ROWS",
    "Resolution",
    "positive_share",
    "series_count",
    "step_for",
    "tile_ms",
    "tile_step",
    "tile_window",
]

#: App series x rows a deployment is read at by default: per scrape up to this
#: many, else in tiles. A 16-replica deployment over 6 h of 15 s scrapes (23,040
#: scrapes) is then read in 45 s tiles, and one over an hour at 60 s per scrape.
ROWS = 8_000

Resolution = float | Literal["auto", "scrape"]
"""How a report reads the per-scrape analyses: ``auto`` (:func:`tile_step`),
``scrape`` (every app scrape), or a tile width in seconds."""


def tile_ms(window: Window, step: float) -> int:
    """``step`` (seconds) as whole milliseconds, checked to cut ``window`` into equal tiles.

    Raises
    ------
    ValueError
        When ``step`` is not a positive whole number of milliseconds, is
        longer than the window, or does not divide it (naming the nearest
        widths that do).
    """
    if isinstance(step, bool) or not isinstance(step, int | float) or not math.isfinite(step):
        raise ConfigurationError(f"tile step must be a number of seconds, got {step!r}")
    ms = round(step * 1000)
    if ms <= 0 or abs(step * 1000 - ms) > 1e-6:
        raise ConfigurationError(
            f"tile step must be a positive whole number of milliseconds, got {step!r}"
        )
    span = round(window.seconds * 1000)
    if ms > span:
        raise ConfigurationError(
            f"tile step {step:g} s is longer than the {window.seconds:g} s window"
        )
    if span % ms:
        wider = next(n for n in range(span // ms, 0, -1) if span % n == 0)
        narrower = next(n for n in range(span // ms + 1, span + 1) if span % n == 0)
        raise ConfigurationError(
            f"tile step {step:g} s does not cut the {window.seconds:g} s window into equal "
            f"tiles; {span / narrower / 1000:g} s or {span / wider / 1000:g} s would"
        )
    return ms


def tile_window(window: Window, step: float) -> Window:
    """The range query window whose steps end the tiles of ``step`` seconds in ``window``.

    Tiles are anchored on absolute time: a tile ends at a multiple of the
    step since the epoch (unix time 0), so the same tile is the same row in
    every window that holds it, however the window's start falls. The tiles
    are those wholly inside the window; where its start or end is not a
    multiple of the step, the part before the first tile and after the last
    (each shorter than a tile) is in none.

    Raises
    ------
    ConfigurationError
        When ``step`` is not a valid width (:func:`tile_ms`), or no whole
        tile anchored so lies in the window.
    """
    # Here and below, numpy's modules are imported where they run, not at the top: the
    # command line reads ROWS and Resolution from here to build its options, and its
    # commands that read no samples (lint, --version) load no numpy.
    from inference_obs.samples import Window

    ms = tile_ms(window, step)
    first = math.ceil(round(window.start_s * 1000) / ms) * ms + ms
    last = math.floor(round(window.end_s * 1000) / ms) * ms
    if last < first:
        raise ConfigurationError(
            f"no tile of {step:g} s ending at a multiple of {step:g} s since the epoch lies "
            f"within the {window.seconds:g} s window; give a narrower tile step"
        )
    zone = window.start.tzinfo
    # One tile: a range query of one step, its end a millisecond after its start.
    return Window(
        datetime.fromtimestamp(first / 1000, zone),
        datetime.fromtimestamp(max(last, first + 1) / 1000, zone),
    )


def series_count(source: Source, selector: Selector, window: Window) -> int:
    """How many of ``selector``'s series have a sample in ``window``: one instant query of
    ``count(count_over_time(x[w]))``, one number whatever the fleet's size.

    Raises
    ------
    SourceUnavailable
        When the answer is no count (NaN, infinite, negative or fractional):
        ``count`` gives a whole number on every engine, so the source is broken.
    """
    from inference_obs.samples import Vector  # see tile_window

    counted = count_over_time(selector.over(window.seconds)).count()
    answer = source.instant(counted, window.end_s).value
    if not isinstance(answer, Vector) or not len(answer):
        return 0
    value = float(answer.values[0])
    if not (value >= 0 and value.is_integer()):  # NaN and infinities fail too
        raise SourceUnavailable(
            f"malformed answer: {value!r} is not a number of series", promql=to_promql(counted)
        )
    return int(value)


def tile_step(
    source: Source, deployment: Deployment, window: Window, *, rows: int = ROWS
) -> float | None:
    """The tile width (seconds) to read ``deployment``'s scrapes at, or None for per scrape.

    Two instant queries: the app scrape interval (``vllm:num_requests_waiting``,
    :func:`~inference_obs.reading.alignment.scrape_interval_ms`) and the
    number of its series. Per scrape when series x scrapes <= ``rows`` (or
    the window holds fewer than two scrapes); else the narrowest width of at
    least two scrapes with series x tiles <= ``rows`` that divides the window,
    a whole number of scrape intervals where one is at most twice as wide as
    the narrowest, and at widest the whole window.

    Parameters
    ----------
    source, deployment, window
        Whose scrapes, and over which window.
    rows
        Largest number of app series x rows to read (>= 1).
    """
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ConfigurationError(f"rows must be a whole number >= 1, got {rows!r}")
    from inference_obs.reading.alignment import scrape_interval_ms  # see tile_window

    selector = vllm.NUM_REQUESTS_WAITING.select(deployment.matchers)
    interval = scrape_interval_ms(source, selector, window)
    series = series_count(source, selector, window)
    span = round(window.seconds * 1000)
    if interval <= 0 or series <= 0 or series * span / interval <= rows:
        return None
    if span < 2 * interval:  # no tile of two scrapes fits the window
        return None
    # At least one tile per series: past that many series the rows cannot be fewer.
    most = max(1, min(int(rows // series), span // (2 * interval)))
    fits = [n for n in range(most, 0, -1) if span % n == 0]
    whole_s = max(1, round(interval / 1000)) * 1000  # scrape intervals are whole seconds
    whole = [n for n in fits if (span // n) % whole_s == 0 and 2 * n >= fits[0]]
    return span // (whole or fits)[0] / 1000


def step_for(
    source: Source, deployment: Deployment, window: Window, resolution: Resolution
) -> float | None:
    """The ``step`` to read ``deployment`` at: None (per scrape) or a tile width, seconds.

    ``auto`` asks :func:`tile_step`; a width is checked against the window
    (:func:`tile_ms`), so a bad one fails before any analysis runs.
    """
    if resolution == "auto":
        return tile_step(source, deployment, window, rows=ROWS)
    if resolution == "scrape":
        return None
    if isinstance(resolution, str):
        raise ConfigurationError(
            f"resolution must be 'auto', 'scrape' or seconds, got {resolution!r}"
        )
    tile_ms(window, resolution)
    return float(resolution)


#: Labels that tell apart the engines of one scrape target (vLLM's data-parallel ranks):
#: a share of scrapes combines them, so that a replica of eight engines is not counted as
#: eight scrapes of which one queued.
ENGINE_LABELS = ("engine",)


def positive_share(
    source: Source, selector: Selector, window: Window, step: float | None
) -> tuple[float | None, tuple[Expr, ...], str]:
    """Share (ratio 0-1) of scrapes in which ``selector`` was above 0: value, what was
    read, and how.

    A scrape is one target's at one time, its engines (:data:`ENGINE_LABELS`)
    combined: it counts when any engine's sample is above 0. Per scrape
    (``step`` None) from the raw samples, NaN left out. Per tile, by the
    server: ``sum(max without (engine) (max_over_time(x[step])) > bool 0)``
    and the ``count`` of the same every tile, their totals' ratio: the share
    of (target, tile) pairs in which a sample was above 0. None when there is
    no sample.
    """
    import numpy as np  # see tile_window

    if step is None:
        samples = source.raw(selector, window)
        above: dict[tuple[tuple[str, str], ...], dict[int, bool]] = {}
        for i, labels in enumerate(samples.labels):
            lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
            values = samples.values[lo:hi]
            keep = ~np.isnan(values)
            target = tuple(sorted((k, v) for k, v in labels.items() if k not in ENGINE_LABELS))
            seen = above.setdefault(target, {})
            times, ups = samples.t_ms[lo:hi][keep].tolist(), (values[keep] > 0).tolist()
            for t, up in zip(times, ups, strict=True):
                seen[t] = seen.get(t, False) or up
        counted = [up for seen in above.values() for up in seen.values()]
        share = float(np.mean(counted)) if counted else None
        how = (
            f"share of scrapes of {to_promql(selector)} in the window with a raw sample > 0, "
            f"the engines of a target combined (without {', '.join(ENGINE_LABELS)})"
        )
        return share, (selector.over(window.seconds),), how
    top = max_over_time(selector.over(step)).max(without=ENGINE_LABELS)
    up, every = Binary(">", top, Number(0), bool_=True).sum(), top.count()
    tiles = tile_window(window, step)
    totals = [float(source.range(expr, tiles, step).values.sum()) for expr in (up, every)]
    how = (
        f"sum over {step:g} s tiles of {to_promql(up)} / sum over the tiles of "
        f"{to_promql(every)}: the share of (target, tile) pairs with a sample > 0"
    )
    return (totals[0] / totals[1] if totals[1] else None), (up, every), how
