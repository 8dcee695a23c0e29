"""An SGLang deployment read live from a real Prometheus gets the numbers the dataset gives.

The scrapes of ``tests/report/test_sglang_report.py`` (real SGLang 0.5.1
gauges, counters and histograms advanced by known steps) are backfilled into
Prometheus; the live report of the deployment declared SGLang must give the
hand-worked values the offline report gives, reading the same SGLang families.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.report.from_source import report
from inference_obs.source.dataset.reader import SAMPLES
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from inference_obs.source.scrape_files import dataset_from_scrapes
from tests.integration.servers import PrometheusFactory
from tests.report.test_sglang_report import QWEN, _saved

pytestmark = pytest.mark.integration

#: Numbers of every part of the report the SGLang families feed, worked out by hand there.
KEYS = {
    "QWEN/latency/ttft_p50": 0.15,
    "QWEN/latency/itl_mean": 0.010,
    "QWEN/latency/e2e_p50": 1.25,
    "QWEN/latency/queue_p50": 0.004,
    "QWEN/throughput/output_tokens": 12_000,
    "QWEN/throughput/requests_per_second": 2.0,
    "QWEN/cache/prefix_cache_hit_rate": 0.4,
    "QWEN/cache/preemptions": 16,
    "QWEN/queueing/peak_waiting": 5,
}


def test_live_sglang_numbers_equal_the_offline_ones(
    prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    dataset = dataset_from_scrapes([_saved(tmp_path)], tmp_path / "ds", deployments=[QWEN])
    server = prometheus_factory((dataset.path / SAMPLES).read_text(encoding="utf-8"))
    window = dataset.manifest.window.window()
    live = {
        m.key: m
        for m in report(PrometheusSource(server.base_url), [QWEN], window=window).measurements()
    }
    offline = {m.key: m for m in report(DatasetSource(dataset)).measurements()}
    server.stop()
    for key, expected in KEYS.items():
        # A quantile's hand-worked value is Prometheus's interpolation, kept in the
        # provenance; its value is the mean-constrained estimate, the same both ways.
        quantile = key.rsplit("_", 1)[-1] in ("p50", "p90", "p95", "p99")
        got = [
            m.provenance.promql_value if quantile else m.value for m in (live[key], offline[key])
        ]
        assert got == [pytest.approx(expected)] * 2, key
        assert live[key].value == pytest.approx(offline[key].value), key
        assert live[key].provenance.promql == offline[key].provenance.promql, key
