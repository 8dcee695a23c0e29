"""The harness itself: data written each way comes back exactly from the real servers.

Which label-value characters each path stores, found empirically on
Prometheus 2.42.0 and VictoriaMetrics 1.79.5 (every code point U+0000-U+001F,
U+007F, U+0080, U+0085, U+00A0, U+2028, U+2029, U+FEFF, U+FFFD, U+FFFF,
U+10FFFF, combining marks, emoji, and `"\\}{,=#'` plus space):

* promtool backfill (OpenMetrics text), remote write (protobuf), VM JSON
  import: every one round-trips exactly, NUL and ``\\r`` included. The
  writer escapes only ``"``, ``\\`` and newline; everything else goes raw.
* No path can carry an empty value: both servers store the series without
  that label (the writer refuses it). Lone surrogates are not text and
  cannot be encoded at all.
* Bytes that are not UTF-8 (not a ``str``, so only by hand): promtool refuses
  the file ("invalid UTF-8 label value"); remote write stores them and the
  JSON API returns U+FFFD; VM stores them and returns the raw bytes in its JSON.

Other behaviour pinned here: VM 1.79 answers 204 to an import whose lines or
samples it skipped (``import_series`` checks ``/api/v1/export`` for that), it
drops NaN samples from every result, and it stores values as decimals with
about 12 significant digits, so VM numbers are never bit-exact.
"""

from __future__ import annotations

import io
import json
import math
import socket
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from inference_obs.samples import Series
from inference_obs.source.openmetrics.writer import write_openmetrics
from tests.integration.servers import (
    PrometheusFactory,
    PrometheusServer,
    SeriesSamples,
    VictoriaMetricsServer,
    encode_write_request,
    free_port,
    require_binary,
)

pytestmark = pytest.mark.integration

# Label values that stress every quoting layer: OpenMetrics text, protobuf,
# JSON, PromQL results. One series per value, told apart by the `case` label.
TRICKY_VALUES = (
    'double "quotes"',
    "back\\slash and \\n and \\\\",
    "new\nline",
    "closing } brace, and { = , #",
    "non-ASCII: é ü ß 中文 ﷺ",
    "emoji 😀👍🏽 and a combining e\u0301",
    'all at once: "\\\n}😀',
    "carriage\rreturn and\ttab",
    "every C0 control and DEL: " + "".join(map(chr, range(0x20))) + "\x7f",
    "C1 controls \x80\x85, NBSP \xa0, separators \u2028\u2029, BOM \ufeff, \ufffd",
    "nonchars \uffff \U0010ffff",
    " leading and trailing spaces ",
)

# Backfill at fixed 2023 times: Prometheus retention counts back from the
# newest block, not the wall clock, so any time works.
T0 = 1_700_000_000
# Odd values, and millisecond timestamps that a naive writer would corrupt.
EXACT_TIMES = T0 + np.array([0.0, 0.001, 0.002, 0.003, 0.999, 1.0, 1.5, 61.001])
EXACT_VALUES = np.array([0.1, -0.0, 5e-324, 1.7976931348623157e308, np.nan, np.inf, -np.inf, 1 / 3])


def _same_float(a: float, b: float) -> bool:
    """Equal bit for bit where it matters: NaN == NaN, and -0.0 != 0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _raw_samples(result: dict[str, Any]) -> list[tuple[int, float]]:
    """The single series of a matrix result as (t_ms, value) pairs."""
    assert result["resultType"] == "matrix"
    assert len(result["result"]) == 1, result
    return [(round(t * 1000), float(v)) for t, v in result["result"][0]["values"]]


def _assert_samples(got: Sequence[tuple[int, float]], want: Sequence[tuple[int, float]]) -> None:
    assert [t for t, _ in got] == [t for t, _ in want]
    for (t, g), (_, w) in zip(got, want, strict=True):
        assert _same_float(g, w), f"at {t} ms: got {g!r}, want {w!r}"


def _label_values(result: dict[str, Any], name: str) -> dict[str, str]:
    """``case`` label -> ``v`` label for every series of metric ``name`` in the result."""
    return {
        r["metric"]["case"]: r["metric"]["v"]
        for r in result["result"]
        if r["metric"].get("__name__") == name
    }


def _backfill_text() -> str:
    series = [
        Series("exact:values", {"job": "harness"}, EXACT_TIMES, EXACT_VALUES),
        *(
            Series("tricky", {"case": str(i), "v": v}, [T0], [float(i)])
            for i, v in enumerate(TRICKY_VALUES)
        ),
        Series("hist_bucket", {"le": "0.5"}, [T0, T0 + 15], [1.0, 2.0]),
        Series("hist_bucket", {"le": "1"}, [T0, T0 + 15], [2.0, 4.0]),
        Series("hist_bucket", {"le": "+Inf"}, [T0, T0 + 15], [3.0, 5.0]),
        Series("hist_count", {}, [T0, T0 + 15], [3.0, 5.0]),
        Series("hist_sum", {}, [T0, T0 + 15], [0.9, 4.5]),
        Series("req_total", {"pod": "a"}, [T0, T0 + 15], [10.0, 40.0]),
    ]
    out = io.StringIO()
    write_openmetrics(series, out, types={"hist": "histogram", "req": "counter"})
    return out.getvalue()


@pytest.fixture(scope="module")
def backfilled(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    server = prometheus_factory(_backfill_text())
    yield server
    server.stop()


@pytest.fixture(scope="module")
def remote(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    server = prometheus_factory()
    yield server
    server.stop()


# --- Prometheus, backfilled with promtool ----------------------------------------


def test_backfilled_samples_are_exact(backfilled: PrometheusServer) -> None:
    result = backfilled.query('{__name__="exact:values"}[2m]', T0 + 100)
    want = [(round(t * 1000), v) for t, v in zip(EXACT_TIMES, EXACT_VALUES.tolist(), strict=True)]
    _assert_samples(_raw_samples(result), want)


def test_backfilled_label_values_round_trip(backfilled: PrometheusServer) -> None:
    result = backfilled.query('{__name__="tricky"}', T0)
    assert _label_values(result, "tricky") == {str(i): v for i, v in enumerate(TRICKY_VALUES)}


def test_backfilled_types_and_families_are_queryable(backfilled: PrometheusServer) -> None:
    # TYPE lines keyed by family name (hist -> hist_bucket, req -> req_total) pass promtool.
    # Rank 2.5 of 5 lies in (0.5, 1], which holds ranks 2..4: 0.5 + 0.5 * 0.5 / 2.
    quantile = backfilled.query("histogram_quantile(0.5, hist_bucket)", T0 + 15)
    assert [float(r["value"][1]) for r in quantile["result"]] == [pytest.approx(0.625)]
    rate = backfilled.query("rate(req_total[15s])", T0 + 15)
    # 2.42 windows are closed, so both samples (T0, T0 + 15) are in and sit on
    # the window edges: no extrapolation, 30 / 15.
    assert [float(r["value"][1]) for r in rate["result"]] == [pytest.approx(2.0)]


def test_query_range_returns_the_step_grid(backfilled: PrometheusServer) -> None:
    result = backfilled.query_range("req_total", T0, T0 + 20, 5)
    assert result["resultType"] == "matrix"
    values = [(round(t), float(v)) for t, v in result["result"][0]["values"]]
    assert values == [(T0, 10.0), (T0 + 5, 10.0), (T0 + 10, 10.0), (T0 + 15, 40.0), (T0 + 20, 40.0)]


def test_promtool_truncates_plain_millisecond_timestamps(
    prometheus_factory: PrometheusFactory,
) -> None:
    # Why the writer adds half a millisecond: written plainly, 1.001 and 1.003
    # truncate to 1000 and 1002 ms and collide with their neighbours.
    naive = "naive 1 1\nnaive 2 1.001\nnaive 3 1.002\nnaive 4 1.003\nnaive 5 1.004\n# EOF\n"
    with prometheus_factory(naive) as server:
        got = _raw_samples(server.query("naive[1s]", 1.5))
    assert got == [(1000, 1.0), (1002, 3.0), (1004, 5.0)]


def test_query_error_carries_the_server_message(backfilled: PrometheusServer) -> None:
    with pytest.raises(AssertionError, match="parse error"):
        backfilled.query("rate(", T0)


def test_stop_is_final_and_idempotent(prometheus_factory: PrometheusFactory) -> None:
    server = prometheus_factory()
    assert server.running
    server.stop()
    assert not server.running
    server.stop()


def test_missing_binary_fails_instead_of_skipping() -> None:
    with pytest.raises(pytest.fail.Exception, match="run scripts/check"):
        require_binary("no-such-binary-inference-obs")


def test_free_port_is_bindable_on_loopback() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))


# --- Prometheus, remote write ----------------------------------------------------

# The head refuses samples more than about an hour older than its newest one,
# so all remote-written samples sit within minutes of this time.
T_RW_MS = 1_800_000_000_000


def test_remote_written_samples_are_exact(remote: PrometheusServer) -> None:
    times = [T_RW_MS + d for d in (0, 1, 2, 999, 1000, 60_001)]
    values = [0.1, -0.0, 5e-324, math.nan, math.inf, -math.inf]
    remote.remote_write(
        [({"__name__": "rw_exact", "job": "harness"}, list(zip(times, values, strict=True)))]
    )
    result = remote.query('{__name__="rw_exact"}[2m]', T_RW_MS / 1000 + 100)
    _assert_samples(_raw_samples(result), list(zip(times, values, strict=True)))


def test_remote_written_label_values_round_trip(remote: PrometheusServer) -> None:
    remote.remote_write(
        [
            ({"v": v, "case": str(i), "__name__": "rw_tricky"}, [(T_RW_MS, float(i))])
            for i, v in enumerate(TRICKY_VALUES)
        ]
    )
    result = remote.query('{__name__="rw_tricky"}', T_RW_MS / 1000)
    assert _label_values(result, "rw_tricky") == {str(i): v for i, v in enumerate(TRICKY_VALUES)}


def test_remote_write_drops_labels_with_empty_values(remote: PrometheusServer) -> None:
    remote.remote_write([({"__name__": "rw_empty", "e": "", "k": "v"}, [(T_RW_MS, 1.0)])])
    result = remote.query('{__name__="rw_empty"}', T_RW_MS / 1000)
    assert [r["metric"] for r in result["result"]] == [{"__name__": "rw_empty", "k": "v"}]


@pytest.mark.parametrize("n_samples", [1, 5, 100, 5000])
def test_remote_write_every_snappy_literal_size(remote: PrometheusServer, n_samples: int) -> None:
    # 1 sample: a literal under 60 bytes (length in the tag byte); 5: one length
    # byte; 100: two length bytes; 5000: over 64 KiB, so several literals.
    labels = {"__name__": "rw_size", "n": str(n_samples)}
    samples = [(T_RW_MS + 100 * i, float(i)) for i in range(n_samples)]
    body = encode_write_request([(labels, samples)])
    expected_size = {1: (0, 60), 5: (60, 256), 100: (256, 65536), 5000: (65536, 10**6)}
    low, high = expected_size[n_samples]
    assert low <= len(body) < high
    remote.remote_write([(labels, samples)])
    result = remote.query(
        f'count_over_time({{__name__="rw_size",n="{n_samples}"}}[10m])', 1_800_000_500
    )
    assert [float(r["value"][1]) for r in result["result"]] == [float(n_samples)]


def test_remote_write_error_carries_the_server_message(remote: PrometheusServer) -> None:
    remote.remote_write([({"__name__": "rw_bounds"}, [(T_RW_MS, 1.0)])])
    too_old = T_RW_MS - 24 * 3600 * 1000
    with pytest.raises(AssertionError, match="out of bounds"):
        remote.remote_write([({"__name__": "rw_bounds"}, [(too_old, 1.0)])])


# --- VictoriaMetrics, JSON import ------------------------------------------------


def _recent_ms() -> int:
    # VM retention counts back from the wall clock and it refuses future
    # samples: use a whole hour a day ago.
    return (int(time.time()) // 3600 - 24) * 3600 * 1000


def test_vm_import_round_trips_samples(victoria_metrics: VictoriaMetricsServer) -> None:
    t0 = _recent_ms()
    times = [t0 + d for d in (0, 1, 2, 999, 1000, 60_001, 60_002)]
    values = [0.1, -2.5, 1234567.891, 0.25, math.inf, -math.inf, math.nan]
    victoria_metrics.import_series(
        [({"__name__": "vm_exact"}, list(zip(times, values, strict=True)))]
    )
    result = victoria_metrics.query('{__name__="vm_exact"}[2m]', t0 / 1000 + 100)
    # VM keeps NaN samples out of every query result, raw ones included.
    _assert_samples(_raw_samples(result), list(zip(times, values, strict=True))[:-1])


@pytest.mark.parametrize(
    ("values", "stored"),
    [
        # About 12 significant decimal digits survive, cut rather than rounded.
        ([1 / 3], [0.333333333333]),
        ([math.pi], [3.141592653589]),
        # Neither the sign of zero nor subnormals survive.
        ([-0.0, 5e-324], [0.0, 0.0]),
        # Samples stored together share a decimal exponent: the small one is lost.
        ([0.1, 1e300], [0.0, 1e300]),
    ],
)
def test_vm_stores_values_as_decimals(
    victoria_metrics: VictoriaMetricsServer, values: list[float], stored: list[float]
) -> None:
    t0 = _recent_ms()
    labels = {"__name__": "vm_lossy", "case": repr(values)}
    victoria_metrics.import_series([(labels, [(t0 + i, v) for i, v in enumerate(values)])])
    result = victoria_metrics.query(f"{{__name__={json.dumps('vm_lossy')}}}[1m]", t0 / 1000 + 10)
    by_case = {r["metric"]["case"]: [float(v) for _, v in r["values"]] for r in result["result"]}
    _assert_samples(list(enumerate(by_case[repr(values)])), list(enumerate(stored)))


def test_vm_import_label_values_round_trip(victoria_metrics: VictoriaMetricsServer) -> None:
    t0 = _recent_ms()
    series: list[SeriesSamples] = [
        ({"__name__": "vm_tricky", "case": str(i), "v": v}, [(t0, float(i))])
        for i, v in enumerate(TRICKY_VALUES)
    ]
    victoria_metrics.import_series(series)
    result = victoria_metrics.query('{__name__="vm_tricky"}', t0 / 1000)
    assert _label_values(result, "vm_tricky") == {str(i): v for i, v in enumerate(TRICKY_VALUES)}


def test_vm_import_drops_labels_with_empty_values(
    victoria_metrics: VictoriaMetricsServer,
) -> None:
    t0 = _recent_ms()
    victoria_metrics.import_series([({"__name__": "vm_empty", "e": "", "k": "v"}, [(t0, 1.0)])])
    result = victoria_metrics.query('{__name__="vm_empty"}', t0 / 1000)
    assert [r["metric"] for r in result["result"]] == [{"__name__": "vm_empty", "k": "v"}]


def test_vm_query_range(victoria_metrics: VictoriaMetricsServer) -> None:
    t0 = _recent_ms()
    victoria_metrics.import_series([({"__name__": "vm_range"}, [(t0, 1.0), (t0 + 10_000, 2.0)])])
    result = victoria_metrics.query_range('{__name__="vm_range"}', t0 / 1000, t0 / 1000 + 10, 5)
    values = [(round(t * 1000) - t0, float(v)) for t, v in result["result"][0]["values"]]
    assert values == [(0, 1.0), (5000, 1.0), (10_000, 2.0)]


def test_vm_import_reports_rows_it_drops(victoria_metrics: VictoriaMetricsServer) -> None:
    # VM answers 204 but ignores samples before 1970 (outside its retention).
    with pytest.raises(AssertionError, match="did not store 1 samples"):
        victoria_metrics.import_series([({"__name__": "vm_dropped"}, [(-1000, 1.0)])])


def test_vm_query_error_carries_the_server_message(
    victoria_metrics: VictoriaMetricsServer,
) -> None:
    with pytest.raises(AssertionError, match="unexpected token"):
        victoria_metrics.query("rate(", 1.0)
