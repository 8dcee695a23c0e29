"""reset_changes(): exact changes of restarted counters from a few stretches of samples.

One counter scraped every 15 s over two hours (481 samples, the first at
the window's start), counting 1 per second from 1000. Expected changes are
worked out from the generated values, not by the code under test.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from inference_obs.query import Selector, to_promql
from inference_obs.reading.counter_resets import reset_changes, series_change
from inference_obs.samples import Labels, SampleSet, Series, Window
from inference_obs.source.base import Source
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"
WINDOW = Window(datetime.fromtimestamp(0, UTC), datetime.fromtimestamp(7200, UTC))
SELECTOR = Selector("c_total", ())
TIMES = np.arange(0.0, 7201.0, 15.0)


class Reads:
    """Counts the raw samples a source hands out."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self.samples = 0
        self.selectors: list[str] = []

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        got = self._source.raw(selector, window)
        self.samples += int(got.offsets[-1])
        self.selectors.append(to_promql(selector))
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


def _source(*series: Series) -> DatasetSource:
    # Any manifest will do: the engine reads only the samples.
    bundled = read_dataset(BUNDLED)
    return DatasetSource(dataclasses.replace(bundled, samples=SampleSet.from_series(series)))


def _counter(pod: str, values: np.ndarray, times: np.ndarray = TIMES) -> Series:
    return Series("c_total", {"pod": pod}, times, values)


def test_a_restart_costs_a_few_stretches_and_the_change_is_exact() -> None:
    # Restart after the sample at 3000 s (value 4000); two scrapes lost; then
    # counting from 0 again at 3045 s: 1000 + ... the change is 3000 before the
    # restart, then the 4155 counted since (the last value).
    values = 1000.0 + TIMES
    after = TIMES >= 3045.0
    values[after] = TIMES[after] - 3045.0 + 0.0
    keep = (TIMES <= 3000.0) | after
    series = _counter("a", values[keep], TIMES[keep])
    reads = Reads(_source(series, _counter("b", 1000.0 + TIMES)))
    changes = reset_changes(reads, SELECTOR, WINDOW)
    expected = 3000.0 + (7200.0 - 3045.0)
    assert changes[Labels({"pod": "a"})] == pytest.approx(expected, rel=1e-12)
    assert changes[Labels({"pod": "b"})] == pytest.approx(7200.0, rel=1e-12)
    # Two edges and one stretch around the drop, for both series: far from 2 x 481.
    assert reads.samples < 0.15 * 2 * TIMES.size


def test_a_drop_across_a_long_gap_is_read_whole_and_still_exact() -> None:
    # Nothing scraped for 20 minutes across the restart: longer than half a
    # search range (7200 / 32 / 2 = 112.5 s), so the stretches cannot hold the
    # drop and the series is read whole.
    values = 1000.0 + TIMES
    gone = (TIMES > 3000.0) & (TIMES < 4200.0)
    after = TIMES >= 4200.0
    values[after] = TIMES[after] - 4200.0 + 5.0
    series = _counter("a", values[~gone], TIMES[~gone])
    reads = Reads(_source(series))
    changes = reset_changes(reads, SELECTOR, WINDOW)
    assert changes[Labels({"pod": "a"})] == pytest.approx(3000.0 + 3005.0, rel=1e-12)
    assert reads.selectors[-1] == 'c_total{pod="a"}'
    assert reads.samples > TIMES[~gone].size


def test_no_series_no_reads() -> None:
    reads = Reads(_source(_counter("a", 1000.0 + TIMES)))
    assert reset_changes(reads, Selector("other_total", ()), WINDOW) == {}
    assert reads.samples == 0


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 50),  # increment at this scrape
            st.booleans(),  # a restart before this scrape
            st.integers(1, 40),  # scrapes since the last one (gaps up to 10 minutes)
        ),
        min_size=2,
        max_size=200,
    ),
    start=st.integers(0, 1000),
)
def test_any_restarts_and_gaps_give_the_raw_samples_change(
    steps: list[tuple[int, bool, int]], start: int
) -> None:
    # One counter scraped on a 15 s grid with gaps; each restart drops it to
    # the increment since (0 or more), as a restarted server's counter does.
    times, values, t, v = [], [], 0.0, float(start)
    for increment, restart, gap in steps:
        t += 15.0 * gap
        v = float(increment) if restart else v + increment
        times.append(t)
        values.append(v)
    window = Window(datetime.fromtimestamp(0, UTC), datetime.fromtimestamp(t + 15.0, UTC))
    source = _source(_counter("a", np.array(values), np.array(times)))
    raw = source.raw(SELECTOR, window)
    expected = series_change(raw, 0)
    got = reset_changes(source, SELECTOR, window)
    assert got[Labels({"pod": "a"})] == pytest.approx(expected, rel=1e-12, abs=1e-9)
