"""PrometheusSource round trips against real Prometheus 2.42 and VictoriaMetrics.

Known data: ``demo_requests_total{job="a"}`` counts 0, 10, 20, ... every 15 s
(200 samples) and ``demo_temp_celsius{gpu="0"}`` holds 1.5 from the same start.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from inference_obs.engine.rules import Rules
from inference_obs.errors import QueryFailed
from inference_obs.query import Binary, Call, Matcher, Selector, increase, on
from inference_obs.samples import Labels, Vector, Window
from inference_obs.source.base import Source
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import PrometheusFactory, PrometheusServer, VictoriaMetricsServer

pytestmark = pytest.mark.integration

T0 = 1_700_000_000  # backfill start (unix s), on a 15 s grid
N = 200
STEP = 15


def openmetrics(t0: int) -> str:
    lines = ["# TYPE demo_requests counter", "# TYPE demo_temp_celsius gauge"]
    lines += [f'demo_requests_total{{job="a"}} {10 * i} {t0 + STEP * i}' for i in range(N)]
    lines += [f'demo_temp_celsius{{gpu="0"}} 1.5 {t0 + STEP * i}' for i in range(N)]
    return "\n".join([*lines, "# EOF", ""])


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    server = prometheus_factory(openmetrics(T0))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def vm_t0(victoria_metrics: VictoriaMetricsServer) -> int:
    # VM retention counts from now, so recent; ten days back, because the
    # session's shared VM holds other tests' recent data, and label listings
    # over this window must see only these two series.
    t0 = (int(time.time()) - 10 * 86400) // STEP * STEP
    stamps = [1000 * (t0 + STEP * i) for i in range(N)]
    series = [
        (
            {"__name__": "demo_requests_total", "job": "a"},
            [(t, 10.0 * i) for i, t in enumerate(stamps)],
        ),
        ({"__name__": "demo_temp_celsius", "gpu": "0"}, [(t, 1.5) for t in stamps]),
    ]
    victoria_metrics.import_series(series)
    return t0


REQUESTS = Selector("demo_requests_total")
# Two series on the left match one on the right by on(): the server refuses (many-to-one).
BOTH_ON_NOTHING = Binary(
    "+",
    Selector(None, (Matcher.regex("__name__", "demo_.*"),)),
    Selector("demo_temp_celsius"),
    matching=on(),
)


def check_round_trips(src: Source, t0: int) -> None:
    window = Window.parse(_iso(t0), 60 * STEP)
    instant = src.instant(REQUESTS, t0 + 10 * STEP)
    assert isinstance(instant.value, Vector)
    assert instant.value.as_dict() == {
        Labels({"__name__": "demo_requests_total", "job": "a"}): 100.0
    }
    scalar = src.instant(Call("scalar", (Selector("demo_temp_celsius"),)), t0 + STEP)
    # VictoriaMetrics 1.79 answers scalar() with a one-series vector, not a scalar.
    value = scalar.value.values.tolist() if isinstance(scalar.value, Vector) else [scalar.value]
    assert value == [1.5]
    matrix = src.range(Selector("demo_temp_celsius"), window, 60.0)
    assert matrix.labels == (Labels({"__name__": "demo_temp_celsius", "gpu": "0"}),)
    assert matrix.t_ms.tolist() == [1000 * (t0 + 60 * i) for i in range(16)]
    assert np.all(matrix.values == 1.5)
    raw = src.raw(REQUESTS, window)
    assert raw.names == ("demo_requests_total",)
    assert raw.labels == (Labels({"job": "a"}),)
    # both ends included: samples 0..60 at t0 .. t0 + 900 s
    assert raw.t_ms.tolist() == [1000 * (t0 + STEP * i) for i in range(61)]
    assert raw.values.tolist() == [10.0 * i for i in range(61)]
    assert src.series(REQUESTS, window) == (
        Labels({"__name__": "demo_requests_total", "job": "a"}),
    )
    assert {"__name__", "job", "gpu"} <= set(src.label_names(window))
    assert src.label_values("__name__", window) == ("demo_requests_total", "demo_temp_celsius")
    assert src.label_values("job", window) == ("a",)
    assert src.metadata() == ()  # backfilled data carries no scraped metadata
    with pytest.raises(QueryFailed) as failed:
        src.instant(BOTH_ON_NOTHING, t0 + STEP)
    assert failed.value.error_type in ("bad_data", "execution", "422")


def check_split_equals_unsplit(url: str, t0: int) -> None:
    window = Window.parse(_iso(t0), (N - 1) * STEP)
    expr = increase(REQUESTS.over(60))
    whole = PrometheusSource(url).range(expr, window, 30.0)
    split = PrometheusSource(url, max_points=7).range(expr, window, 30.0)
    assert whole.labels == split.labels
    assert len(whole.t_ms) > 7
    assert np.array_equal(whole.offsets, split.offsets)
    assert np.array_equal(whole.t_ms, split.t_ms)
    assert np.array_equal(whole.values, split.values, equal_nan=True)


def _iso(t: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(t, UTC).isoformat()


def test_prometheus_round_trips(prometheus: PrometheusServer) -> None:
    src = PrometheusSource(prometheus.base_url)
    check_round_trips(src, T0)
    info = src.info()
    assert (info.kind, info.version, info.rules) == ("prometheus", "2.42.0+ds", Rules.PROMETHEUS_2)


def test_prometheus_split_range_equals_one_query(prometheus: PrometheusServer) -> None:
    check_split_equals_unsplit(prometheus.base_url, T0)


def test_victoria_metrics_round_trips(victoria_metrics: VictoriaMetricsServer, vm_t0: int) -> None:
    src = PrometheusSource(victoria_metrics.base_url)
    info = src.info()
    assert (info.kind, info.rules) == ("victoriametrics", Rules.VICTORIAMETRICS)
    check_round_trips(src, vm_t0)


def test_victoria_metrics_split_range_equals_one_query(
    victoria_metrics: VictoriaMetricsServer, vm_t0: int
) -> None:
    check_split_equals_unsplit(victoria_metrics.base_url, vm_t0)


@pytest.mark.parametrize("server", ["prometheus", "victoria_metrics"])
def test_answers_arrive_gzipped_and_decode(server: str, request: pytest.FixtureRequest) -> None:
    """Both servers compress when asked; the raw samples read back are the ones written."""
    url = request.getfixturevalue(server).base_url
    t0 = T0 if server == "prometheus" else request.getfixturevalue("vm_t0")
    src = PrometheusSource(url)
    fields = {"query": "demo_requests_total[5m]", "time": str(t0 + 240)}
    reply = src._client.query("/api/v1/query", fields, fields["query"])
    assert reply.headers.get("content-encoding") == "gzip"
    check_round_trips(src, t0)
