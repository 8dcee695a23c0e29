"""``--time-budget`` bounds the whole run: it ends by the budget plus MARGIN_S, exit 6,
``--out`` as it was.

Wall time is measured from the child's spawn, as a scheduler sees it. A run
cannot end before Python has started and imported the library
(:func:`~tests.source.fault_servers.startup_s`, measured here under the same
load): when that alone outlasts the budget, the run must end right after it.
The live run reads a fake (a real Prometheus cannot be made to answer each
request half a second late).
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_BUDGET
from inference_obs.cli.budget import MARGIN_S, OutOfTime, ends_by
from tests.source.fault_servers import (
    REPORT_WINDOW,
    CliRun,
    api_answer,
    run_cli,
    small_deployments,
    startup_s,
)
from tests.source.test_prometheus_fakes import Answer, FakeServer, Recorded, fake_server

PREVIOUS = "# the previous report\n"


@pytest.fixture(scope="module")
def startup(tmp_path_factory: pytest.TempPathFactory) -> float:
    return startup_s(tmp_path_factory.mktemp("startup"))


@pytest.fixture
def slow() -> Iterator[FakeServer]:
    """Every API request answered well, half a second late."""
    for server in fake_server():

        def late(request: Recorded) -> Answer:
            return dataclasses.replace(api_answer(request), delay_s=0.5)

        server.responder = late
        yield server


def previous_report(out: Path) -> None:
    out.mkdir()
    (out / "report.md").write_text(PREVIOUS)


def assert_ran_out(run: CliRun, budget_s: float, startup: float, out: Path) -> None:
    assert run.code == EXIT_BUDGET, run.stderr
    [line] = run.stderr.splitlines()
    assert line.startswith("inference-obs: ")
    assert "time budget" in line
    assert "Traceback" not in run.stderr
    assert run.elapsed_s <= max(budget_s, startup) + MARGIN_S, (run.elapsed_s, startup)
    # Nothing of this run is left: the previous report as it was, no staged files beside it.
    assert [p.name for p in out.iterdir()] == ["report.md"]
    assert (out / "report.md").read_text() == PREVIOUS
    assert [p.name for p in out.parent.iterdir() if ".partial" in p.name] == []


def test_an_offline_report_ends_within_its_budget(tmp_path: Path, startup: float) -> None:
    """1 s past what starting takes here: reading the bundled dataset, its analyses and
    figures take over 2 s more (about 4 s for the whole run on a quiet machine), so the
    budget runs out while they run, whichever part is running then.

    (A fixed budget of 4 s can be met on a quiet machine, and would then test nothing.)
    """
    out = tmp_path / "out"
    previous_report(out)
    budget = math.ceil(startup) + 1
    run = run_cli(["report", "--out", str(out), "--time-budget", str(budget), "--quiet"], tmp_path)
    assert_ran_out(run, budget, startup, out)


def test_a_live_report_from_a_slow_server_ends_within_its_budget(
    tmp_path: Path, startup: float, slow: FakeServer
) -> None:
    """Over a hundred requests, eight at a time, half a second each: over 6 s of asking.

    The budget is 2 s past what starting takes here, so that the run reads for 2 s
    and a run that began counting only after its start would be seen to end late.
    """
    out = tmp_path / "out"
    previous_report(out)
    budget = math.ceil(startup) + 2
    deployments = ["--deployments", str(small_deployments(tmp_path))]
    argv = ["report", "--prometheus", slow.url, *deployments, *REPORT_WINDOW]
    run = run_cli([*argv, "--out", str(out), "--time-budget", str(budget)], tmp_path)
    assert_ran_out(run, budget, startup, out)
    assert slow.requests  # it was reading when the budget ran out


# --- the alarm, in this process ---------------------------------------------------------


def busy(seconds: float) -> None:
    """Python work that checks no budget (a figure drawn, a long analysis)."""
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        sum(range(1000))


def test_the_deadline_ends_work_that_checks_no_budget() -> None:
    started = time.monotonic()
    with (
        pytest.raises(OutOfTime, match=r"time budget of 0\.3 s ran out"),
        ends_by(started + 0.3, 0.3),
    ):
        busy(10)
    assert time.monotonic() - started < 0.3 + 0.5  # not the 10 s of work


def test_cleanup_after_the_deadline_is_not_cut_short() -> None:
    """Rings after the deadline leave a ``finally`` that removes staged files alone."""
    cleaned = []

    def staged_then_removed() -> None:
        try:
            busy(10)
        finally:
            busy(0.5)  # five rings of the alarm come and go
            cleaned.append(True)

    with pytest.raises(OutOfTime), ends_by(time.monotonic() + 0.1, 0.1):
        staged_then_removed()
    assert cleaned == [True]


def test_after_commit_nothing_is_cut() -> None:
    with ends_by(time.monotonic() + 0.2, 0.2) as commit:
        commit()
        busy(0.5)  # moving the files into --out, past the deadline: never interrupted


def test_a_commit_past_the_deadline_raises_so_nothing_is_moved() -> None:
    """Off the main thread, where no alarm rings: commit's own check."""
    raised: list[OutOfTime] = []

    def write() -> None:
        try:
            with ends_by(time.monotonic() + 0.1, 0.1) as commit:
                time.sleep(0.2)
                commit()
        except OutOfTime as exc:
            raised.append(exc)

    thread = threading.Thread(target=write)
    thread.start()
    thread.join(timeout=5)
    assert len(raised) == 1
