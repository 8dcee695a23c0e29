"""SLO attainment from a real Prometheus: the same numbers as offline, and as requests.csv.

The bundled dataset is backfilled into Prometheus 2.42 with promtool. The
``slo`` analysis runs through :class:`PrometheusSource` (the exact shares
pushed down as ``max_over_time - min_over_time`` sums) and through the
dataset: every Measurement agrees to 1e-9. Where the target is a bucket
bound the server's attainment equals the share of ``requests.csv``
requests meeting it; where it is not, the attainment's own PromQL (its
provenance, pasted into Prometheus) gives the bucket counts whose shares at
the bounds around the threshold are the attainment's bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.slo import SloResult, SloSettings, slo
from inference_obs.engine.rules import Rules
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.analyses.ground_truth import EXACT, truth
from tests.integration.servers import PrometheusServer

pytestmark = pytest.mark.integration

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
#: 1 s and 5 s are bucket bounds of both histograms (exact); 2 s and 30 s are not.
TARGETS = "ttft<=1s@99%,ttft<=2s@99%,e2e<=5s@95%,e2e<=30s"
TRUTH = {"ttft": ("first_token", "ttft", False), "e2e": ("finish", "e2e", True)}


@pytest.fixture(scope="module")
def served(
    shipped_prometheus: Callable[[Path], PrometheusServer],
) -> tuple[Dataset, PrometheusServer]:
    return read_dataset(DATASET), shipped_prometheus(DATASET)


def _run(source: PrometheusSource | DatasetSource, dataset: Dataset) -> dict[str, SloResult]:
    settings = SloSettings(targets=TARGETS)
    window = dataset.manifest.window.window()
    return {d.name: slo(source, d, window, settings=settings) for d in dataset.manifest.deployments}


def test_attainment_from_prometheus_matches_offline_and_ground_truth(
    served: tuple[Dataset, PrometheusServer],
) -> None:
    dataset, server = served
    remote = _run(PrometheusSource(server.base_url), dataset)
    local = _run(DatasetSource(dataset, rules=Rules.PROMETHEUS_2), dataset)
    truth_source = DatasetSource(DATASET)
    checked = 0
    for name, result in remote.items():
        offline = {m.key: m for m in local[name].measurements()}
        online = {m.key: m for m in result.measurements()}
        assert offline.keys() == online.keys()
        for key, m in online.items():
            o = offline[key]
            assert m.status == o.status, key
            assert (m.value is None) == (o.value is None), key
            if m.value is not None and o.value is not None:
                assert math.isclose(m.value, o.value, rel_tol=1e-9), key
        for one in result.targets:
            time, column, finished = TRUTH[one.target.metric]
            values = truth(truth_source, name, column, time, finished)
            share = float(np.mean(values <= one.target.threshold_s))
            value = one.attainment.value
            assert value is not None
            if one.exact:
                assert math.isclose(value, share, rel_tol=EXACT), (name, one.target.text)
                checked += 1
            else:
                _check_bounds_from_promql(server, dataset, one.attainment, one.target.threshold_s)
    assert checked >= 4  # two exact targets on each of two deployments


def _check_bounds_from_promql(
    server: PrometheusServer, dataset: Dataset, m: object, threshold: float
) -> None:
    """The bounded attainment's PromQL, run by Prometheus, gives its bounds by hand."""
    from inference_obs.reading.measurement import Measurement

    assert isinstance(m, Measurement)
    assert m.bounds is not None
    (promql,) = m.provenance.promql
    end = dataset.manifest.window.window().end_s
    rows = server.query(promql, end)["result"]
    counts = {float(r["metric"]["le"]): float(r["value"][1]) for r in rows}
    total = counts[math.inf]
    below = max(le for le in counts if le < threshold)
    above = min(le for le in counts if le > threshold)
    # Observations at or below the bound below the threshold surely meet it; those above
    # the bound above surely miss it.
    assert math.isclose(m.bounds.lower, counts[below] / total, rel_tol=1e-9)
    assert math.isclose(m.bounds.upper, counts[above] / total, rel_tol=1e-9)
