"""``obs.report`` on a live Prometheus equals it on the dataset the server was loaded with.

Prometheus 2.42 holds a bundled dataset (promtool backfill). The live report
is given what a user gives it: a deployments file (the dataset's manifest) or
a list of Deployment, and ``window="1h"`` with ``end=`` the observed hour's
end. Every Measurement has the offline report's status and value (1e-9
relative) and bounds; only the engine named in the scope differs.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import inference_obs as obs
from inference_obs.analyses.facts import has_data
from tests.integration.servers import PrometheusServer

pytestmark = pytest.mark.integration

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def prometheus(shipped_prometheus: Callable[[Path], PrometheusServer]) -> PrometheusServer:
    return shipped_prometheus(DATASET)


@pytest.fixture(scope="module")
def offline() -> pd.DataFrame:
    return obs.report(obs.DatasetSource(DATASET)).to_frame()


def _same_numbers(live: pd.DataFrame, offline: pd.DataFrame) -> None:
    assert list(live["key"]) == list(offline["key"])
    assert len(live) > 200
    assert list(live["status"]) == list(offline["status"])
    assert list(live["unit"]) == list(offline["unit"])
    for column in ("value", "lower", "upper"):
        a, b = live[column].to_numpy(float), offline[column].to_numpy(float)
        assert np.allclose(a, b, rtol=1e-9, atol=0.0, equal_nan=True), column
    assert list(live["promql"]) == list(offline["promql"])


@pytest.mark.parametrize("given", ["file", "list"])
def test_a_live_report_from_a_deployments_file_and_an_hour(
    prometheus: PrometheusServer, offline: pd.DataFrame, given: str
) -> None:
    manifest = DATASET / "manifest.json"
    deployments = manifest if given == "file" else list(obs.load_deployments(manifest))
    end = obs.read_dataset(DATASET).manifest.window.end
    source = obs.PrometheusSource(prometheus.base_url)
    report = obs.report(source, deployments, window="1h", end=end)
    assert report.scope.engine == "prometheus"
    assert report.scope.source == prometheus.base_url
    assert report.title == "Observation report"  # a server has no title of its own
    assert report.scope.windows["H20"] == obs.Window.ending(end, "1h")
    _same_numbers(report.to_frame(), offline)
    html = report._repr_html_()
    assert "<td>H20</td><td>11,674</td>" in html
    # A server does not say its scrape interval: the report measures it from the samples
    # (the dataset was scraped every 60 s).
    assert report.scope.scrape_interval_seconds is None
    measured = report.to_frame().set_index("key")["value"]
    assert measured["PRO/collection/scrape_interval"] == measured["H20/collection/scrape_interval"]
    assert measured["PRO/collection/scrape_interval"] == 60.0
    defined = report.section("Collection and statistical definitions")._repr_html_()
    assert "measured from the samples (median spacing): PRO: app 60 s" in defined


def test_a_live_report_over_the_last_hour_reads_now(prometheus: PrometheusServer) -> None:
    # The data is from one hour of 2026-10-19: the hour before now holds none of it.
    source = obs.PrometheusSource(prometheus.base_url)
    report = obs.report(source, DATASET / "manifest.json", window="1h")
    window = report.scope.windows["PRO"]
    assert window.seconds == 3600.0
    assert abs((datetime.now(UTC) - window.end).total_seconds()) < 120
    assert not any(has_data(d) for d in report.deployments)
    assert (
        report.deployments[0].of(obs.analyses.throughput).finished_requests.status.value
        == "no_data"
    )
