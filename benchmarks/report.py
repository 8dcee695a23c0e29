"""The whole offline report on a fleet: wall time and peak memory, against promtool's backfill.

Data: the generated fleet (:mod:`benchmarks.fleet`), by default the full
one: 32 replicas x 8 GPUs over 6 h at 15 s (about 17,500 series, 25 million
samples, 6.4 GB of OpenMetrics text); pass ``--dataset`` to reuse one.
Each run is a fresh process, ``inference-obs report --dataset DIR --out
TMP --quiet`` (all formats and figures), timed from start to exit; its peak
resident memory is the kernel's ``ru_maxrss`` of that process (``wait4``).

- cold: an empty sample cache (``XDG_CACHE_HOME`` pointed at a new
  directory), so the text is parsed; this run fills the cache;
- warm: the cache filled, as every later report on the same files is (a
  file is hashed again only if the file system shows it changed);
- the peer, once: promtool's backfill of the same ``samples.om``, the step a
  Prometheus-based report would need before its first query.

Goals: under 60 s and under 4 GiB of peak memory on the 2-core machine.

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.report [--repeats 3] [--cold-repeats 1] [--no-peer]
        [--dataset DIR | --replicas 32 --gpus-per-replica 8 --hours 6 --interval 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import add_fleet_arguments, backfill, fleet_dataset
from benchmarks.fleet import FleetShape
from inference_obs.source.dataset.reader import SAMPLES
from tests.integration.servers import require_binary

_GIB = 1 << 30


def run_report(dataset: Path, out: Path, cache: Path) -> tuple[float, int]:
    """Wall seconds and peak resident bytes of one ``inference-obs report`` process."""
    argv = [sys.executable, "-m", "inference_obs.cli", "report", "--dataset", str(dataset)]
    argv += ["--out", str(out), "--quiet"]
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, 5):  # 5: an invalid comparison is a finding
        raise RuntimeError(f"inference-obs report exited with {process.returncode}")
    return seconds, usage.ru_maxrss * 1024  # Linux reports KiB


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="warm runs")
    parser.add_argument("--cold-repeats", type=int, default=1, help="runs on an empty cache")
    parser.add_argument("--no-peer", action="store_true", help="skip promtool's backfill")
    add_fleet_arguments(parser, FleetShape())
    args = parser.parse_args(argv)
    with fleet_dataset(args) as path, tempfile.TemporaryDirectory(prefix="report-") as tmp_dir:
        tmp = Path(tmp_dir)
        size = (path / SAMPLES).stat().st_size
        print(f"dataset: {path} ({size / 1e9:.2f} GB of OpenMetrics)")
        cold = [
            run_report(path, tmp / f"cold-{k}", tmp / f"cache-{k}")
            for k in range(args.cold_repeats)
        ]
        warm = [run_report(path, tmp / f"warm-{k}", tmp / "cache-0") for k in range(args.repeats)]
        peer = None
        if not args.no_peer:
            started = time.perf_counter()
            backfill(require_binary("promtool"), path / SAMPLES, tmp / "tsdb")
            peer = time.perf_counter() - started
    print(f"\n{'':30} {'median s':>9} {'peak RSS':>10} {'runs':>5}")
    for label, runs in (
        ("report, empty cache (cold)", cold),
        ("report, cache filled (warm)", warm),
    ):
        seconds = statistics.median(s for s, _ in runs)
        rss = statistics.median(r for _, r in runs)
        print(f"{label:30} {seconds:9.1f} {rss / _GIB:8.2f} GiB {len(runs):5}")
    if peer is not None:
        print(f"{'promtool backfill (peer)':30} {peer:9.1f} {'':>10} {1:5}")
    worst_s = max(s for s, _ in cold + warm)
    worst_rss = max(r for _, r in cold + warm)
    print(
        f"\nslowest run {worst_s:.1f} s (goal < 60 s), largest peak RSS "
        f"{worst_rss / _GIB:.2f} GiB (goal < 4 GiB)"
    )
    if peer is not None:
        print(
            "promtool backfill / report: "
            f"cold {peer / statistics.median(s for s, _ in cold):.1f}x, "
            f"warm {peer / statistics.median(s for s, _ in warm):.1f}x"
        )


if __name__ == "__main__":
    main()
