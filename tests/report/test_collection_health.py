"""Collection health, memory and errors, via the report the command line writes.

The small test scenario injects one of every fault: S-01 restarts at 6m (40 s
down), S-02's app target misses scrapes from 7m to 7m40s and its GPU exporter
from 8m to 8m30s, and S-02's GPU 1 stops at 5m30s. Every expected number is
counted here from the dataset's raw samples or read from the scenario's faults,
never from the code under test.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.cli import main
from inference_obs.samples import Series
from inference_obs.simulate import run_scenario, write_simulation
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.ground_truth import truth
from tests.analyses.late_pod import late_dataset, late_gpus_dataset

SMALL = Path(__file__).parents[1] / "simulate" / "small.yaml"
DATASETS = Path(__file__).parents[2] / "datasets"


class Written:
    """The small scenario's dataset and the report written from it with the CLI's defaults."""

    def __init__(self, root: Path) -> None:
        self.data = root / "data"
        write_simulation(run_scenario(SMALL), self.data)
        self.dataset = read_dataset(self.data)
        out = root / "report"
        assert main(["report", "--dataset", str(self.data), "--out", str(out), "--quiet"]) == 0
        self.markdown = (out / "report.md").read_text(encoding="utf-8")
        self.json = json.loads((out / "report.json").read_text(encoding="utf-8"))
        window = self.dataset.manifest.window
        self.start_ms, self.end_ms = window.start.timestamp() * 1000, window.end.timestamp() * 1000

    def measurement(self, key: str) -> dict[str, Any]:
        matches: list[dict[str, Any]] = [m for m in self.json["measurements"] if m["key"] == key]
        (found,) = matches
        return found

    def in_window(self, name: str, **labels: str) -> list[Series]:
        """Series named ``name`` with ``labels``, cut to the window (both ends included)."""
        out = []
        for s in self.dataset.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                keep = (s.t_ms >= self.start_ms) & (s.t_ms <= self.end_ms)
                out.append(Series(s.name, s.labels, s.t_ms[keep] / 1000, s.values[keep]))
        # Series keeps unix ms in t_ms: every time below is in ms.
        return out

    def section(self, title: str) -> str:
        return self.markdown.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return Written(tmp_path_factory.mktemp("collection"))


def test_samples_per_instance_and_the_measured_interval(small: Written) -> None:
    running = small.in_window("vllm:num_requests_running")
    assert len(running) == 2  # one engine per replica
    spacings = np.concatenate([np.diff(s.t_ms) for s in running])
    interval = float(np.median(spacings)) / 1000
    assert interval == pytest.approx(15, abs=0.5)  # the scenario scrapes every 15 s
    got = small.measurement("SMALL/collection/scrape_interval")
    assert got["value"] == pytest.approx(interval, rel=1e-12)
    assert got["unit"] == "seconds"
    for s in running:
        m = small.measurement(f"SMALL/collection/app_samples[{s.labels['instance']}]")
        assert m["value"] == len(s.t_ms)
        # 600 s at 15 s: 40 scrapes expected; each replica lost 3 to its fault.
        assert len(s.t_ms) < 40
    assert f"| {600 / interval:.4g} |" in small.section("Collection health")


def test_scrape_gaps_cover_the_injected_faults(small: Written) -> None:
    gaps = small.measurement("SMALL/collection/scrape_gaps")
    # The restart's 40 s down, the app gap (40 s) and the GPU exporter gap (30 s).
    assert gaps["value"] == 3
    (app_02,) = small.in_window("vllm:num_requests_running", pod="small-02")
    before = app_02.t_ms[app_02.t_ms < small.start_ms + 420_000].max()
    after = app_02.t_ms[app_02.t_ms >= small.start_ms + 460_000].min()
    (report,) = [d for d in small.json["deployments"] if d["name"] == "SMALL"]
    longest = report["scrape_gaps"][0]
    assert longest["target"] == f"app {app_02.labels['instance']}"
    assert longest["seconds"] == pytest.approx((after - before) / 1000, abs=1e-3)
    assert "longest gap app " + app_02.labels["instance"] in small.section("Collection health")


def test_the_restart_is_one_counter_reset_named(small: Written) -> None:
    drops = {}
    for s in small.in_window("vllm:generation_tokens_total"):
        drops[s.labels["instance"]] = int(np.sum(np.diff(s.values) < 0))
    assert sorted(drops.values()) == [0, 1]
    resets = small.measurement("SMALL/collection/counter_resets")
    assert resets["value"] == 1
    (restarted,) = [k for k, v in drops.items() if v]
    assert restarted in resets["annotations"][0]["message"]


def test_a_gpu_that_stops_part_way_is_named(small: Written) -> None:
    (util,) = small.in_window("DCGM_FI_DEV_GPU_UTIL", pod="small-02", gpu="1")
    last = util.t_ms[-1]
    assert last < small.start_ms + 330_000  # the fault: no samples from 5m30s on
    stopped = small.measurement("SMALL/collection/gpus_stopped")
    assert stopped["value"] == 1
    name = f"{util.labels['Hostname']}/gpu1"
    assert name in stopped["annotations"][0]["message"]
    (report,) = [d for d in small.json["deployments"] if d["name"] == "SMALL"]
    (gone,) = report["gpus_stopped"]
    assert gone["name"] == name
    assert datetime.fromisoformat(gone["last_sample"]).timestamp() * 1000 == pytest.approx(last)
    # The utilisation mean says so: partial, annotated, named in the GPU section.
    mean = small.measurement("SMALL/gpu/utilization_mean")
    assert mean["status"] == "partial"
    assert any(a["kind"] == "stopped_gpus" and name in a["message"] for a in mean["annotations"])
    assert f"stopped reporting part-way: {name}" in small.section("GPU activity and bottleneck")
    assert small.measurement("SMALL/collection/gpus_silent")["value"] == 0


def test_kv_cache_maximum_per_replica(small: Written) -> None:
    every = []
    for s in small.in_window("vllm:kv_cache_usage_perc"):
        m = small.measurement(f"SMALL/memory/kv_cache_usage_max[{s.labels['pod']}]")
        assert m["value"] == float(s.values.max())
        every.append(float(s.values.max()))
    assert small.measurement("SMALL/memory/kv_cache_usage_max")["value"] == max(every)


def test_no_series_is_no_data_and_not_evidence_of_absence(small: Written) -> None:
    for key in ("memory/working_set_max", "errors/xid_last", "errors/mooncake_failed_keys"):
        m = small.measurement(f"SMALL/{key}")
        assert m["status"] == "no_data"
        assert m["value"] is None
        assert m["annotations"][0]["kind"] == "no_data"
    section = small.section("Memory and errors")
    (row,) = [line for line in section.splitlines() if line.startswith("| SMALL |")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:] == ["no series (not evidence of absence)"] * 4
    assert "no Xid series is not the absence of Xid errors" in section


def test_throughput_section_per_replica_and_floor(small: Written) -> None:
    total = small.measurement("SMALL/throughput/output_tokens_per_second")["value"]
    parts = [
        small.measurement(f"SMALL/throughput/output_tokens_per_second[{pod}]")["value"]
        for pod in ("small-01", "small-02")
    ]
    assert sum(parts) == pytest.approx(total, rel=1e-12)  # increases per series, summed
    finished = small.measurement("SMALL/throughput/finished_requests")["value"]
    rate = small.measurement("SMALL/throughput/requests_per_second")["value"]
    assert rate == pytest.approx(finished / 600, rel=1e-12)
    section = small.section("Throughput")
    assert "observed floor, not capacity" in section
    assert len([line for line in section.splitlines() if line.startswith("| SMALL |")]) == 3


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    """The bundled PRO 5000 vs H20 dataset's report, written with the CLI's defaults."""
    data, out = DATASETS / "pro5000-vs-h20", tmp_path_factory.mktemp("published")
    assert main(["report", "--dataset", str(data), "--out", str(out), "--quiet"]) == 0
    document = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return data, document, (out / "report.md").read_text(encoding="utf-8")


def _value(document: dict[str, Any], key: str) -> Any:
    (found,) = [m for m in document["measurements"] if m["key"] == key]
    return found["value"]


def test_queue_share_of_ttft_against_ground_truth(
    published: tuple[Path, dict[str, Any], str],
) -> None:
    data, document, markdown = published
    source = DatasetSource(data)
    for name in ("PRO", "H20"):
        queue = truth(source, name, "queue_time")
        ttft = truth(source, name, "ttft", "first_token", False)
        share = _value(document, f"{name}/latency/queue_share_of_ttft")
        assert share == pytest.approx(queue.mean() / ttft.mean(), rel=1e-9)
        assert f"{share * 100:.3g}% of {name}'s mean TTFT" in markdown


def test_published_collection_matches_raw_samples(
    published: tuple[Path, dict[str, Any], str],
) -> None:
    data, document, markdown = published
    dataset = read_dataset(data)
    window = dataset.manifest.window
    start, end = window.start.timestamp() * 1000, window.end.timestamp() * 1000
    spacings: dict[str, list[np.ndarray]] = {"PRO": [], "H20": []}
    for s in dataset.samples:
        if s.name != "vllm:num_requests_running":
            continue
        times = s.t_ms[(s.t_ms >= start) & (s.t_ms <= end)]
        deployment = "PRO" if s.labels["pod"].startswith("pro") else "H20"
        key = f"{deployment}/collection/app_samples[{s.labels['instance']}]"
        assert _value(document, key) == times.size == 60  # as the published observation says
        spacings[deployment].append(np.diff(times))
    for name, parts in spacings.items():
        median = float(np.median(np.concatenate(parts))) / 1000
        assert _value(document, f"{name}/collection/scrape_interval") == pytest.approx(median)
    # The dataset exports no Xid or working-set series: no data, said as such, never 0.
    for name in ("PRO", "H20"):
        assert _value(document, f"{name}/errors/xid_last") is None
        assert _value(document, f"{name}/memory/working_set_max") is None
    assert "Scrape interval, measured from the samples (median spacing): PRO: app 60 s" in markdown


def _report(data: Path, out: Path, *window: str) -> tuple[dict[str, Any], str]:
    assert main(["report", "--dataset", str(data), "--out", str(out), "--quiet", *window]) == 0
    document = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return document, (out / "report.md").read_text(encoding="utf-8")


def _coverage_notes(document: dict[str, Any]) -> list[str]:
    return [
        m["key"]
        for m in document["measurements"]
        if any(a["kind"] == "coverage" for a in m["annotations"])
    ]


def test_a_window_longer_than_the_data_says_so_and_keeps_the_rates(
    published: tuple[Path, dict[str, Any], str], tmp_path: Path
) -> None:
    data, hour, hour_markdown = published
    end = read_dataset(data).manifest.window.end.isoformat()
    document, markdown = _report(data, tmp_path, "--window", "2h", "--end", end)
    health = markdown.split("## Collection health\n", 1)[1].split("\n## ", 1)[0]
    for name in ("PRO", "H20"):
        # The data holds the last of the two hours: rates are those of the one-hour report.
        for rate in ("output_tokens_per_second", "requests_per_second"):
            key = f"{name}/throughput/{rate}"
            assert _value(document, key) == pytest.approx(_value(hour, key), rel=0.01)
        assert _value(document, f"{name}/collection/covered_share") == pytest.approx(0.5, abs=0.01)
        assert _value(document, f"{name}/collection/covered_end") == 7200.0
        assert f"{name}'s series cover 2026-10-19 17:39" in health
    assert health.count("50% of the 2 h window") == 2
    assert "rates are per second of that span" in health
    served = markdown.split("## Throughput\n", 1)[1].split("\n## ", 1)[0]
    for name in ("PRO", "H20"):
        seconds = _value(document, f"{name}/collection/covered_seconds")
        assert f"{name}: rates per second of the {seconds:,.0f} s its series cover" in served
    # The window the data fills: nothing said, nothing marked.
    assert "series cover 20" not in hour_markdown
    assert _coverage_notes(hour) == []
    for name in ("PRO", "H20"):
        assert _value(hour, f"{name}/collection/covered_share") == 1.0


def test_the_first_covered_second_is_half_a_scrape_before_the_first_scrape(
    published: tuple[Path, dict[str, Any], str], tmp_path: Path
) -> None:
    data, _, _ = published
    dataset = read_dataset(data)
    end = dataset.manifest.window.end
    document, _ = _report(data, tmp_path, "--window", "2h", "--end", end.isoformat())
    start_ms = end.timestamp() * 1000 - 7_200_000
    firsts = []
    for s in dataset.samples:
        if s.name == "vllm:num_requests_running" and s.labels["pod"].startswith("h20"):
            spacing = (s.t_ms[-1] - s.t_ms[0]) / (len(s.t_ms) - 1)  # 60 s
            firsts.append(s.t_ms[0] - spacing / 2)  # increase() reaches back half a spacing
    covered_start = _value(document, "H20/collection/covered_start")
    assert covered_start == pytest.approx((min(firsts) - start_ms) / 1000, abs=1e-3)


def test_a_pod_that_starts_mid_window_is_named(tmp_path: Path) -> None:
    data = late_dataset(tmp_path).path
    document, markdown = _report(data, tmp_path / "report")
    health = markdown.split("## Collection health\n", 1)[1].split("\n## ", 1)[0]
    assert "H20: app targets present for part of the 1 h window: 10.1.3.10:8000 from 18:09" in (
        health
    )
    assert _value(document, "H20/collection/covered_share") == 1.0  # the others cover it
    assert "H20/throughput/output_tokens_per_second[h20-model-04]" in _coverage_notes(document)


def test_gpu_series_that_cover_less_than_the_app_series_are_said(tmp_path: Path) -> None:
    data = late_gpus_dataset(tmp_path).path
    document, markdown = _report(data, tmp_path / "report")
    health = markdown.split("## Collection health\n", 1)[1].split("\n## ", 1)[0]
    # The exporters' first scrapes come half-way (1800 s of 3600 s), give or take a
    # scrape interval: about half the window.
    assert _value(document, "H20/collection/gpu_covered_share") == pytest.approx(0.5, abs=0.02)
    assert _value(document, "H20/collection/covered_share") == 1.0
    assert "H20's GPU series cover 18:09" in health
    assert "of the 1 h window, its app series all of it: utilisation describes" in health
    assert "PRO's GPU series" not in health
