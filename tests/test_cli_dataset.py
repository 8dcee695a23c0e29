"""``inference-obs dataset verify|export``: output, exit codes, and errors that keep secrets.

Exporting from a real Prometheus through the command line is tested in
``tests/integration/test_dataset_export.py``.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest

from inference_obs.cli import main
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.writer import write_dataset

DATASETS = Path(__file__).parents[1] / "datasets"
WINDOW = ["--start", "2026-10-19T17:40:00+08:00", "--end", "2026-10-19T18:40:00+08:00"]


def test_verify_prints_every_number_and_exits_0_when_all_agree() -> None:
    # As a user runs it: the installed module, a fresh interpreter.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "inference_obs.cli",
            "dataset",
            "verify",
            str(DATASETS / "r1-decode"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # 8 sampled numbers, 35 request figures recomputed from requests.csv, 22 report numbers
    # checked against it; 9 with no number on either side (8 quantiles of histograms the
    # dataset does not export, a cache hit rate no request had).
    assert lines[-1] == (
        "65 ok, 0 differs, 0 missing, 15 not_recomputable, 9 absent, 0 outside (simulated layout)"
    )
    assert (
        "ok               realised.R1.max_sampled_running  published 60  recomputed 60  "
        "difference +0"
    ) in lines
    assert any(
        line.startswith("ok               realised.R1.ttft_seconds.p95  published 0.095252  ")
        for line in lines
    )
    assert len(lines) == 89 + 1


def test_verify_exits_1_and_shows_the_difference_when_a_number_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = read_dataset(DATASETS / "r1-decode")
    aggregates = copy.deepcopy(dict(dataset.aggregates or {}))
    aggregates["realised"]["R1"]["gpu_power_mean_watts"] = 600.0
    write_dataset(tmp_path / "d", dataset.manifest, dataset.samples, aggregates=aggregates)
    assert main(["dataset", "verify", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert (
        "differs          realised.R1.gpu_power_mean_watts  published 600  "
        "recomputed 556.6320219  difference -43.36797813"
    ) in out
    assert "1 differs" in out.splitlines()[-1]
    assert "published numbers differ, are missing or fall outside their bounds" in err


def test_verify_exits_1_when_nothing_can_be_recomputed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = read_dataset(DATASETS / "r1-decode")
    write_dataset(tmp_path / "d", dataset.manifest, dataset.samples)
    assert main(["dataset", "verify", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == (
        "0 ok, 0 differs, 0 missing, 0 not_recomputable, 0 absent, 0 outside (none layout)"
    )
    assert "none could be recomputed" in err


def test_verify_of_no_dataset_exits_2_naming_the_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["dataset", "verify", str(tmp_path / "nothing")]) == 2
    assert f"{tmp_path / 'nothing'}: no dataset directory there" in capsys.readouterr().err


def test_export_without_an_end_names_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "dataset", "export", "--prometheus", "http://127.0.0.1:9", "--deployments",
            str(DATASETS / "r1-decode"), "--out", str(tmp_path / "out"), "--window", "1h",
        ]
    )  # fmt: skip
    assert status == 2
    assert "dataset export needs --end, and --start or --window" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_export_with_a_bad_deployments_file_names_the_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "deployments.yaml"
    bad.write_text("deployments:\n  - name: PRO\n    selector: {pod: x}\n", encoding="utf-8")
    status = main(
        [
            "dataset", "export", "--prometheus", "http://127.0.0.1:9", "--deployments", str(bad),
            "--out", str(tmp_path / "out"), *WINDOW,
        ]
    )  # fmt: skip
    assert status == 2
    err = capsys.readouterr().err
    assert f"{bad}: deployments[0].hardware: Field required" in err
    assert "deployments[0].engine: Field required" in err


def test_a_malformed_header_is_refused_without_echoing_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "Bearer s3cr3t-t0ken-value"
    status = main(
        [
            "dataset", "export", "--prometheus", "http://127.0.0.1:9", "--deployments",
            str(DATASETS / "r1-decode"), "--out", str(tmp_path / "out"), *WINDOW,
            "--header", "X-Scope-OrgID: team", "--header", secret,
        ]
    )  # fmt: skip
    assert status == 2
    out, err = capsys.readouterr()
    assert "--header number 2: expected 'Name: value'" in err
    assert "s3cr3t" not in out + err
