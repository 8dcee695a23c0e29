"""``inference-obs discover``: a deployments file that ``report`` reads as is, and its refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_NO_DATA, EXIT_OK, EXIT_USAGE, main
from inference_obs.source.deployments_file import load_deployments

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "datasets" / "r1-decode"


def test_discover_writes_a_file_report_reads_as_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deployments.yaml"
    assert main(["discover", "--dataset", str(DATASET), "--out", str(path)]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out == f"wrote {path}\n"
    assert "DeepSeek-R1-0528: 2 x 8 NVIDIA H200 (vllm)" in err
    (found,) = load_deployments(path)
    assert found.replicas == ("r1-01", "r1-02")
    report = tmp_path / "report"
    argv = ["report", "--dataset", str(DATASET), "--deployments", str(path), "--quiet"]
    assert main([*argv, "--out", str(report), "--format", "json"]) == EXIT_OK
    data = json.loads((report / "report.json").read_text())
    seen = {m["key"]: m["value"] for m in data["measurements"]}
    assert seen["DeepSeek-R1-0528/throughput/replicas_seen"] == 2.0
    assert seen["DeepSeek-R1-0528/gpu/gpus_with_samples"] == 16.0


def test_an_existing_file_is_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deployments.yaml"
    path.write_text("# edited by hand\n")
    # No dataset there: the refusal comes before reading one.
    argv = ["discover", "--dataset", str(tmp_path / "none"), "--out", str(path)]
    assert main(argv) == EXIT_USAGE
    assert "exists; give --force" in capsys.readouterr().err
    assert path.read_text() == "# edited by hand\n"
    argv = ["discover", "--dataset", str(DATASET), "--out", str(path), "--force"]
    assert main(argv) == EXIT_OK
    assert path.read_text().startswith("# Deployments found by `inference-obs discover`")
    assert [p.name for p in tmp_path.iterdir()] == ["deployments.yaml"]  # no temporary left


def test_out_dash_prints_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["discover", "--dataset", str(DATASET), "--out", "-"]) == EXIT_OK
    out = capsys.readouterr().out
    assert 'pod: {regex: "r1-.*"}' in out


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["discover"], "give --prometheus URL (live) or --dataset DIR"),
        (["discover", "--dataset", "{tmp}/none", "--out", "{tmp}"], "is a directory"),
        (["discover", "--dataset", "{tmp}/none", "--out", "{tmp}/no/f.yaml"], "no directory"),
        (["discover", "--dataset", "{tmp}/none", "--out", "{tmp}/f.yaml"], "{tmp}/none"),
        (["discover", "--dataset", "{tmp}/none", "--out", "/proc/f.yaml"], "cannot be written"),
        (["discover", "--prometheus", "http://127.0.0.1:9", "--end", "now+1h"], "--end 'now+1h'"),
    ],
)
def test_bad_options_are_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert named.replace("{tmp}", str(tmp_path)) in err
    assert len(err.splitlines()) == 1


def test_a_window_without_serving_series_is_3_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deployments.yaml"
    argv = ["discover", "--dataset", str(DATASET), "--out", str(path)]
    assert main([*argv, "--end", "now", "--window", "1h"]) == EXIT_NO_DATA
    assert "no vLLM or SGLang series" in capsys.readouterr().err
    assert not path.exists()


def test_version_and_simulate_help(capsys: pytest.CaptureFixture[str]) -> None:
    from inference_obs.version import __version__

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"inference-obs {__version__}\n"
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = capsys.readouterr().out
    for name in ("pro5000-vs-h20", "h100-vs-h200", "r1-decode", "gpu-boundaries"):
        assert f"  {name} " in text
