"""Analysis settings from the command line: ``inference-obs analyses`` and ``report --set``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_OK, EXIT_USAGE, main

DATASET = Path(__file__).resolve().parents[1] / "datasets" / "pro5000-vs-h20"


def test_the_analyses_are_listed_with_their_settings_and_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["analyses"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "queueing: " in out
    assert "--set queueing.busy_threshold=50.0" in out
    assert "--set throughput.kv_full=0.99" in out


def _shares(out: Path) -> dict[str, float | None]:
    document = json.loads((out / "report.json").read_text())
    return {
        m["statistic"]: m["value"]
        for m in document["measurements"]
        if m["deployment"] == "H20" and m["analysis"] == "queueing"
    }


def test_a_setting_changes_the_report_that_reads_it(tmp_path: Path) -> None:
    common = ["report", "--dataset", str(DATASET), "--format", "json", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "default")]) == EXIT_OK
    never_busy = ["--out", str(tmp_path / "busy-at-100"), "--set", "queueing.busy_threshold=100"]
    assert main([*common, *never_busy]) == EXIT_OK
    default, never = _shares(tmp_path / "default"), _shares(tmp_path / "busy-at-100")
    # By default (busy from 50 %) the one queue the fleet had was on busy GPUs; with
    # GPUs busy only at 100 %, the same rows read starved, and nothing is capacity.
    assert (default["share_capacity"] or 0) > 0
    assert never["share_capacity"] == 0
    assert never["share_starved"] == default["share_capacity"]


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("queueing.busy_thresh=60", "queueing.busy_thresh"),
        ("queue.busy_threshold=60", "no analysis is called 'queue'"),
        ("throughput.kv_full=2", "throughput.kv_full"),
        ("busy_threshold=60", "analysis.setting=value"),
    ],
)
def test_a_bad_setting_is_refused_before_anything_is_read(
    given: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["report", "--dataset", str(tmp_path / "absent"), "--out", str(out), "--set", given]
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--set" in err
    assert named in err
    assert not out.exists()


def test_slo_and_currency_options_are_checked_before_any_work(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "report"
    assert main(["report", "--out", str(out), "--slo", "ttft<2s"]) == EXIT_USAGE
    assert "--slo: invalid settings for the slo analysis" in capsys.readouterr().err
    assert main(["report", "--out", str(out), "--currency", "E U R"]) == EXIT_USAGE
    assert "--currency: invalid settings for the cost analysis" in capsys.readouterr().err
    assert not out.exists()  # refused before anything was read or written
    # The listing shows the defaults as --slo and --set take them.
    assert main(["analyses"]) == 0
    listed = capsys.readouterr().out
    assert "--set slo.targets=ttft<=2s@99%,itl<=50ms@99%,e2e<=30s@99%  " in listed
