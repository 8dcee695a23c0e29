"""What the runners share: timing, the fleet dataset they read, and Prometheus over a backfill.

Timings are medians of repeated runs in one process (:func:`median_seconds`).
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
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.fleet import FleetShape
from tests.integration import servers

__all__ = [
    "BackfilledPrometheus",
    "add_fleet_arguments",
    "backfill",
    "fleet_dataset",
    "median_seconds",
    "patient_http",
    "shape_of",
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
    """Median wall time of ``repeats`` calls of ``run``, after ``warmup`` s of warm-up calls."""
    if warmup > 0:
        warm_up(run, warmup)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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
