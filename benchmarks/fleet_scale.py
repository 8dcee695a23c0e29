"""Time and peak memory of a report against the fleet's size, offline and through VictoriaMetrics.

Data: the generated fleet (:mod:`benchmarks.fleet`) at each of ``--sizes``
replicas (8 GPUs each; 1 h at 15 s by default), generated in a child process
into ``--fleets DIR`` (kept there and reused by later runs) or a temporary
directory; generation is not timed. At each size the runner times what a
user pays, each run a fresh ``inference-obs report ... --quiet`` process
(all formats and figures), from its start to its exit, with the kernel's
peak resident memory of that process (``ru_maxrss`` from ``wait4``):

- ``cold``: ``--dataset`` with an empty sample cache (``XDG_CACHE_HOME`` a
  new directory), so ``samples.om`` is hashed and parsed; the file system's
  page cache is whatever the machine holds (not dropped);
- ``warm``: ``--dataset`` with the sample cache filled beforehand (untimed,
  in a child process), as every later report on the same files is (a
  ``samples.om`` under 64 MiB is never cached: there warm is cold);
- ``live``: ``--prometheus`` a single-node VictoriaMetrics on 127.0.0.1
  holding that fleet alone (``inference-obs dataset load`` into a fresh
  store, timed apart and printed), with ``--deployments manifest.json`` and
  the dataset's window; peak memory is the client's, and the requests are
  the store's own count (``vm_http_requests_total`` of its query and
  discovery paths) before and after the run.

The modes of a size run in rounds, each round in an order rotated by one,
so a slow stretch of the shared machine falls on every mode alike. The runner
prints, per size and mode, the median wall time (and the spread), the median
peak RSS, the requests and the report body's lines (report.md before its
appendix); then, per mode, the straight line through the medians (intercept
plus a slope per replica) for time and memory, and the machine's load.

Goals (on the 2-core development machine): the report body's length flat in
the fleet's size; the live client's memory flat in replicas; the offline
report of 128 replicas x 1 h under 30 s and 2 GiB.

Run from the repository root (needs Debian's ``victoria-metrics`` for ``live``)::

    python -m benchmarks.fleet_scale [--sizes 8,32,128] [--hours 1] [--interval 15]
        [--repeats 3] [--largest-repeats 2] [--modes cold,warm,live] [--fleets DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchmarks.common import patient_http
from benchmarks.fleet import FleetShape
from inference_obs.source.dataset.reader import MANIFEST, SAMPLES, read_manifest
from tests.integration.servers import VictoriaMetricsServer, require_binary

MODES = ("cold", "warm", "live")
_MIB = 1 << 20
_APPENDIX = "## Appendix"
# Exit statuses of a written report: 3 a deployment without series, 5 an invalid comparison.
_WRITTEN = (0, 3, 5)
# The store's query and discovery endpoints: every request a live report sends.
_COUNTED = re.compile(r'^vm_http_requests_total\{path="(/api/v1/[a-z_/]+)"\} (\d+)$', re.M)
_COUNTED_PATHS = ("query", "query_range", "series", "labels", "label/", "status/buildinfo")


@dataclass(frozen=True, slots=True)
class Run:
    """One report process: wall seconds, peak resident bytes, requests (live only), body lines."""

    seconds: float
    peak_bytes: int
    requests: int | None
    body_lines: int


@dataclass(slots=True)
class Size:
    """What was measured at one fleet size."""

    replicas: int
    gpus: int
    samples_bytes: int
    load_seconds: float | None = None
    runs: dict[str, list[Run]] = field(default_factory=dict)


def _python(args: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, int, int]:
    """Wall seconds, peak RSS bytes and exit status of ``python -m ARGS`` in a fresh process."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", *args], env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    return seconds, usage.ru_maxrss * 1024, process.returncode  # Linux reports KiB


def body_lines(report_md: Path) -> int:
    """Lines of report.md before its appendix (all of it when it has none)."""
    lines = report_md.read_text(encoding="utf-8").splitlines()
    return next((k for k, line in enumerate(lines) if line.startswith(_APPENDIX)), len(lines))


def fleet_path(fleets: Path, shape: FleetShape) -> Path:
    """The fleet of ``shape`` under ``fleets``, generated in a child process unless already there.

    In a child process: generating peaks at gigabytes, and a process this
    runner forks would inherit that peak in ``ru_maxrss``.
    """
    path = (
        fleets
        / f"fleet-{shape.replicas}x{shape.gpus_per_replica}-{shape.hours:g}h-{shape.interval_s:g}s"
    )
    if (path / MANIFEST).is_file():
        return path
    argv = [sys.executable, "-m", "benchmarks.fleet", "--out", str(path)]
    argv += ["--replicas", str(shape.replicas), "--gpus-per-replica", str(shape.gpus_per_replica)]
    argv += ["--hours", str(shape.hours), "--interval", str(shape.interval_s)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return path


def requests_served(base_url: str) -> int:
    """The store's count of query and discovery requests served so far."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=30) as answer:
        text = answer.read().decode("utf-8")
    return sum(
        int(count)
        for path, count in _COUNTED.findall(text)
        if path.removeprefix("/api/v1/").startswith(_COUNTED_PATHS)
    )


class Measurer:
    """Runs the report of one fleet in each mode; ``live`` needs :meth:`load` first."""

    def __init__(self, dataset: Path, tmp: Path) -> None:
        self.dataset = dataset
        self.tmp = tmp
        self.warm_cache = tmp / "cache-warm"
        self.store: VictoriaMetricsServer | None = None
        self._count = 0
        window = read_manifest(dataset).window
        self._window = ["--start", window.start.isoformat(), "--end", window.end.isoformat()]

    def fill_cache(self) -> None:
        """Fill the warm runs' sample cache (untimed, in a child process)."""
        code = "from inference_obs.source.dataset.reader import read_dataset; import sys; "
        code += "read_dataset(sys.argv[1])"
        env = {**os.environ, "XDG_CACHE_HOME": str(self.warm_cache)}
        subprocess.run([sys.executable, "-c", code, str(self.dataset)], env=env, check=True)

    def load(self, store: VictoriaMetricsServer) -> float:
        """``inference-obs dataset load`` of the fleet into ``store``: wall seconds."""
        self.store = store
        argv = ["inference_obs.cli", "dataset", "load", str(self.dataset), "--into", store.base_url]
        seconds, _, code = _python(argv)
        if code != 0:
            raise RuntimeError(f"inference-obs dataset load exited with {code}")
        store.flush()
        return seconds

    def run(self, mode: str) -> Run:
        """One report process in ``mode``."""
        self._count += 1
        out = self.tmp / f"report-{mode}-{self._count}"
        argv = ["inference_obs.cli", "report", "--out", str(out), "--quiet"]
        cache = self.warm_cache if mode == "warm" else self.tmp / f"cache-{self._count}"
        env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
        before = None
        if mode == "live":
            if self.store is None:
                raise RuntimeError("live needs a store: call load() first")
            argv += ["--prometheus", self.store.base_url]
            argv += ["--deployments", str(self.dataset / MANIFEST), *self._window]
            before = requests_served(self.store.base_url)
        else:
            argv += ["--dataset", str(self.dataset)]
        seconds, peak, code = _python(argv, env)
        if code not in _WRITTEN:
            raise RuntimeError(f"inference-obs report ({mode}) exited with {code}")
        requests = None
        if self.store is not None and before is not None:
            requests = requests_served(self.store.base_url) - before
        return Run(seconds, peak, requests, body_lines(out / "report.md"))


def rounds(modes: Sequence[str], repeats: int) -> Iterator[str]:
    """``repeats`` rounds of ``modes``, each round's order rotated by one from the last."""
    for k in range(repeats):
        shift = k % len(modes)
        yield from (*modes[shift:], *modes[:shift])


@contextlib.contextmanager
def _store(workdir: Path, wanted: bool) -> Iterator[VictoriaMetricsServer | None]:
    if not wanted:
        yield None
        return
    with patient_http(), VictoriaMetricsServer(workdir) as store:
        yield store


def measure(shape: FleetShape, fleets: Path, modes: Sequence[str], repeats: int) -> Size:
    """Every mode's runs at one fleet size (the store, if any, holds this fleet alone)."""
    dataset = fleet_path(fleets, shape)
    size = Size(
        shape.replicas, shape.replicas * shape.gpus_per_replica, (dataset / SAMPLES).stat().st_size
    )
    with tempfile.TemporaryDirectory(prefix="fleet-scale-") as tmp_dir:
        tmp = Path(tmp_dir)
        measurer = Measurer(dataset, tmp)
        if "warm" in modes:
            measurer.fill_cache()
        with _store(tmp / "vm", "live" in modes) as store:
            if store is not None:
                size.load_seconds = measurer.load(store)
            for mode in rounds(modes, repeats):
                size.runs.setdefault(mode, []).append(measurer.run(mode))
    return size


def _fit(replicas: Sequence[int], values: Sequence[float]) -> str:
    if len(set(replicas)) < 2:
        return "(one size: no fit)"
    slope, intercept = np.polyfit(np.asarray(replicas, float), np.asarray(values, float), 1)
    return f"{intercept:.2f} + {slope:.4f} x replicas"


def summary(sizes: Sequence[Size], modes: Sequence[str]) -> str:
    """The table of medians and the fits, as printed."""
    lines = [
        f"{'replicas':>8} {'GPUs':>5} {'mode':>5} {'median s':>9} {'spread s':>13} {'runs':>4} "
        f"{'peak RSS MiB':>12} {'requests':>8} {'body lines':>10}"
    ]
    for size in sizes:
        for mode in modes:
            runs = size.runs.get(mode, [])
            if not runs:
                continue
            seconds = [r.seconds for r in runs]
            requests = {r.requests for r in runs}
            shown = (
                "/".join(str(n) for n in sorted(requests, key=str)) if None not in requests else "-"
            )
            body = "/".join(str(n) for n in sorted({r.body_lines for r in runs}))
            lines.append(
                f"{size.replicas:8} {size.gpus:5} {mode:>5} "
                f"{statistics.median(seconds):9.1f} {f'{min(seconds):.1f}-{max(seconds):.1f}':>13} "
                f"{len(runs):4} {statistics.median(r.peak_bytes for r in runs) / _MIB:12.0f} "
                f"{shown:>8} {body:>10}"
            )
    lines.append("")
    for mode in modes:
        measured = [s for s in sizes if s.runs.get(mode)]
        replicas = [s.replicas for s in measured]
        seconds = [statistics.median(r.seconds for r in s.runs[mode]) for s in measured]
        peaks = [statistics.median(r.peak_bytes for r in s.runs[mode]) / _MIB for s in measured]
        lines.append(
            f"{mode}: wall s = {_fit(replicas, seconds)}; peak MiB = {_fit(replicas, peaks)}"
        )
    return "\n".join(lines)


def goals(sizes: Sequence[Size]) -> str:
    """The goals' measured status."""
    bodies = {r.body_lines for s in sizes for runs in s.runs.values() for r in runs}
    lines = [f"report body lines over every size and mode: {sorted(bodies)} (goal: flat)"]
    live = [
        (s.replicas, statistics.median(r.peak_bytes for r in s.runs["live"]))
        for s in sizes
        if s.runs.get("live")
    ]
    if live:
        shown = ", ".join(f"{n}: {peak / _MIB:.0f}" for n, peak in live)
        lines.append(f"live client peak MiB by replicas: {shown} (goal: flat)")
    for size in sizes:
        offline = [r for mode in ("cold", "warm") for r in size.runs.get(mode, [])]
        if size.replicas == 128 and offline:
            slowest = max(r.seconds for r in offline)
            largest = max(r.peak_bytes for r in offline) / (1 << 30)
            lines.append(
                f"offline at 128 replicas: slowest {slowest:.1f} s (goal < 30 s), "
                f"largest peak {largest:.2f} GiB (goal < 2 GiB)"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="8,32,128", help="replicas, comma-separated")
    parser.add_argument("--gpus-per-replica", type=int, default=8)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--interval", type=float, default=15.0, help="scrape, s")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each mode")
    parser.add_argument("--largest-repeats", type=int, default=2, help="runs at the largest size")
    parser.add_argument("--modes", default=",".join(MODES), help="of cold,warm,live")
    parser.add_argument("--fleets", type=Path, help="where fleets are generated and kept")
    args = parser.parse_args(argv)
    sizes = sorted(int(n) for n in args.sizes.split(","))
    modes = [m for m in args.modes.split(",") if m]
    if unknown := set(modes) - set(MODES):
        parser.error(f"unknown modes: {sorted(unknown)}")
    if "live" in modes:
        require_binary("victoria-metrics")
    measured = []
    with contextlib.ExitStack() as stack:
        fleets = args.fleets or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        fleets.mkdir(parents=True, exist_ok=True)
        for replicas in sizes:
            shape = FleetShape(replicas, args.gpus_per_replica, args.hours, args.interval)
            repeats = (
                args.largest_repeats if replicas == sizes[-1] and len(sizes) > 1 else args.repeats
            )
            size = measure(shape, fleets, modes, repeats)
            load = (
                f", loaded into VictoriaMetrics in {size.load_seconds:.1f} s"
                if size.load_seconds
                else ""
            )
            print(
                f"{replicas} replicas: {size.samples_bytes / 1e9:.2f} GB of OpenMetrics{load}",
                flush=True,
            )
            measured.append(size)
    print(f"\n{summary(measured, modes)}\n\n{goals(measured)}")
    print(
        f"\nmode: each run a fresh process, modes interleaved in rotating rounds; "
        f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
