"""The exported dashboards' queries and lint's corrected expressions run on a real Prometheus.

Grafana's variables are interpolated as Grafana would (``$__rate_interval``
as a duration, a multi-value variable as a regex), then each query is sent to
Prometheus 2.42 over an empty TSDB: an answer (empty) means it parses and
type-checks there as it does here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from inference_obs.dashboards import dashboard_files
from inference_obs.lint import lint_paths
from tests.integration.servers import PrometheusServer

pytestmark = pytest.mark.integration

T = 1_700_000_000.0
REPO = Path(__file__).parents[2]
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)\]\]")
_VALUES = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__range_s": "3600"}


def grafana(text: str) -> str:
    """``text`` as Grafana sends it: builtin intervals, every other variable as ``.+``."""

    def value(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        return _VALUES.get(name, ".+")

    return _VARIABLE.sub(value, text)


def _dashboard_queries() -> list[str]:
    return [
        target["expr"]
        for text in dashboard_files().values()
        for panel in json.loads(text)["panels"]
        for target in panel.get("targets", ())
    ]


def _fixes() -> list[str]:
    paths = [REPO / "tests" / "lint" / "fixtures", REPO / "tests" / "fixtures" / "dashboards"]
    return sorted({f.fix for f in lint_paths(paths) if f.fix})


@pytest.mark.parametrize("expr", _dashboard_queries())
def test_exported_queries_run(empty_prometheus: PrometheusServer, expr: str) -> None:
    assert empty_prometheus.query(grafana(expr), T)["resultType"] in ("vector", "scalar")


@pytest.mark.parametrize("expr", _fixes())
def test_corrected_expressions_run(empty_prometheus: PrometheusServer, expr: str) -> None:
    assert empty_prometheus.query(grafana(expr), T)["resultType"] in ("vector", "scalar")
