"""Exit statuses as docs/report-json.md documents them, one test each, and no traceback.

A configuration error is 2, never 4: a scheduler that retries on 4 ("the
source failed") would retry a missing dataset or a broken deployments file
forever. Each 2 here is also checked to come before any work: the dataset
named does not exist or is never read, so a check that ran after reading it
would fail naming the dataset instead.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inference_obs.cli import (
    EXIT_BUDGET,
    EXIT_INTERRUPTED,
    EXIT_REGRESSION,
    EXIT_TERMINATED,
    EXIT_USAGE,
    main,
)

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "datasets" / "r1-decode"
MANIFEST = json.loads((DATASET / "manifest.json").read_text())


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], *named: str) -> str:
    """Exit 2 with one line naming each of ``named``; nothing on stdout."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE, err
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    for text in named:
        assert text in err, (text, err)
    return err


def deployments_file(tmp_path: Path, change: dict[str, object]) -> Path:
    deployment = {**MANIFEST["deployments"][0], **change}
    path = tmp_path / "deployments.yaml"
    path.write_text(yaml.safe_dump({"deployments": [deployment]}), encoding="utf-8")
    return path


def test_a_missing_dataset_is_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-dataset"
    refused(
        ["report", "--dataset", str(missing), "--out", str(tmp_path / "o")], capsys, str(missing)
    )
    refused(["compare", "--dataset", str(missing)], capsys, str(missing))


def test_a_missing_deployments_file_is_2_before_the_dataset_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "deployments.yaml"
    argv = ["report", "--dataset", str(tmp_path / "no-dataset"), "--deployments", str(missing)]
    refused([*argv, "--out", str(tmp_path / "o")], capsys, str(missing), "no deployments file")


def test_a_deployments_schema_error_is_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = deployments_file(tmp_path, {"hardware": {"gpu_model": "NVIDIA H200"}})
    argv = ["report", "--dataset", str(tmp_path / "no-dataset"), "--deployments", str(path)]
    refused([*argv, "--out", str(tmp_path / "o")], capsys, "gpus_per_replica", str(path))


def test_a_regex_written_as_an_exact_value_is_2_naming_the_label(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = deployments_file(tmp_path, {"selector": {"namespace": "llm", "pod": "r1-.*"}})
    argv = ["report", "--dataset", str(DATASET), "--deployments", str(path)]
    refused([*argv, "--out", str(tmp_path / "o")], capsys, "pod: 'r1-.*'", "{regex: 'r1-.*'}")


def test_a_corrupt_dataset_is_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "d"
    shutil.copytree(DATASET, copy)
    with (copy / "samples.om").open("a", encoding="utf-8") as samples:
        samples.write("# changed\n")
    refused(["report", "--dataset", str(copy), "--out", str(tmp_path / "o")], capsys, "SHA-256")


def test_an_empty_topology_file_is_2_before_the_dataset_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "topo.txt"
    empty.write_text("")
    argv = ["report", "--dataset", str(tmp_path / "no-dataset"), "--topology", f"R1={empty}"]
    refused([*argv, "--out", str(tmp_path / "o")], capsys, "--topology", "the text is empty")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--fail-on", "regression"], ["--fail-on regression needs --baseline"]),
        (["--fail-on", "regressions"], ["--fail-on 'regressions'"]),
        (["--baseline", "{tmp}/none.json"], ["{tmp}/none.json", "no report.json"]),
        (["--baseline", "{manifest}"], ["not a report.json"]),
        (["--end", "now+1h", "--window", "1h"], ["--end 'now+1h'"]),
        (["--end", "now-1x", "--window", "1h"], ["--end 'now-1x'"]),
    ],
)
def test_a_bad_report_option_is_2_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], named: list[str]
) -> None:
    subst = {"{tmp}": str(tmp_path), "{manifest}": str(DATASET / "manifest.json")}

    def fill(text: str) -> str:
        for key, value in subst.items():
            text = text.replace(key, value)
        return text

    argv = ["report", "--dataset", str(tmp_path / "no-dataset"), "--out", str(tmp_path / "o")]
    refused([*argv, *map(fill, args)], capsys, *map(fill, named))
    assert not (tmp_path / "o").exists()


def test_a_spent_budget_ends_the_run_with_6_before_the_dataset_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spent once the options are checked: nothing is read (the dataset reader's own
    check of a spent budget is tested with the reader) and nothing written."""
    argv = ["report", "--dataset", str(DATASET), "--out", str(tmp_path / "o"), "--quiet"]
    assert main([*argv, "--time-budget", "0.000001"]) == EXIT_BUDGET
    err = capsys.readouterr().err
    assert err == (
        "inference-obs: the time budget of 1e-06 s ran out; --out is as it was "
        "(before the work started)\n"
    )
    assert not (tmp_path / "o").exists()


def test_a_regression_with_fail_on_regression_is_7(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["report", "--dataset", str(DATASET), "--format", "json", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "then")]) == 0
    then = json.loads((tmp_path / "then" / "report.json").read_text())
    for m in then["measurements"]:
        if m["key"] == "R1/latency/ttft_mean":
            m["value"] /= 2  # the service used to be twice as fast
    (tmp_path / "then" / "report.json").write_text(json.dumps(then))
    baseline = ["--baseline", str(tmp_path / "then" / "report.json")]
    code = main([*argv, *baseline, "--out", str(tmp_path / "now"), "--fail-on", "regression"])
    err = capsys.readouterr().err
    assert code == EXIT_REGRESSION, err
    assert "regression: R1 latency/ttft_mean" in err
    assert main([*argv, *baseline, "--out", str(tmp_path / "again")]) == 0  # not asked to fail


def run_until_working(argv: list[str], cwd: Path, sig: int) -> subprocess.CompletedProcess[str]:
    """Run the command line, send ``sig`` once it reports analysing, and wait for it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "inference_obs.cli", *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:  # progress lines: the analyses have started
        seen.append(line)
        if line.rstrip().endswith(": latency"):  # the first analysis has started
            process.send_signal(sig)
            break
    out, err = process.communicate(timeout=120)
    return subprocess.CompletedProcess(argv, process.returncode, out, "".join(seen) + err)


@pytest.mark.parametrize(
    ("sig", "status"), [(signal.SIGTERM, EXIT_TERMINATED), (signal.SIGINT, EXIT_INTERRUPTED)]
)
def test_an_interrupted_report_leaves_the_last_report_as_it_was(
    tmp_path: Path, sig: int, status: int
) -> None:
    out = tmp_path / "report"
    argv = ["report", "--dataset", str(DATASET), "--out", str(out), "--format", "json"]
    assert main([*argv, "--quiet"]) == 0  # last week's report
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "report.json" in before
    done = run_until_working(argv, tmp_path, sig)
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr
    assert "interrupted" in done.stderr.splitlines()[-1]
    # A CronJob's deadline keeps last week's report; the exit status says this run failed.
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no staging left beside it


@pytest.mark.parametrize("command", ["report", "compare"])
def test_a_tile_width_that_does_not_cut_the_window_is_2_before_the_samples_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    copy = tmp_path / "d"
    shutil.copytree(DATASET, copy)
    with (copy / "samples.om").open("a", encoding="utf-8") as samples:
        samples.write("# changed\n")  # reading the samples would fail on the checksum
    out = ["--out", str(tmp_path / "o")] if command == "report" else []
    argv = [command, "--dataset", str(copy), "--resolution", "7", *out]
    refused(argv, capsys, "--resolution 7", "does not cut the 3600 s window")


def test_a_bug_in_the_run_stays_a_bug_not_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A ValueError that is not of the error tree (an int() of a label value deep inside a
    # run, say) is a bug: it must surface as itself, not as "input error" and exit 2.
    from inference_obs.report import from_source

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("invalid literal for int() with base 10: 'pod-a'")

    monkeypatch.setattr(from_source, "report", broken)
    argv = ["report", "--dataset", str(DATASET), "--out", str(tmp_path / "o"), "--quiet"]
    with pytest.raises(ValueError, match="invalid literal"):
        main(argv)


def test_a_live_reports_token_file_that_is_a_pipe_is_2_at_once(tmp_path: Path) -> None:
    """A named pipe nobody writes to as --token-file: reading it would wait for ever, past
    any --time-budget. Run in a child, so that a regression times out instead of hanging."""
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    argv = ["report", "--prometheus", "http://127.0.0.1:9", "--token-file", str(fifo)]
    done = subprocess.run(
        [sys.executable, "-m", "inference_obs.cli", *argv, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "not a regular file" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
