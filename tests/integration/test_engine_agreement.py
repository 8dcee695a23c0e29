"""The local engine agrees with real Prometheus 2.42 and VictoriaMetrics 1.79.

Hypothesis generates counters (with resets and scrape gaps), gauges and
histogram buckets on jittered millisecond timestamps; Prometheus also gets
staleness markers (remote write carries them; VictoriaMetrics' import does
not). Each batch is written into both servers, then ``increase``, ``rate``,
``delta``, the ``*_over_time`` reductions, ``resets``, ``changes`` and merged
``histogram_quantile`` are queried at random evaluation times and windows and
compared with :func:`inference_obs.engine.evaluate.evaluate` under the
matching rule set, to 1e-9 relative.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

from inference_obs.engine.evaluate import evaluate
from inference_obs.engine.rules import Rules
from inference_obs.query import Call, Expr, Matcher, Selector, histogram_quantile, to_promql
from inference_obs.samples import STALE_NAN, SampleSet, Series, Vector
from tests.integration.servers import (
    PrometheusServer,
    SeriesSamples,
    VictoriaMetricsServer,
)

pytestmark = pytest.mark.integration

FUNCTIONS = (
    "increase",
    "rate",
    "delta",
    "sum_over_time",
    "count_over_time",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "last_over_time",
    "resets",
    "changes",
)
# VictoriaMetrics documents different rules for these (no extrapolation, the
# sample before the window as base, NaN results dropped); the engine's
# VICTORIAMETRICS rules reproduce them where the reference pins them down.
VM_FUNCTIONS = (
    "sum_over_time",
    "count_over_time",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "last_over_time",
)
BUCKETS = ("0.1", "0.5", "1.0", "+Inf")
_batch = itertools.count()
# Fixed for the run: a strategy must not read the clock (hypothesis replays it).
# Recent, because remote write only appends near the head of the TSDB.
START_MS = int(time.time() * 1000) - 20 * 60_000


@st.composite
def sample_times(draw: st.DrawFn, start_ms: int) -> list[int]:
    """15 s scrapes with up to 2 s jitter, some scrapes missing (gaps)."""
    n = draw(st.integers(2, 40))
    jitter = draw(st.lists(st.integers(-2000, 2000), min_size=n, max_size=n))
    missing = draw(st.sets(st.integers(1, n - 1), max_size=n // 4))
    times = [start_ms + i * 15_000 + j for i, j in enumerate(jitter) if i not in missing]
    return sorted(set(times))


@st.composite
def batches(draw: st.DrawFn) -> dict[str, list[tuple[dict[str, str], list[int], list[float]]]]:
    """A counter, a gauge (with NaN and stale samples) and a histogram."""
    times = draw(sample_times(START_MS))
    n = len(times)
    steps = draw(st.lists(st.floats(0, 50, allow_nan=False), min_size=n, max_size=n))
    counter = list(np.cumsum(steps))
    for reset in draw(st.sets(st.integers(1, n - 1), max_size=2)) if n > 1 else ():
        counter[reset:] = list(np.cumsum(steps[reset:]))  # restarted from zero
    gauge = draw(
        st.lists(
            st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.just(math.nan)),
            min_size=n,
            max_size=n,
        )
    )
    stale_at = draw(st.sets(st.integers(1, n - 1), max_size=1)) if n > 2 else set()
    base = np.cumsum(draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)))
    buckets = [
        (le, [float(v) for v in np.cumsum(base) * share])
        for le, share in zip(BUCKETS, (0, 1, 2, 3), strict=True)
    ]
    return {
        "counter": [({}, times, [float(v) for v in counter])],
        "gauge": [({}, times, [STALE_NAN if i in stale_at else v for i, v in enumerate(gauge)])],
        "histogram": [({"le": le}, times, values) for le, values in buckets],
    }


def _load(
    server: PrometheusServer | VictoriaMetricsServer,
    name: str,
    data: dict[str, list[tuple[dict[str, str], list[int], list[float]]]],
) -> SampleSet:
    written: list[SeriesSamples] = []
    series: list[Series] = []
    for kind, members in data.items():
        for labels, times, values in members:
            if isinstance(server, VictoriaMetricsServer):
                # VictoriaMetrics cannot store staleness markers or NaN samples.
                pairs = [(t, v) for t, v in zip(times, values, strict=True) if not math.isnan(v)]
            else:
                pairs = list(zip(times, values, strict=True))
            if not pairs:
                continue
            metric = f"{name}_{kind}"
            written.append(({"__name__": metric, **labels}, pairs))
            series.append(
                Series(metric, labels, [t / 1000 for t, _ in pairs], [v for _, v in pairs])
            )
    if isinstance(server, PrometheusServer):
        server.remote_write(written)
    else:
        server.import_series(written)
        _wait_until_searchable(server, name, len(written), max(t for s in written for t, _ in s[1]))
    return SampleSet.from_series(series)


def _wait_until_searchable(
    server: VictoriaMetricsServer, name: str, size: int, last_ms: int
) -> None:
    # VictoriaMetrics indexes new series asynchronously (see test_label_roundtrip).
    selector = Selector(None, (Matcher.regex("__name__", f"{name}_.*"),))
    count = to_promql(Call("last_over_time", (selector.over(3600),)).count())
    deadline = time.monotonic() + 10
    while True:
        result = server.query(count, last_ms / 1000)["result"]
        if result and float(result[0]["value"][1]) == size:
            return
        assert time.monotonic() < deadline, f"{count} never reached {size}: {result}"
        time.sleep(0.1)


def _answer(result: object) -> dict[tuple[tuple[str, str], ...], float]:
    assert isinstance(result, Vector)
    return {
        tuple((k, v) for k, v in labels.items() if k != "__name__"): value
        for labels, value in result.as_dict().items()
    }


def _server_answer(
    server: PrometheusServer | VictoriaMetricsServer, expr: Expr, at: float
) -> dict[tuple[tuple[str, str], ...], float]:
    result = server.query(to_promql(expr), at)["result"]
    return {
        tuple(sorted((k, v) for k, v in r["metric"].items() if k != "__name__")): float(
            r["value"][1]
        )
        for r in result
    }


def _same(
    local: dict[tuple[tuple[str, str], ...], float],
    remote: dict[tuple[tuple[str, str], ...], float],
) -> bool:
    if local.keys() != remote.keys():
        return False
    return all(
        (math.isnan(a) and math.isnan(b))
        or a == b
        or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9 * max(1.0, abs(a)))
        for a, b in ((local[k], remote[k]) for k in local)
    )


def _check(
    server: PrometheusServer | VictoriaMetricsServer,
    rules: Rules,
    functions: tuple[str, ...],
    data: st.DataObject,
) -> None:
    name = f"agree{next(_batch)}"
    samples = _load(server, name, data.draw(batches()))
    first = int(samples.t_ms.min()) if samples.t_ms.size else 0
    last = int(samples.t_ms.max()) if samples.t_ms.size else 0
    # Mostly inside the data, sometimes past its end (series going stale).
    at = data.draw(st.integers(first + 30_000, last + 60_000)) / 1000
    window = data.draw(st.sampled_from((45, 90, 300, 600, 1800)))
    for function in functions:
        for kind in ("counter", "gauge"):
            expr: Expr = Call(function, (Selector(f"{name}_{kind}").over(window),))
            local = _answer(evaluate(expr, samples, at, rules=rules))
            remote = _server_answer(server, expr, at)
            assert _same(local, remote), f"{to_promql(expr)} @ {at}: {local} != {remote}"
    if rules is Rules.PROMETHEUS_2:
        q = data.draw(st.sampled_from((0.0, 0.25, 0.5, 0.9, 0.99, 1.0)))
        buckets = Call("rate", (Selector(f"{name}_histogram").over(window),)).sum(by=("le",))
        expr = histogram_quantile(q, buckets)
        local = _answer(evaluate(expr, samples, at, rules=rules))
        remote = _server_answer(server, expr, at)
        assert _same(local, remote), f"{to_promql(expr)} @ {at}: {local} != {remote}"


AGREEMENT = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def test_engine_agrees_with_prometheus(empty_prometheus: PrometheusServer) -> None:
    @AGREEMENT
    @given(st.data())
    def check(data: st.DataObject) -> None:
        _check(empty_prometheus, Rules.PROMETHEUS_2, FUNCTIONS, data)

    check()


def test_engine_agrees_with_victoria_metrics(victoria_metrics: VictoriaMetricsServer) -> None:
    @AGREEMENT
    @given(st.data())
    def check(data: st.DataObject) -> None:
        _check(victoria_metrics, Rules.VICTORIAMETRICS, VM_FUNCTIONS, data)

    check()
