"""A captured dataset backfills into Prometheus 2.42, which then agrees with the offline report.

Fake exporters on 127.0.0.1 serve real ``/metrics`` text with growing counters
(one fails mid-way); ``inference-obs capture`` records them, ``inference-obs
report --dataset`` computes offline, and promtool backfills ``samples.om``
as written. Prometheus must return every captured sample, and each reported
count and mean must be what Prometheus computes for the PromQL in its
provenance, at the end of its window.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np
import pytest

from inference_obs.cli import main
from inference_obs.source.dataset.reader import SAMPLES, Dataset, read_dataset
from tests.integration.servers import PrometheusFactory, PrometheusServer
from tests.source.fake_exporters import FakeExporter, advancing, real_text

pytestmark = pytest.mark.integration

VLLM = real_text("vllm_v0_metrics_paste.prom")
DCGM = real_text("dcgm_4x_pod_uid_empty.prom")
CHECKED = (
    "shapes/finished_stop",
    "shapes/finished_length",
    "shapes/finished_abort",
    "throughput/output_tokens",
    "throughput/prompt_tokens",
    "latency/ttft_mean",
    "latency/e2e_mean",
)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, dict[str, Any]]:
    out = tmp_path_factory.mktemp("capture") / "ds"
    other = VLLM.replace("mymodelname", "other-model")
    with (
        FakeExporter(lambda n: advancing(VLLM, n)) as engine,
        FakeExporter(lambda n: DCGM) as gpus,
        FakeExporter(lambda n: advancing(other, n), fail={3, 4}) as flaky,
    ):
        urls = [f"vllm={engine.url}", f"dcgm={gpus.url}", f"vllm={flaky.url}"]
        argv = ["capture", *(a for url in urls for a in ("--url", url))]
        assert main([*argv, "--interval", "500ms", "--duration", "3s", "--out", str(out)]) == 0
    report = tmp_path_factory.mktemp("report")
    assert main(["report", "--dataset", str(out), "--format", "json", "--out", str(report)]) == 0
    document = json.loads((report / "report.json").read_text())
    return read_dataset(out), {m["key"]: m for m in document["measurements"]}


@pytest.fixture(scope="module")
def prometheus(
    prometheus_factory: PrometheusFactory, captured: tuple[Dataset, dict[str, Any]]
) -> Iterator[PrometheusServer]:
    dataset, _ = captured
    server = prometheus_factory((dataset.path / SAMPLES).read_bytes().decode("utf-8"))
    yield server
    server.stop()


def test_prometheus_stores_every_captured_sample(
    captured: tuple[Dataset, dict[str, Any]], prometheus: PrometheusServer
) -> None:
    samples = captured[0].samples
    first, last = int(samples.t_ms.min()), int(samples.t_ms.max())
    span = math.ceil((last - first) / 1000) + 1
    result = prometheus.query(f'{{__name__=~".+"}}[{span}s]', last / 1000)["result"]
    stored = {}
    for one in result:
        labels = dict(one["metric"])
        name = labels.pop("__name__")
        stored[(name, tuple(sorted(labels.items())))] = one["values"]
    assert len(stored) == len(samples)
    for i in range(len(samples)):
        key = (samples.names[i], tuple(sorted(samples.labels[i].items())))
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        t_ms = np.array([round(float(t) * 1000) for t, _ in stored[key]], dtype=np.int64)
        values = np.array([float(v) for _, v in stored[key]])
        np.testing.assert_array_equal(t_ms, samples.t_ms[lo:hi], err_msg=str(key))
        np.testing.assert_array_equal(values, samples.values[lo:hi], err_msg=str(key))


@pytest.mark.parametrize("deployment", ["mymodelname", "other-model"])
@pytest.mark.parametrize("statistic", CHECKED)
def test_prometheus_agrees_with_the_offline_report(
    captured: tuple[Dataset, dict[str, Any]],
    prometheus: PrometheusServer,
    deployment: str,
    statistic: str,
) -> None:
    measurement = captured[1][f"{deployment}/{statistic}"]
    assert measurement["status"] == "ok"
    promql = measurement["provenance"]["promql"][-1]  # the instant query to recheck with
    end = datetime.fromisoformat(measurement["window"]["end"]).timestamp()
    (answer,) = prometheus.query(promql, end)["result"]
    assert float(answer["value"][1]) == pytest.approx(measurement["value"], rel=1e-9)
