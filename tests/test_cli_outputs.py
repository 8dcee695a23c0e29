"""``report --out``: checked before any work, written whole, and never left looking complete.

A scheduled job reads ``report.json`` from ``--out``; it must never find a
previous run's report there after a failed one, nor half of a new one.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_BUDGET, EXIT_OK, EXIT_USAGE, main
from inference_obs.dashboards import dashboard_files
from inference_obs.errors import ConfigurationError
from inference_obs.report import Report, build_report, write_report
from inference_obs.report.write import MANIFEST, check_output
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
    # No stale md, html or figures; replicas.csv is written with report.json, and the
    # hidden manifest lists them.
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "replicas.csv", "report.json"]


def test_every_file_written_is_listed_figures_included(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["report", "--dataset", str(DATASET), "--out", str(out), "--format", "md"]) == 0
    listed = {line.removeprefix("wrote ") for line in capsys.readouterr().out.splitlines()}
    on_disk = {str(p) for p in out.rglob("*") if p.is_file() and p.name != MANIFEST}
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


@pytest.fixture(scope="module")
def report() -> Report:
    source = DatasetSource(DATASET)
    manifest = source.dataset.manifest
    return build_report(
        source, manifest.deployments, manifest.window.window(), title="t", source_name="d"
    )


def _tree(top: Path) -> dict[str, bytes | str]:
    """Every file (bytes) and link (its target) under ``top``, never followed."""
    found: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder) / name
            key = str(path.relative_to(top))
            if path.is_symlink():
                found[key] = f"-> {os.readlink(path)}"
            elif path.is_file():
                found[key] = path.read_bytes()
    return found


def test_a_linked_figures_directory_is_replaced_and_what_it_points_at_kept(
    tmp_path: Path, report: Report
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "holiday.png").write_bytes(b"the user's")
    out = tmp_path / "out"
    out.mkdir()
    (out / "figures").symlink_to(elsewhere)
    (out / "report.md").symlink_to(elsewhere / "holiday.png")
    for formats in (["json"], ["md"], ["json"]):
        written = write_report(report, out, formats)
        assert _tree(elsewhere) == {"holiday.png": b"the user's"}
    figures = [p for k, p in written.items() if k.startswith("figure:")]
    assert figures == []  # the last report, json only, drew none
    write_report(report, out, ["md"])
    assert not (out / "figures").is_symlink()
    assert not (out / "report.md").is_symlink()
    assert len(list((out / "figures").glob("*.png"))) == 5  # R1's five figures
    assert _tree(elsewhere) == {"holiday.png": b"the user's"}


def test_a_file_of_the_users_beside_the_report_stays(tmp_path: Path, report: Report) -> None:
    out = tmp_path / "out"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "mine.png").write_bytes(b"the user's")
    (out / "notes.md").write_text("the user's")
    write_report(report, out, ["md", "html"])
    assert len(list((out / "figures").glob("*.png"))) == 6  # R1's five and the user's
    write_report(report, out, ["json"])  # removes the previous report's md, html and figures
    assert sorted(_tree(out)) == [
        MANIFEST,
        "figures/mine.png",
        "notes.md",
        "replicas.csv",
        "report.json",
    ]
    assert (out / "figures" / "mine.png").read_bytes() == b"the user's"


# A report run killed (SIGKILL) at its first os.replace, when its files are staged.
_KILLED_RUN = """
import os, signal, sys
from inference_obs.cli import main
os.replace = lambda *args, **kwargs: os.kill(os.getpid(), signal.SIGKILL)
main(["report", "--dataset", sys.argv[1], "--out", sys.argv[2], "--quiet", "--format", "md"])
"""


def test_a_killed_runs_staging_directory_is_removed_by_the_next_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = ["report", "--dataset", str(DATASET), "--out", str(out), "--quiet"]
    assert main([*argv, "--format", "md"]) == EXIT_OK
    before = _tree(out)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_RUN, str(DATASET), str(out)], cwd=ROOT, check=False
    )
    assert killed.returncode == -signal.SIGKILL
    (staging,) = (p for p in tmp_path.iterdir() if p.name.startswith(".out.partial-"))
    assert (staging / "report.md").is_file()  # staged whole, never moved
    assert _tree(out) == before
    assert main([*argv, "--format", "md"]) == EXIT_OK
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_dashboards_export_replaces_a_link_and_keeps_its_target(tmp_path: Path) -> None:
    elsewhere = tmp_path / "board.json"
    elsewhere.write_text("the user's")
    out = tmp_path / "grafana"
    out.mkdir()
    (out / "vllm.json").symlink_to(elsewhere)
    assert main(["dashboards", "export", "--out", str(out)]) == EXIT_OK
    assert elsewhere.read_text() == "the user's"
    assert not (out / "vllm.json").is_symlink()
    assert (out / "vllm.json").read_text() == dashboard_files()["vllm.json"]


def test_dashboards_export_on_a_full_disk_keeps_each_previous_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = dashboard_files()
    out = tmp_path / "grafana"
    out.mkdir()
    for name in files:
        (out / name).write_text("previous")
    # The disk fills while sglang.json is written (dcgm.json, first in order, fits):
    # simulated at os.write, the boundary every file is written through, which fails
    # with ENOSPC past the room left, as a full file system does.
    room = [len(files["dcgm.json"].encode()) + 100]
    real_write = os.write

    def full_disk(fd: int, data: bytes) -> int:
        if room[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        done = real_write(fd, bytes(data)[: room[0]])
        room[0] -= done
        return done

    monkeypatch.setattr(os, "write", full_disk)
    refused(["dashboards", "export", "--out", str(out)], capsys, "No space left on device")
    assert {p.name: p.read_text() for p in out.iterdir()} == {
        "dcgm.json": files["dcgm.json"],
        "sglang.json": "previous",
        "vllm.json": "previous",
    }


def test_dashboards_export_to_an_unwritable_directory_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = "/proc/inference-obs-dashboards"  # a file system nobody writes, root included
    refused(["dashboards", "export", "--out", out], capsys, f"--out {out}")


def test_queries_export_replaces_a_linked_folder_and_keeps_what_it_points_at(
    tmp_path: Path,
) -> None:
    # The folder is generated: a .promql file the catalogue lacks is removed from it,
    # but never from a folder a link there points at.
    elsewhere = tmp_path / "mine"
    elsewhere.mkdir()
    (elsewhere / "slo.promql").write_text("the user's")
    out = tmp_path / "queries"
    out.mkdir()
    (out / "promql").symlink_to(elsewhere)
    assert main(["queries", "export", "--out", str(out)]) == EXIT_OK
    assert [p.name for p in elsewhere.iterdir()] == ["slo.promql"]
    assert (elsewhere / "slo.promql").read_text() == "the user's"
    assert not (out / "promql").is_symlink()
    assert main(["queries", "export", "--out", str(out), "--check"]) == EXIT_OK
