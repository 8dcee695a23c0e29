"""When each scrape target (or GPU) sent samples: counts, first and last samples, gaps.

Collection health reads the raw samples of one gauge per target kind (an
app gauge for the vLLM targets, GPU utilisation for the DCGM ones) and
groups their series by a key: a scrape target (``instance``), or a GPU. A
key's scrape times are the distinct timestamps of its series (stale markers
and NaN left out), so a target with several engines counts each scrape once.

The scrape interval is measured, not declared: the median spacing of
consecutive samples of each series
(:func:`~inference_obs.reading.alignment.interval_ms`). A gap is a spacing
longer than ``gap_factor`` measured intervals; a key whose last sample lies
more than ``gap_factor`` intervals before the window's end stopped reporting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from inference_obs.reading.alignment import interval_ms
from inference_obs.samples import Labels, SampleSet, is_stale

__all__ = ["Coverage", "Gap", "coverage"]


@dataclass(frozen=True, slots=True)
class Gap:
    """No sample of ``key`` strictly between ``start_ms`` and ``end_ms`` (unix ms)."""

    key: str
    start_ms: int
    end_ms: int

    @property
    def seconds(self) -> float:
        """The gap's length, seconds: the spacing of the two samples around it."""
        return (self.end_ms - self.start_ms) / 1000


@dataclass(frozen=True, slots=True)
class Coverage:
    """Scrape times of the series of one gauge, grouped by key.

    Attributes
    ----------
    interval_ms
        Median spacing of consecutive samples of each series, ms (0 when no
        series has two samples).
    samples
        Per key: its distinct scrape times in the window.
    first_ms, last_ms
        Per key: its first and last scrape time, unix ms.
    gaps
        Spacings longer than ``gap_factor`` intervals, longest first.
    """

    interval_ms: float
    samples: dict[str, int]
    first_ms: dict[str, int]
    last_ms: dict[str, int]
    gaps: tuple[Gap, ...]

    def stopped(self, end_ms: float, gap_factor: float) -> dict[str, int]:
        """Keys whose last sample is over ``gap_factor`` intervals before ``end_ms``: their
        last scrape time (unix ms). Empty when the interval is unknown."""
        if self.interval_ms <= 0:
            return {}
        late = end_ms - gap_factor * self.interval_ms
        return {k: t for k, t in sorted(self.last_ms.items()) if t < late}


def coverage(samples: SampleSet, key: Callable[[Labels], str], gap_factor: float) -> Coverage:
    """The :class:`Coverage` of ``samples`` (raw, one window) with series grouped by ``key``.

    Parameters
    ----------
    samples
        Raw samples of one gauge over the window.
    key
        Names the group of a series from its labels (a target, a GPU).
    gap_factor
        A spacing longer than this many measured intervals is a gap (> 1).

    Examples
    --------
    >>> import numpy as np
    >>> from inference_obs.samples import Series
    >>> times = np.array([0.0, 15.0, 30.0, 75.0, 90.0])
    >>> one = Series("g", {"instance": "a"}, times, np.zeros(5))
    >>> c = coverage(SampleSet.from_series([one]), lambda labels: labels["instance"], 1.75)
    >>> c.interval_ms, c.samples, [(g.key, g.seconds) for g in c.gaps]
    (15000.0, {'a': 5}, [('a', 45.0)])
    """
    times: dict[str, set[int]] = {}
    for i, labels in enumerate(samples.labels):
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        values = samples.values[lo:hi]
        keep = ~is_stale(values) & ~np.isnan(values)
        times.setdefault(key(labels), set()).update(samples.t_ms[lo:hi][keep].tolist())
    interval = interval_ms(samples)
    gaps: list[Gap] = []
    for name, stamps in times.items():
        ordered = np.array(sorted(stamps), dtype=np.int64)
        if interval <= 0 or ordered.size < 2:
            continue
        for j in np.flatnonzero(np.diff(ordered) > gap_factor * interval).tolist():
            gaps.append(Gap(name, int(ordered[j]), int(ordered[j + 1])))
    present = {k: v for k, v in times.items() if v}
    return Coverage(
        interval_ms=interval,
        samples={k: len(v) for k, v in sorted(times.items())},
        first_ms={k: min(v) for k, v in sorted(present.items())},
        last_ms={k: max(v) for k, v in sorted(present.items())},
        gaps=tuple(sorted(gaps, key=lambda g: (-g.seconds, g.key, g.start_ms))),
    )
