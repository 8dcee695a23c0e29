"""Any label value, written into a real server, is selected back by exactly its matcher.

Hypothesis generates label values (quotes, backslashes, newlines, ``}``, NUL
and other control characters, U+FFFD, regex metacharacters, non-ASCII, emoji
and arbitrary code points); each batch is written as series into Prometheus
(remote write) and VictoriaMetrics (JSON import), then selected back with the
builder's literal matchers, rendered by ``to_promql``: every value with its
equality matcher, which must select exactly its own series; the batch in runs
of 2 to 6 values with ``one_of``, which must select exactly that run; and
every fifth value's first one to three characters with ``prefix``, which must
select exactly the batch's values that start with them. At least 1,000
distinct values are checked per server. A fixed batch (``HOSTILE``) of values
that defeat a naive rendering on one server or the other runs first.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings, strategies as st

from inference_obs.query import Matcher, Selector, to_promql
from tests.integration.servers import (
    PrometheusServer,
    SeriesSamples,
    VictoriaMetricsServer,
)
from tests.properties.strategies import label_values

pytestmark = pytest.mark.integration

METRIC = "roundtrip_label"
BATCH = 150
BATCHES = 16  # 16 x 150 = 2,400 generated values per server; short ones repeat across batches
MINIMUM_DISTINCT = 1000
RUNS = (2, 3, 4, 5, 6)  # one_of sizes, in turn
PREFIX_EVERY = 5  # every fifth value lends its start to a prefix matcher
# Values that defeat a naive rendering, ordered so that each one_of run of
# RUNS's sizes holds a case: VictoriaMetrics 1.79 merges "\x02|a" into a
# character class that selects "2", refuses "x\x01|x\x02", and reads the text
# "\x02" after a backslash as that byte; Prometheus 2.42 refuses a raw U+FFFD.
HOSTILE = [
    *("\x02", "a"),
    *("2", "x\x01", "x\x02"),
    *("x1", "C:\\x02", "b", "C:\\x002"),
    *("\ufffd", "\ufffd\ufffd", "c\x00", "c0", "\x01"),
]


def _series(batch_id: str, values: list[str], now_ms: int) -> list[SeriesSamples]:
    return [
        ({"__name__": METRIC, "batch": batch_id, "v": value}, [(now_ms, float(i))])
        for i, value in enumerate(values)
    ]


def _wait_until_searchable(
    server: VictoriaMetricsServer, batch_id: str, size: int, at: float
) -> None:
    # VictoriaMetrics registers new series in its per-day index asynchronously:
    # an instant query can miss series that /api/v1/export already returns.
    # Wait (bounded) until the whole batch is visible without the matcher under test.
    count = to_promql(Selector(METRIC, (Matcher.equal("batch", batch_id),)).count())
    deadline = time.monotonic() + 10
    while True:
        result = server.query(count, at)["result"]
        if result and float(result[0]["value"][1]) == size:
            return
        assert time.monotonic() < deadline, f"{count} never reached {size}: {result}"
        time.sleep(0.1)


def _check_selects_exactly(
    server: PrometheusServer | VictoriaMetricsServer, batch_id: str, values: list[str], at: float
) -> None:
    for i, value in enumerate(values):
        selector = Selector(METRIC, (Matcher.equal("batch", batch_id), Matcher.equal("v", value)))
        result = server.query(to_promql(selector), at)["result"]
        assert [r["metric"]["v"] for r in result] == [value], (
            f"{to_promql(selector)} selected {[r['metric'] for r in result]}"
        )
        assert float(result[0]["value"][1]) == i


def _selected(
    server: PrometheusServer | VictoriaMetricsServer, batch_id: str, matcher: Matcher, at: float
) -> list[str]:
    selector = Selector(METRIC, (Matcher.equal("batch", batch_id), matcher))
    return sorted(r["metric"]["v"] for r in server.query(to_promql(selector), at)["result"])


def _runs(values: list[str]) -> Iterator[list[str]]:
    """``values`` cut into consecutive runs of RUNS's sizes, in turn."""
    start = 0
    for size in itertools.cycle(RUNS):
        if start >= len(values):
            return
        yield values[start : start + size]
        start += size


def _check_one_of_and_prefix(
    server: PrometheusServer | VictoriaMetricsServer, batch_id: str, values: list[str], at: float
) -> None:
    for run in _runs(values):
        matcher = Matcher.one_of("v", run)
        assert _selected(server, batch_id, matcher, at) == sorted(run), matcher
    for i, value in enumerate(values[::PREFIX_EVERY]):
        start = value[: 1 + i % 3]
        matcher = Matcher.prefix("v", start)
        wanted = sorted(v for v in values if v.startswith(start))
        assert _selected(server, batch_id, matcher, at) == wanted, matcher


def _run(server: PrometheusServer | VictoriaMetricsServer, tag: str) -> set[str]:
    seen: set[str] = set()
    counter = iter(range(10**6))

    @settings(
        max_examples=BATCHES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(st.lists(label_values, min_size=BATCH, max_size=BATCH, unique=True))
    @example(HOSTILE)
    def check(values: list[str]) -> None:
        batch_id = f"{tag}-{next(counter)}"
        now_ms = int(time.time() * 1000)
        series = _series(batch_id, values, now_ms)
        if isinstance(server, PrometheusServer):
            server.remote_write(series)
        else:
            server.import_series(series)
            _wait_until_searchable(server, batch_id, len(values), now_ms / 1000)
        _check_selects_exactly(server, batch_id, values, now_ms / 1000)
        _check_one_of_and_prefix(server, batch_id, values, now_ms / 1000)
        seen.update(values)

    check()
    return seen


def test_prometheus_selects_each_value_exactly(empty_prometheus: PrometheusServer) -> None:
    assert len(_run(empty_prometheus, "prom")) >= MINIMUM_DISTINCT


def test_victoria_metrics_selects_each_value_exactly(
    victoria_metrics: VictoriaMetricsServer,
) -> None:
    assert len(_run(victoria_metrics, "vm")) >= MINIMUM_DISTINCT
