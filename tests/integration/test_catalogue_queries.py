"""Every family's builders, and every standard query, on real servers with known truth.

The data and the expected answers are in :mod:`tests.catalogue_data`.
VictoriaMetrics is held to the same numbers: in this aligned case its
non-extrapolating ``increase`` gives the same answer.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator

import pytest

from inference_obs.metrics import STANDARD_QUERIES, StandardQuery
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, to_promql
from inference_obs.source.openmetrics.writer import write_openmetrics
from tests.catalogue_data import CHECKS, HOUR, SERIES, T_END, close
from tests.integration.servers import (
    PrometheusFactory,
    PrometheusServer,
    SeriesSamples,
    VictoriaMetricsServer,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def prometheus(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    text = io.StringIO()
    write_openmetrics(SERIES, text)
    server = prometheus_factory(text.getvalue())
    yield server
    server.stop()


@pytest.fixture(scope="module")
def victoria(victoria_metrics: VictoriaMetricsServer) -> VictoriaMetricsServer:
    batch: list[SeriesSamples] = [
        (
            {"__name__": s.name, **s.labels},
            [(round(t * 1000), float(v)) for t, v in zip(s.timestamps, s.values, strict=True)],
        )
        for s in SERIES
    ]
    victoria_metrics.import_series(batch)
    return victoria_metrics


def _single_value(server: PrometheusServer | VictoriaMetricsServer, promql: str) -> float:
    result = server.query(promql, T_END)["result"]
    assert len(result) == 1, f"{promql} returned {len(result)} series: {result}"
    return float(result[0]["value"][1])


@pytest.mark.parametrize(
    ("family", "what", "expr", "expected"), CHECKS, ids=[f"{c[0].name}-{c[1]}" for c in CHECKS]
)
def test_builder_on_prometheus(
    prometheus: PrometheusServer, family: Family, what: str, expr: Expr, expected: float
) -> None:
    actual = _single_value(prometheus, to_promql(expr))
    assert close(actual, expected), f"{what} of {family.name}: {actual} != {expected}"


@pytest.mark.parametrize(
    ("family", "what", "expr", "expected"), CHECKS, ids=[f"{c[0].name}-{c[1]}" for c in CHECKS]
)
def test_builder_on_victoria_metrics(
    victoria: VictoriaMetricsServer, family: Family, what: str, expr: Expr, expected: float
) -> None:
    actual = _single_value(victoria, to_promql(expr))
    assert close(actual, expected), f"{what} of {family.name}: {actual} != {expected}"


@pytest.mark.parametrize("query", STANDARD_QUERIES, ids=lambda q: q.key)
def test_standard_query_runs_on_both_servers(
    prometheus: PrometheusServer, victoria: VictoriaMetricsServer, query: StandardQuery
) -> None:
    text = to_promql(query.expr(window=HOUR))
    answers = [server.query(text, T_END)["result"] for server in (prometheus, victoria)]
    for answer in answers:
        assert answer, f"{query.key}: no series for {text}"
        for series in answer:
            assert not math.isnan(float(series["value"][1])), f"{query.key}: NaN from {text}"
    labels = [sorted(tuple(sorted(s["metric"].items())) for s in a) for a in answers]
    assert labels[0] == labels[1], f"{query.key}: servers grouped differently"
