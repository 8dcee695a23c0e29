"""Figures drawn by a forked copy of the process while the text formats are written: the same
files as drawn in one process, whatever the copy does, and no copy left behind."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import inference_obs as obs
from inference_obs.report import Report, write as write_module, write_report
from inference_obs.report.figure_plan import FIGURES, figure_name, nothing_to_draw
from inference_obs.report.figures import draw_figure
from inference_obs.report.write import figure_png
from inference_obs.source.dataset.source import DatasetSource

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def report() -> Report:
    return obs.report(DatasetSource(DATASET))


@pytest.fixture(scope="module")
def drawn_here(report: Report) -> dict[str, bytes]:
    """Every figure drawn in this process, one after the other, as PNG bytes by file name."""
    return {
        f"{figure_name(run, figure)}.png": figure_png(draw_figure(run, figure))
        for run in report.deployments
        for figure in FIGURES
        if nothing_to_draw(run, figure) is None
    }


def _figures(out: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((out / "figures").iterdir())}


def _counting_forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record each fork this process makes (the child's own forks are not recorded here)."""
    forks: list[int] = []
    real = os.fork

    def fork() -> int:
        pid = real()
        if pid:
            forks.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", fork)
    return forks


def _no_child_left() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_a_forked_copy_draws_some_figures_and_the_files_are_the_same(
    report: Report, drawn_here: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert threading.active_count() == 1  # as the command line runs: a copy may be forked
    forks = _counting_forks(monkeypatch)
    parent = os.getpid()
    in_parent: list[str] = []
    real_draw: Callable[..., object] = write_module.draw_figure

    def draw(run: object, figure: str) -> object:
        if os.getpid() == parent:
            in_parent.append(figure)
        return real_draw(run, figure)

    monkeypatch.setattr(write_module, "draw_figure", draw)
    write_report(report, tmp_path / "out")
    assert len(forks) == 1
    assert _figures(tmp_path / "out") == drawn_here
    # Both processes drew: this one fewer than all of them (6 figures for this dataset).
    assert 0 < len(in_parent) < len(drawn_here) == 6
    assert _no_child_left()


def test_figures_a_failing_copy_does_not_send_are_drawn_here(
    report: Report, drawn_here: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forks = _counting_forks(monkeypatch)
    parent = os.getpid()
    real_draw: Callable[..., object] = write_module.draw_figure

    def draw(run: object, figure: str) -> object:
        if os.getpid() != parent:
            raise RuntimeError("the copy fails")
        return real_draw(run, figure)

    monkeypatch.setattr(write_module, "draw_figure", draw)
    write_report(report, tmp_path / "out")
    assert len(forks) == 1
    assert _figures(tmp_path / "out") == drawn_here
    assert _no_child_left()


def test_a_failure_here_ends_the_copy_and_writes_nothing(
    report: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forks = _counting_forks(monkeypatch)

    def broken(_: Report) -> str:
        raise RuntimeError("the JSON cannot be written")

    monkeypatch.setattr(write_module, "to_json", broken)
    with pytest.raises(RuntimeError, match="cannot be written"):
        write_report(report, tmp_path / "out")
    assert len(forks) == 1
    assert _no_child_left()
    assert not (tmp_path / "out").exists()


def test_with_other_threads_running_every_figure_is_drawn_here(
    report: Report, drawn_here: dict[str, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fork copies only the calling thread; a lock another thread holds would stay held in
    # the copy, so with other threads (a live report's) nothing is forked.
    forks = _counting_forks(monkeypatch)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        write_report(report, tmp_path / "out")
    finally:
        stop.set()
        other.join()
    assert forks == []
    assert _figures(tmp_path / "out") == drawn_here
