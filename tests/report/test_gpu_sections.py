"""The GPU sections of the report read as one story: what the command line writes, checked
against the queue table beside them, the scenario's injected faults and the numbers' own
caveats.

Reports are written by ``inference-obs report`` with its defaults, for the bundled
``pro5000-vs-h20`` dataset and for the same scenario simulated with a fresh seed (4242).
The scenario injects a stall on PRO-01 from 43m44.4s to 44m40s after the window's start
(pro5000-vs-h20.yaml); the scrape that saw its requests is found from requests.csv and
the raw samples, not by the code under test.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.cli import main
from inference_obs.metrics import vllm
from inference_obs.reading.wording import when
from inference_obs.simulate import simulate
from inference_obs.simulate.faults import Stall
from inference_obs.simulate.scenario import load_scenario
from inference_obs.source.dataset.source import DatasetSource

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "datasets" / "pro5000-vs-h20"
SCENARIO = "pro5000-vs-h20"
FRESH_SEED = 4242
STAGES = "## Stage boundaries: what the GPUs wait on"
GPUS = "## GPU activity and bottleneck"
CACHES = "## Caches and speculative decoding"


def _write(dataset: Path, out: Path) -> tuple[str, dict[str, Any]]:
    argv = ["report", "--dataset", str(dataset), "--out", str(out), "--quiet"]
    assert main([*argv, "--format", "md,json"]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    return text, json.loads((out / "report.json").read_text(encoding="utf-8"))


def _section(text: str, heading: str) -> str:
    return text.split(heading)[1].split("\n## ")[0]


@pytest.fixture(scope="module", params=["bundled", "fresh"])
def written(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, str, dict[str, Any]]:
    root = tmp_path_factory.mktemp(request.param)
    dataset = BUNDLED
    if request.param == "fresh":
        dataset = simulate(SCENARIO, root / "dataset", seed=FRESH_SEED).path
    return (dataset, *_write(dataset, root / "report"))


def _stall_scrapes(dataset: Path) -> list[datetime]:
    """PRO's app scrapes that saw the stalled requests running: from the first of the
    requests held when the stall began being scheduled (requests.csv, seconds from the
    window's start) to the stall's end, from the raw samples."""
    source = DatasetSource(dataset)
    (stall,) = [f for f in load_scenario(SCENARIO).faults if isinstance(f, Stall)]
    requests = source.dataset.requests
    assert requests is not None
    held = requests[
        (requests["replica"] == stall.replica)
        & (requests["scheduled"] <= stall.start)
        & (requests["finish"].fillna(np.inf) > stall.start)
    ]
    pro = next(d for d in source.dataset.manifest.deployments if d.name == "PRO")
    window = source.dataset.manifest.window.window()
    times_ms = source.raw(vllm.NUM_REQUESTS_RUNNING.select(pro.matchers), window).t_ms
    start = window.start + timedelta(seconds=float(held["scheduled"].min()))
    end = window.start + timedelta(seconds=stall.end)
    zone = window.start.tzinfo
    moments = [datetime.fromtimestamp(t / 1000, zone) for t in np.unique(times_ms).tolist()]
    return [m for m in moments if start <= m <= end]


def test_the_injected_stall_is_named_in_the_stage_boundaries(
    written: tuple[Path, str, dict[str, Any]],
) -> None:
    dataset, text, _ = written
    scrapes = _stall_scrapes(dataset)
    assert scrapes  # the stall's requests run for about a minute: one 60 s scrape sees them
    stages = _section(text, STAGES)
    for moment in scrapes:
        assert when(moment) in stages, when(moment)


def test_every_queue_row_on_idle_gpus_is_named_and_never_called_healthy_without_findings(
    written: tuple[Path, str, dict[str, Any]],
) -> None:
    _, text, data = written
    stages = _section(text, STAGES)
    for d in data["deployments"]:
        on_idle = [
            i for i in d["queue_intervals"] if i["classification"] in ("starved", "inconsistent")
        ]
        for interval in on_idle:
            start = when(datetime.fromisoformat(interval["start"]))
            assert start in stages, (d["name"], interval)
        found = d["boundaries"]
        if on_idle:
            assert found["intervals"], d["name"]
            assert "no boundary findings" not in found["reason"], found["reason"]
    assert "no boundary findings (boundary intervals" not in stages


def test_two_statistics_two_names_each_defined_where_shown(
    written: tuple[Path, str, dict[str, Any]],
) -> None:
    _, text, data = written
    gpus, stages = _section(text, GPUS), _section(text, STAGES)
    assert "duty cycle" not in gpus.split("\n\n")[1]  # the table's header row
    assert "GPU-steps with util > 0" in gpus.split("\n\n")[1]
    assert "GPU-steps with util > 0: the share of GPU-steps" in gpus
    assert "| duty cycle |" in stages
    assert "Duty cycle: the share of wall time the GPUs compute" in stages
    keys = {m["key"] for m in data["measurements"]}
    assert "PRO/bottleneck/nonzero_util_share" in keys
    assert "PRO/bottleneck/duty_cycle" not in keys
    assert "PRO/boundaries/duty_cycle" in keys


def _shown(data: dict[str, Any], analysis: str, statistics: tuple[str, ...]) -> list[str]:
    """The caveats, in report.json, of the numbers a section shows."""
    return [
        caveat
        for m in data["measurements"]
        if m["analysis"] == analysis and m["statistic"] in statistics
        for caveat in m["caveats"]
    ]


def test_every_caveat_of_a_shown_number_is_shown_with_it(
    written: tuple[Path, str, dict[str, Any]],
) -> None:
    _, text, data = written
    cache = ("prefix_cache_hit_rate", "external_kv_hit_rate", "preemptions")
    spec = ("spec_acceptance_rate", "spec_mean_acceptance_length")
    expected = {
        CACHES: _shown(data, "cache", cache + spec),
        GPUS: _shown(data, "bottleneck", ("nonzero_util_share", "kv_cache_usage_max"))
        + _shown(data, "gpu", ("utilization_mean", "power_mean_watts", "fb_used_mean_mib")),
        STAGES: _shown(data, "boundaries", ("duty_cycle", "tokens_per_gpu_hour")),
    }
    for heading, caveats in expected.items():
        section = _section(text, heading)
        assert caveats, heading
        for caveat in caveats:
            assert caveat in section, (heading, caveat)
    assert "Acceptance is progress per verification step, not an end-to-end speed-up" in (
        _section(text, CACHES)
    )


def test_the_bottleneck_reads_as_a_sentence_with_what_to_do(
    written: tuple[Path, str, dict[str, Any]],
) -> None:
    _, text, data = written
    gpus = _section(text, GPUS)
    assert "bottleneck: " not in gpus
    for d in data["deployments"]:
        # The deployment's one reading says what to do; the counters' bound follows it.
        regime = d["regime"]
        assert f": {regime['advice']}" in gpus
        assert f"| {regime['action']} |" in gpus
        # Neither deployment exports profiling counters: what bounds the GPUs is unknown.
        assert "DCGM_FI_PROF_DRAM_ACTIVE" in d["bottleneck_advice"]
        assert f"{d['name']} (" in gpus
    # H20's GPUs were busy (GPU_UTIL ~95 %) with no queue: nothing to batch, nothing to add.
    actions = {d["name"]: d["regime"]["action"] for d in data["deployments"]}
    assert actions["H20"] != "batch more"
    # PRO has one replica: nothing to consolidate.
    pro = next(d for d in data["deployments"] if d["name"] == "PRO")
    assert "fewer replicas" not in gpus
    assert "fewer replicas" not in pro["bottleneck_advice"]


@pytest.fixture(scope="module")
def boundaries_written(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """The report of the gpu-boundaries scenario: host and PCIe faults starve the GPUs."""
    root = tmp_path_factory.mktemp("gpu-boundaries")
    dataset = simulate("gpu-boundaries", root / "dataset", seed=7).path
    return _write(dataset, root / "report")


def test_short_unexplained_intervals_read_as_a_sentence_sustained_ones_as_rows(
    boundaries_written: tuple[str, dict[str, Any]],
) -> None:
    text, data = boundaries_written
    stages = _section(text, STAGES)
    (fleet,) = data["deployments"]
    intervals = fleet["boundaries"]["intervals"]
    sustained = [i for i in intervals if i["sustained"] or i["cause"] != "unexplained"]
    brief = [i for i in intervals if i not in sustained]
    assert sustained  # the scenario's host and PCIe faults
    assert brief  # stray misaligned scrapes
    rows = [line for line in stages.splitlines() if line.startswith("| serving/")]
    assert len(rows) == len(sustained)
    for i in sustained:
        start = when(datetime.fromisoformat(i["start"]))
        assert any(start in row and f"| {i['cause']} |" in row for row in rows), i
    (sentence,) = [
        line for line in stages.splitlines() if line.startswith("FLEET: short intervals")
    ]
    for i in brief:
        assert when(datetime.fromisoformat(i["start"])) in sentence, i
        assert not any(when(datetime.fromisoformat(i["start"])) in row for row in rows)


def _value(data: dict[str, Any], key: str) -> float:
    (value,) = [m["value"] for m in data["measurements"] if m["key"] == key]
    assert isinstance(value, float)
    return value


def test_shares_read_as_percent_under_their_defined_names(
    written: tuple[Path, str, dict[str, Any]],
    boundaries_written: tuple[str, dict[str, Any]],
) -> None:
    # A share (0-1) reads as a percent, never with "ratio" as its unit: the GPU-steps with
    # util > 0 in the GPUs table, the duty cycle in the stage boundaries' tables and in the
    # Summary. Values are read back from report.json, formatted here by hand (4 digits).
    _, text, data = written
    gpus, stages = _section(text, GPUS), _section(text, STAGES)
    for d in data["deployments"]:
        name = d["name"]
        nonzero = _value(data, f"{name}/bottleneck/nonzero_util_share")
        duty = _value(data, f"{name}/boundaries/duty_cycle")
        (gpu_row,) = [line for line in gpus.splitlines() if line.startswith(f"| {name} |")]
        assert f"| {100 * nonzero:.4g}% |" in gpu_row
        (stage_row,) = [line for line in stages.splitlines() if line.startswith(f"| {name} |")]
        assert f"| {100 * duty:.4g}% |" in stage_row
    text, data = boundaries_written
    summary = _section(text, "## Summary")
    duty = _value(data, "FLEET/boundaries/duty_cycle")
    assert 0 < duty < 1
    assert f"FLEET's GPUs read starved (duty cycle {100 * duty:.4g}%)" in summary
    assert " ratio)" not in summary
    rows = [line for line in _section(text, STAGES).splitlines() if line.startswith("| serving/")]
    assert rows
    assert all(re.search(r"\| [\d.]+% \|", row) for row in rows)
