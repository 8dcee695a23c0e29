"""What the runners share: timing, the fleet dataset they read, and Prometheus over a backfill.

Sides compared in one process are timed by :func:`interleave`: every side is
warmed the same way (the same number of untimed calls, in rotating order)
before any is timed, then each round calls every side once, each round
starting one side later than the last (:func:`rotation`), so that no side is
timed before another has run in the process (its allocations, imports and
caches of code, not of answers, are there for all) and drift of the
machine's load falls on every side alike. Each side reports its median, the
spread of its runs, its CPU time (:func:`cpu_seconds`, which other work
on a shared machine inflates far less than wall time) and, for a pair, the
ratio of each round's two times.
:func:`mode_line` says how a runner timed and the machine's load; every
runner prints one.

Every runner reads the generated fleet (:mod:`benchmarks.fleet`): an existing
dataset directory given with ``--dataset``, or one generated for the run
from ``--replicas``, ``--gpus-per-replica``, ``--hours`` and ``--interval``.
:class:`BackfilledPrometheus` is the Prometheus 2.42 of the integration
tests, started on blocks that promtool wrote from a file (the dataset's own
``samples.om``, which promtool backfills as is), so the text never has to be
in memory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from benchmarks.fleet import FleetShape
from tests.integration import servers

__all__ = [
    "BackfilledPrometheus",
    "Interleaved",
    "Timed",
    "add_fleet_arguments",
    "backfill",
    "cpu_seconds",
    "fleet_dataset",
    "interleave",
    "load_average",
    "median_seconds",
    "mode_line",
    "patient_http",
    "rotation",
    "shape_of",
    "timed_table",
    "warm_up",
]

# promtool backfills about 300k samples/s here: the full fleet takes minutes.
PROMTOOL_TIMEOUT_S = 3600.0


def warm_up(run: Callable[[], object], seconds: float) -> None:
    """Call ``run`` at least twice and for at least ``seconds``."""
    started = time.perf_counter()
    for _ in range(2):
        run()
    while time.perf_counter() - started < seconds:
        run()


def median_seconds(run: Callable[[], object], repeats: int, warmup: float = 0.0) -> float:
    """Median wall time of ``repeats`` calls of ``run``, after ``warmup`` s of warm-up calls.

    One side alone: to compare sides, :func:`interleave` them.
    """
    if warmup > 0:
        warm_up(run, warmup)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def rotation(sides: Sequence[str], rounds: int, runs: Mapping[str, int] | None = None) -> list[str]:
    """The order in which ``rounds`` rounds call ``sides``: each round starts one side later.

    ``runs`` gives a side fewer runs than ``rounds`` (a slow peer): it takes
    part in the first rounds only, in its place in the rotation.

    Examples
    --------
    >>> rotation(["a", "b", "c"], 4)
    ['a', 'b', 'c', 'b', 'c', 'a', 'c', 'a', 'b', 'a', 'b', 'c']
    >>> rotation(["a", "b"], 3, runs={"b": 1})
    ['a', 'b', 'a', 'a']
    """
    order: list[str] = []
    for k in range(rounds):
        shift = k % len(sides) if sides else 0
        turned = [*sides[shift:], *sides[:shift]]
        order += [s for s in turned if runs is None or k < runs.get(s, rounds)]
    return order


@dataclass(frozen=True)
class Timed:
    """One side's times in seconds, in the order they were taken: wall and CPU.

    CPU time is this process's and its children's (a side that runs a
    command counts the command's).
    """

    side: str
    seconds: tuple[float, ...]
    cpu_seconds: tuple[float, ...]

    @property
    def median(self) -> float:
        """The median run's wall time, seconds."""
        return statistics.median(self.seconds)

    @property
    def cpu_median(self) -> float:
        """The median run's CPU time (:func:`cpu_seconds`), seconds."""
        return statistics.median(self.cpu_seconds)

    @property
    def spread(self) -> tuple[float, float]:
        """The fastest and the slowest run's wall time, seconds."""
        return min(self.seconds), max(self.seconds)


Clock = Literal["wall", "cpu"]


@dataclass(frozen=True)
class Interleaved:
    """What :func:`interleave` measured, and the order it called the sides in."""

    sides: dict[str, Timed]
    schedule: tuple[tuple[str, bool], ...]
    """Every call in order: (side, timed); the untimed calls are the warm-up."""
    warmup_rounds: int
    rounds: int

    def ratios(self, slow: str, fast: str, clock: Clock = "wall") -> list[float]:
        """``slow``'s time over ``fast``'s in each round both ran (same round, same load).

        ``cpu``: CPU time, which other work on a shared machine inflates far
        less than wall time (a waiting process uses none).
        """
        one, other = self.sides[slow], self.sides[fast]
        if clock == "wall":
            pairs = zip(one.seconds, other.seconds, strict=False)
        else:
            pairs = zip(one.cpu_seconds, other.cpu_seconds, strict=False)
        return [s / f for s, f in pairs if f > 0]

    def ratio(self, slow: str, fast: str, clock: Clock = "wall") -> str:
        """``slow`` / ``fast``: the median of the rounds' ratios and their spread, as text."""
        found = self.ratios(slow, fast, clock)
        if not found:
            return "n/a (no time measured)"
        return f"{statistics.median(found):.1f}x ({min(found):.1f}-{max(found):.1f}x)"

    def mode(self) -> str:
        """How the sides were timed, for the runner's ``mode:`` line."""
        return (
            f"{len(self.sides)} sides interleaved in one process, each round in rotating order; "
            f"each side warmed by {self.warmup_rounds} untimed call(s) in the same rotation "
            f"before any was timed; {self.rounds} timed round(s); medians with the spread "
            "(fastest-slowest)"
        )


def interleave(
    sides: Mapping[str, Callable[[], object]],
    rounds: int,
    warmup_rounds: int = 1,
    runs: Mapping[str, int] | None = None,
) -> Interleaved:
    """Time ``sides`` in one process, in rotating order, all warmed alike first.

    Parameters
    ----------
    sides
        Name -> a call that does the work a user pays for once (no answer
        kept from an earlier call may serve it: each side builds what it
        needs anew).
    rounds
        Timed rounds; each calls every side once (see ``runs``).
    warmup_rounds
        Untimed rounds first, in the same rotating order: every side runs
        before any side is timed.
    runs
        Fewer timed runs for some sides (a slow peer); they take part in the
        first rounds.
    """
    names = list(sides)
    schedule: list[tuple[str, bool]] = []
    for name in rotation(names, warmup_rounds):
        sides[name]()
        schedule.append((name, False))
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for name in rotation(names, rounds, runs):
        started, started_cpu = time.perf_counter(), cpu_seconds()
        sides[name]()
        times[name].append(time.perf_counter() - started)
        cpu[name].append(cpu_seconds() - started_cpu)
        schedule.append((name, True))
    return Interleaved(
        {
            name: Timed(name, tuple(found), tuple(cpu[name]))
            for name, found in times.items()
            if found
        },
        tuple(schedule),
        warmup_rounds,
        rounds,
    )


def timed_table(
    found: Interleaved,
    labels: Mapping[str, str],
    unit: Literal["s", "ms"],
    notes: Mapping[str, str] | None = None,
) -> str:
    """A row per side in ``labels`` (name -> label): median, spread, CPU median, runs, a note."""
    scale, digits = (1.0, 3) if unit == "s" else (1e3, 2)
    width = max(len(label) for label in labels.values())
    lines = [
        f"{'':{width}} {'median ' + unit:>10} {'spread ' + unit:>19} {'CPU ' + unit:>10} "
        f"{'runs':>5}"
    ]
    for name, label in labels.items():
        timed = found.sides[name]
        low, high = timed.spread
        spread = f"{low * scale:.{digits}f}-{high * scale:.{digits}f}"
        lines.append(
            f"{label:{width}} {timed.median * scale:10.{digits}f} {spread:>19} "
            f"{timed.cpu_median * scale:10.{digits}f} {len(timed.seconds):5}  "
            f"{(notes or {}).get(name, '')}".rstrip()
        )
    return "\n".join(lines)


def cpu_seconds() -> float:
    """CPU time of this process (all threads) and of the children it has waited for, seconds."""
    done = os.times()
    return time.process_time() + done.children_user + done.children_system


def load_average() -> str:
    """The machine's CPUs and load averages (1, 5, 15 min), for a ``mode:`` line."""
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {one:.2f} {five:.2f} {fifteen:.2f}"


def mode_line(how: str) -> str:
    """``mode: how; the machine's load`` (the machine may be shared: the load says how much)."""
    return f"mode: {how}; {load_average()} (1, 5, 15 min)"


def add_fleet_arguments(parser: argparse.ArgumentParser, shape: FleetShape) -> None:
    """``--dataset`` or the fleet's size (defaults from ``shape``)."""
    parser.add_argument("--dataset", type=Path, help="an existing fleet dataset (else generated)")
    parser.add_argument("--replicas", type=int, default=shape.replicas)
    parser.add_argument("--gpus-per-replica", type=int, default=shape.gpus_per_replica)
    parser.add_argument("--hours", type=float, default=shape.hours)
    parser.add_argument("--interval", type=float, default=shape.interval_s, help="scrape, s")


def shape_of(args: argparse.Namespace) -> FleetShape:
    """The fleet shape the arguments ask for."""
    return FleetShape(args.replicas, args.gpus_per_replica, args.hours, args.interval)


@contextlib.contextmanager
def fleet_dataset(args: argparse.Namespace) -> Iterator[Path]:
    """The dataset directory to read: ``--dataset``, or a fleet generated for this run."""
    if args.dataset is not None:
        yield Path(args.dataset)
        return
    with tempfile.TemporaryDirectory(prefix="fleet-") as tmp:
        path = Path(tmp) / "fleet"
        # In a child process: generating peaks at about 2 GB, and a process this
        # runner forks inherits its peak in ru_maxrss, which would then
        # overstate every measured report's memory.
        argv = [sys.executable, "-m", "benchmarks.fleet", "--out", str(path)]
        argv += ["--replicas", str(args.replicas), "--gpus-per-replica", str(args.gpus_per_replica)]
        argv += ["--hours", str(args.hours), "--interval", str(args.interval)]
        subprocess.run(argv, check=True)
        yield path


@contextlib.contextmanager
def patient_http(seconds: float = 600.0) -> Iterator[None]:
    """Let the test harness's HTTP calls wait ``seconds`` (its default, 10 s, is for tiny data)."""
    before = servers.HTTP_TIMEOUT_S
    servers.HTTP_TIMEOUT_S = seconds
    try:
        yield
    finally:
        servers.HTTP_TIMEOUT_S = before


def backfill(promtool: str, samples: Path, out: Path) -> str:
    """promtool's backfill of the OpenMetrics file ``samples`` into the TSDB directory ``out``."""
    argv = [promtool, "tsdb", "create-blocks-from", "openmetrics", str(samples), str(out)]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=PROMTOOL_TIMEOUT_S, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool failed on {samples}:\n{(done.stdout + done.stderr)[-4000:]}")
    return done.stdout


class BackfilledPrometheus(servers._Server):
    """Prometheus 2.42 (as the integration tests run it) on promtool's backfill of a file.

    Parameters
    ----------
    workdir
        An empty directory for the TSDB, the config and the log.
    samples
        An OpenMetrics file ending ``# EOF`` (a dataset's ``samples.om``).
    """

    name = "prometheus"

    def __init__(self, workdir: Path, samples: Path) -> None:
        super().__init__(workdir)
        data = workdir / "data"
        data.mkdir(parents=True)
        started = time.perf_counter()
        backfill(servers.require_binary("promtool"), samples, data)
        self.backfill_seconds = time.perf_counter() - started
        """How long promtool took."""
        config = workdir / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n", encoding="utf-8")
        prometheus = servers.require_binary("prometheus")

        def argv(port: int) -> list[str]:
            return [
                prometheus,
                f"--config.file={config}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=100y",
                # Fleet-sized raw fetches are the point of some runners.
                "--query.max-samples=500000000",
            ]

        self._start(argv, "/-/ready")

    def get(self, path: str, fields: dict[str, str]) -> Any:
        """The ``data`` of a GET answer (series, labels)."""
        return self._api(path, fields, path, method="GET")
