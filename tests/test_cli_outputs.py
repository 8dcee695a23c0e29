"""``report --out``: checked before any work, written whole, and never left looking complete.

A scheduled job reads ``report.json`` from ``--out``; it must never find a
previous run's report there after a failed one, nor half of a new one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_BUDGET, EXIT_OK, EXIT_USAGE, main
from inference_obs.errors import ConfigurationError
from inference_obs.report import build_report, write_report
from inference_obs.report.write import check_output
from inference_obs.source.dataset.source import DatasetSource

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "datasets" / "r1-decode"


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], *named: str) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == EXIT_USAGE, err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    for text in named:
        assert text in err, (text, err)


def test_an_out_that_is_a_file_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "report"
    taken.write_text("not a directory")
    # No dataset there: had the dataset been read first, the error would name it.
    argv = ["report", "--dataset", str(tmp_path / "no-dataset"), "--out", str(taken)]
    refused(argv, capsys, f"--out {taken}", "is not a directory")
    assert taken.read_text() == "not a directory"


@pytest.mark.parametrize(
    "where",
    [
        "{tmp}/file/report",  # a parent is a file
        "/proc/inference-obs-report",  # a file system nobody writes, root included
    ],
)
def test_an_unwritable_out_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    (tmp_path / "file").write_text("x")
    out = where.replace("{tmp}", str(tmp_path))
    argv = ["report", "--dataset", str(tmp_path / "no-dataset"), "--out", out]
    refused(argv, capsys, f"--out {out}")


def test_a_report_name_taken_by_a_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out" / "report.json").mkdir(parents=True)
    argv = ["report", "--dataset", str(tmp_path / "no-dataset"), "--out", str(tmp_path / "out")]
    refused(argv, capsys, "report.json is there and is not a file")


def test_a_failed_report_leaves_the_previous_report_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A scheduled job whose run fails (here: out of time) keeps its last good report.
    out = tmp_path / "out"
    (out).mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["report", "--dataset", str(DATASET), "--out", str(out), "--quiet"]
    assert main(argv) == EXIT_OK
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert Path("report.json") in before
    assert main([*argv, "--time-budget", "0.000001"]) == EXIT_BUDGET
    capsys.readouterr()
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging left


def test_a_new_out_is_made_with_the_umask(tmp_path: Path) -> None:
    out = tmp_path / "out"
    umask = os.umask(0o022)
    try:
        assert main(["report", "--dataset", str(DATASET), "--out", str(out), "--quiet"]) == 0
    finally:
        os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o755  # readable by a web server, as any directory
    assert (out / "report.json").stat().st_mode & 0o777 == 0o644


def test_a_new_report_replaces_the_previous_one_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["report", "--dataset", str(DATASET), "--out", str(out), "--quiet"]
    assert main(argv) == EXIT_OK
    assert (out / "figures").is_dir()
    assert main([*argv, "--format", "json"]) == EXIT_OK
    # No stale md, html or figures; replicas.csv is written with report.json.
    assert sorted(p.name for p in out.iterdir()) == ["replicas.csv", "report.json"]


def test_every_file_written_is_listed_figures_included(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["report", "--dataset", str(DATASET), "--out", str(out), "--format", "md"]) == 0
    listed = {line.removeprefix("wrote ") for line in capsys.readouterr().out.splitlines()}
    on_disk = {str(p) for p in out.rglob("*") if p.is_file()}
    assert listed == on_disk
    assert any(p.endswith(".png") for p in listed)


def test_write_report_moves_nothing_when_a_target_is_in_the_way(tmp_path: Path) -> None:
    source = DatasetSource(DATASET)
    manifest = source.dataset.manifest
    report = build_report(
        source, manifest.deployments, manifest.window.window(), title="t", source_name="d"
    )
    out = tmp_path / "out"
    write_report(report, out, ["md", "json"])
    (out / "report.json").unlink()
    (out / "report.json").mkdir()  # in the way
    before = (out / "report.md").read_bytes()
    with pytest.raises(IsADirectoryError):
        write_report(report, out, ["md", "json"])
    assert (out / "report.md").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with pytest.raises(ConfigurationError, match=r"report\.json is there and is not a file"):
        check_output(out)


def test_a_refused_run_creates_no_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "a" / "b" / "report"
    argv = ["report", "--dataset", str(tmp_path / "no-dataset"), "--out", str(out)]
    refused(argv, capsys, str(tmp_path / "no-dataset"))
    assert list(tmp_path.iterdir()) == []  # neither the parents nor a probe are left
