"""Real fleets' names and label schemes (tests/fixtures/real), read by the report's defaults.

- a vLLM V0 paste names its inter-token latency ``vllm:time_per_output_token_seconds``
  (renamed ``vllm:inter_token_latency_seconds`` in 0.10.2): the report reads it;
- a GPU Operator scrape with ``honor_labels: false`` files the workload's pod under
  ``exported_pod`` and the exporter's under ``pod``: GPUs join their vLLM pods;
- a time-sliced GPU exports its series once per pod: it is counted once.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.cli import main
from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm
from inference_obs.metrics.dcgm_labels import GpuLabelScheme
from inference_obs.query import Aggregate, last_over_time
from inference_obs.reading.context import Reading
from inference_obs.reading.discovery import discover
from inference_obs.samples import Labels, Series, Window
from inference_obs.source.dataset.manifest import Manifest, ManifestWindow
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset
from tests.analyses.real_fleets import (
    EXPORTER,
    INTERVAL_MS,
    SCRAPES,
    START_MS,
    WORKLOAD,
    fixture,
    kinds,
    measurements,
    record,
    report,
    target,
)

REAL = Path(__file__).parents[1] / "fixtures" / "real"
V0 = fixture("vllm_v0_metrics_paste.prom")
DCGM_4X = fixture("dcgm_4x_pod_uid_empty.prom")
HARDWARE = {"gpu_model": "NVIDIA H100 80GB HBM3", "gpus_per_replica": 1}


def _scrapes_file(path: Path) -> Path:
    """The V0 paste saved as ``SCRAPES`` marked scrapes, 15 s apart (``dataset from-scrapes``)."""
    from tests.source.fake_exporters import advancing

    parts = []
    for n in range(SCRAPES):
        parts.append(
            f"# SCRAPE {(START_MS + n * INTERVAL_MS) / 1000:.0f} vllm=http://10.0.0.1:8000"
        )
        parts.append(advancing(V0, n))
    path.write_text("\n".join(parts))
    return path


def test_vllm_v0_inter_token_latency_is_read_from_time_per_output_token(tmp_path: Path) -> None:
    scrapes = _scrapes_file(tmp_path / "scrapes.prom")
    assert main(["dataset", "from-scrapes", str(scrapes), "--out", str(tmp_path / "ds")]) == 0
    found = measurements(report(tmp_path / "ds", tmp_path / "report"))
    # Each scrape adds 10 observations of 1 ms: all in the lowest bucket, le=0.01, so a
    # quantile q interpolates to q x 0.01 s (Prometheus's value, kept), and the mean is 1 ms.
    p50, p90, mean = (found[f"mymodelname/latency/itl_{s}"] for s in ("p50", "p90", "mean"))
    assert (p50["status"], p90["status"], mean["status"]) == ("ok", "ok", "ok")
    assert p50["provenance"]["promql_value"] == pytest.approx(0.005)
    assert p90["provenance"]["promql_value"] == pytest.approx(0.009)
    assert mean["value"] == pytest.approx(0.001)
    # The estimate uses that mean: inside the bucket, nearer the true 1 ms than 5 ms is.
    assert 0 <= p50["value"] <= 0.01
    assert abs(p50["value"] - 0.001) < abs(0.005 - 0.001)
    # The provenance is the PromQL that read the data: it names the older family.
    for promql in p50["provenance"]["promql"]:
        assert "vllm:time_per_output_token_seconds_bucket" in promql
        assert "inter_token_latency" not in promql
    (note,) = [a for a in p50["annotations"] if a["kind"] == "renamed_family"]
    assert "vllm:time_per_output_token_seconds" in note["message"]
    assert "vllm:inter_token_latency_seconds" in note["message"]
    # The V0 paste's KV usage is gpu_cache_usage_perc (kv_cache_usage_perc from 0.9.2).
    usage = found["mymodelname/throughput/kv_cache_usage_max"]
    assert usage["status"] == "ok"
    assert "vllm:gpu_cache_usage_perc" in usage["provenance"]["promql"][0]


def test_a_fleet_of_two_versions_reads_each_deployment_under_its_own_name(tmp_path: Path) -> None:
    # The same paste under the newest name (as vLLM >= 0.15 exports it) beside the original.
    newer = V0.replace("time_per_output_token", "inter_token_latency").replace(
        'model_name="mymodelname"', 'model_name="newer"'
    )
    served = [
        (target("vllm=http://10.0.0.1:8000/metrics"), V0, 0),
        (target("vllm=http://10.0.0.2:8000/metrics"), newer, 0),
    ]
    deployments = [
        Deployment(
            name=name, selector={"model_name": name}, hardware=HARDWARE, engine={"name": "vllm"}
        )
        for name in ("mymodelname", "newer")
    ]
    dataset = record(tmp_path / "ds", served, deployments)
    source = DatasetSource(dataset)
    window = source.dataset.manifest.window.window()
    old, new = (discover(source, d, window).renames for d in deployments)
    assert old == {
        "vllm:inter_token_latency_seconds": "vllm:time_per_output_token_seconds",
        "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    }
    assert new == {"vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc"}
    found = measurements(report(dataset, tmp_path / "report"))
    for name in ("mymodelname", "newer"):  # Prometheus's value: half the lowest bucket
        assert found[f"{name}/latency/itl_p50"]["provenance"]["promql_value"] == pytest.approx(
            0.005
        )
    assert "renamed_family" not in kinds(found["newer/latency/itl_p50"])


def _gpu_operator(tmp_path: Path, deployment: Deployment) -> dict[str, dict[str, Any]]:
    """The V0 paste served by the workload pod of the 4.x DCGM fixture's GPU 6, both scraped
    through Kubernetes service discovery (target labels pod/namespace/container,
    honor_labels false), then the report of ``deployment``."""
    served = [
        (target("vllm=http://10.0.0.1:8000/metrics", WORKLOAD), V0, 0),
        (target("dcgm=http://10.0.0.2:9400/metrics", EXPORTER), DCGM_4X, 1000),
    ]
    dataset = record(tmp_path / "ds", served, [deployment])
    source = DatasetSource(dataset)
    window = source.dataset.manifest.window.window()
    stored = source.series(dcgm.GPU_UTIL.select(), window)
    # What Prometheus stores: the exporter's pod in `pod` on every GPU, the workload's moved.
    assert {one["pod"] for one in stored} == {EXPORTER["pod"]}
    assert [one["exported_pod"] for one in stored if "exported_pod" in one] == [WORKLOAD["pod"]]
    found = discover(source, deployment, window)
    assert found.scheme is GpuLabelScheme.EXPORTED
    document = report(dataset, tmp_path / "report")
    (only,) = document["deployments"]
    assert only["boundaries"]["reading"] != "insufficient_data"
    # The report says which scheme its queries read.
    text = (tmp_path / "report" / "report.md").read_text()
    assert "GPUs joined on the exported_* labels" in text
    return measurements(document)


@pytest.mark.parametrize(
    "gpu_selector",
    [None, {"exported_pod": WORKLOAD["pod"]}],
    ids=["engine-selector", "exported-pod-selector"],
)
def test_gpu_operator_scrape_joins_gpus_to_the_vllm_pod(
    tmp_path: Path, gpu_selector: dict[str, str] | None
) -> None:
    deployment = Deployment(
        name="llama",
        selector={"pod": WORKLOAD["pod"]},
        gpu_selector=gpu_selector,
        hardware=HARDWARE,
        engine={"name": "vllm"},
    )
    found = _gpu_operator(tmp_path, deployment)
    per_replica = [k for k in found if k.startswith("llama/gpu/utilization_replica[")]
    assert per_replica == [f"llama/gpu/utilization_replica[{WORKLOAD['pod']}]"]
    # GPU 6 only: GPUs 5 and 7 of the node serve no pod.
    assert found["llama/gpu/gpus_with_samples"]["value"] == 1
    (gpu,) = [k for k in found if k.startswith("llama/gpu/utilization_gpu[")]
    assert gpu == "llama/gpu/utilization_gpu[ip-10-0-180-136.ec2.internal/gpu6]"
    # GPU 6's board power in the fixture.
    assert found["llama/gpu/power_mean_watts"]["value"] == pytest.approx(112.67)
    # Every app scrape (1 s before each GPU scrape) finds its GPU reading.
    aligned = found["llama/queueing/gpu_aligned_samples"]
    assert (aligned["status"], aligned["value"]) == ("ok", SCRAPES)
    assert "gpu_label_scheme" in kinds(aligned)
    assert "exported_pod" in " ".join(found["llama/gpu/utilization_mean"]["provenance"]["promql"])


_SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\}$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="([^"]*)"')


def _stored(name: str) -> list[tuple[str, Labels]]:
    """The series of a Prometheus query answer pasted as ``name{labels}`` lines."""
    out = []
    for line in (REAL / name).read_text().splitlines():
        match = _SERIES.match(line)
        assert match is not None, line
        out.append((match[1], Labels(_LABEL.findall(match[2]))))
    return out


def test_a_time_sliced_gpu_is_counted_once(tmp_path: Path) -> None:
    # One RTX 4090 (GPU-longgui) time-sliced between pod1 and pod2: Prometheus holds its
    # series once per pod. Both copies read 41 C at each of 9 scrapes (one GPU, one value).
    stored = _stored("prometheus_dcgm_exported_pod_shared_gpu.txt")
    times = (START_MS + INTERVAL_MS * np.arange(SCRAPES)) / 1000
    series = [Series(name, labels, times, np.full(SCRAPES, 41.0)) for name, labels in stored]
    window = Window(
        datetime.fromtimestamp(times[0], UTC),
        datetime.fromtimestamp(times[-1] + INTERVAL_MS / 1000, UTC),
    )
    manifest = Manifest(
        title="a time-sliced GPU",
        synthetic=False,
        window=ManifestWindow(start=window.start, end=window.end),
        scrape_interval_seconds=INTERVAL_MS / 1000,
        deployments=(
            Deployment(
                name="sliced",
                selector={"pod": "~pod[12]"},
                hardware={"gpu_model": "NVIDIA GeForce RTX 4090", "gpus_per_replica": 1},
                engine={"name": "vllm"},
            ),
        ),
        methodology=("Series of a Prometheus query answer (dcgm-exporter issue 340).",),
    )
    source = DatasetSource(write_dataset(tmp_path / "ds", manifest, series))
    (deployment,) = manifest.deployments
    found = discover(source, deployment, window)
    assert found.scheme is GpuLabelScheme.EXPORTED
    assert found.shared == ("worker1/gpu0",)
    r = Reading(source, deployment, window, "t")
    temps = last_over_time(dcgm.GPU_TEMP.select(deployment.gpu_matchers).over(window.seconds))
    gpus = r.measure("gpus", Aggregate("count", temps), "GPUs")
    total = r.measure("sum", temps.sum(), "C")
    per_pod = r.measure_by(
        {Labels({"pod": "pod1"}): "pod1", Labels({"pod": "pod2"}): "pod2"},
        temps.sum(by=("pod",)),
        ("pod",),
        "C",
    )
    assert gpus.value == 1
    assert total.value == 41.0
    assert [m.value for m in per_pod.values()] == [41.0, 41.0]
    for m in (gpus, total):
        assert {"shared_gpus", "gpu_label_scheme"} <= {a.kind for a in m.annotations}
        assert "worker1/gpu0" in next(a for a in m.annotations if a.kind == "shared_gpus").message


# The V0 paste's cache_config_info line has num_gpu_blocks="11560" and block_size="16".
_INFO_LINE = re.compile(r"^(vllm:cache_config_info\{.*)\} 1\.0$", re.M)


@pytest.mark.parametrize(
    ("exported", "expected", "how"),
    [
        (None, 11560 * 16, "num_gpu_blocks x block_size"),
        # A pool size as vLLM >= 0.33 exports it beside a hybrid model's smallest block size
        # (the figure a public deployment note reads from its own /metrics).
        ("286458", 286458, "kv_cache_size_tokens"),
        # An unset field is the text None: the blocks are read instead.
        ("None", 11560 * 16, "num_gpu_blocks x block_size"),
    ],
)
def test_kv_capacity_prefers_the_exported_pool_size(
    tmp_path: Path, exported: str | None, expected: int, how: str
) -> None:
    text = V0
    if exported is not None:  # the real line, with the label newer vLLM adds to it
        text = _INFO_LINE.sub(rf'\1,kv_cache_size_tokens="{exported}"}} 1.0', V0)
    deployment = Deployment(
        name="v0", selector={"job": "vllm"}, hardware=HARDWARE, engine={"name": "vllm"}
    )
    served = [(target("vllm=http://10.0.0.1:8000/metrics"), text, 0)]
    found = measurements(report(record(tmp_path / "ds", served, [deployment]), tmp_path / "r"))
    capacity = found["v0/configuration/kv_capacity_tokens"]
    assert (capacity["status"], capacity["value"]) == ("ok", expected)
    assert how in capacity["provenance"]["computation"]
