"""The benchmark runners that need no server, at a size of seconds: they run and print their
medians and ratios (their timings are not checked here; benchmarks/README.md records them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import fleet, report
from benchmarks.fleet_gpus import DCGM_FIELDS
from benchmarks.fleet_series import VLLM_FAMILIES
from inference_obs.metrics.family import MetricType
from inference_obs.source.dataset import read_dataset

TINY = ["--replicas", "2", "--gpus-per-replica", "2", "--hours", "0.25", "--interval", "15"]


def test_fleet_writes_a_dataset_of_every_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.main(["--out", str(tmp_path / "fleet"), *TINY])
    assert "wrote" in capsys.readouterr().out
    dataset = read_dataset(tmp_path / "fleet", cache=None)
    names = set(dataset.samples.names)
    for family in VLLM_FAMILIES:
        parts = ("_bucket", "_sum", "_count") if family.type is MetricType.HISTOGRAM else ("",)
        assert {family.name + part for part in parts} <= names
    assert {f.name for f in DCGM_FIELDS} <= names
    assert [d.name for d in dataset.manifest.deployments] == ["H100", "H200"]
    # Replica 1 (the first H200 one here) restarts: its counters drop once.
    samples = dataset.samples
    i = next(
        k
        for k, (name, labels) in enumerate(zip(samples.names, samples.labels, strict=True))
        if name == "vllm:generation_tokens_total" and labels["pod"] == "fleet-h200-01"
    )
    values = samples.values[samples.offsets[i] : samples.offsets[i + 1]]
    assert int(np.sum(np.diff(values) < 0)) == 1


def test_fleet_is_the_same_for_the_same_seed(tmp_path: Path) -> None:
    shape = fleet.FleetShape(replicas=2, gpus_per_replica=1, hours=0.1)
    one = fleet.write_fleet(tmp_path / "a", shape)
    two = fleet.write_fleet(tmp_path / "b", shape)
    assert one.manifest.files == two.manifest.files


def test_report_prints_medians_and_its_goals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.main(["--out", str(tmp_path / "fleet"), *TINY])
    report.main(["--dataset", str(tmp_path / "fleet"), "--repeats", "1", "--no-peer"])
    out = capsys.readouterr().out
    assert "median s" in out
    assert "report, empty cache (cold)" in out
    assert "report, cache filled (warm)" in out
    assert "(goal < 60 s)" in out
    assert "(goal < 4 GiB)" in out
