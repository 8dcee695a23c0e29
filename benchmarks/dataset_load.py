"""Loading a fleet dataset, against promtool backfilling the same samples.om.

Data: the generated fleet (:mod:`benchmarks.fleet`), by default 8 replicas x
8 GPUs over 6 h at 15 s (about 4,400 series and 6.3 million samples, 1.6 GB
of OpenMetrics text); ``--replicas 32`` is the full fleet (25 million
samples, 6.4 GB). Timed end to end in the same process, interleaved
(:func:`benchmarks.common.interleave`: every side runs once untimed, then
each round runs every side in rotating order), as medians with their spread,
in wall and in CPU time:

- ``read_dataset`` without a cache: manifest, the SHA-256 of every file
  (a second thread reads and hashes the blocks ahead of the parser), parsing
  and checking every line block by block, building the SampleSet;
- ``read_dataset`` with its sample cache filled (a fresh cache directory,
  filled by a first load before any timing): the manifest checked, each
  file hashed again unless its stamp shows it unchanged since it was hashed
  (as for every later report on the same files), then the parsed columns
  read back from the cache;
- the peer: promtool's ``tsdb create-blocks-from openmetrics`` of the same
  file into a fresh directory, in the first ``--promtool-repeats`` rounds
  only (it takes minutes at full size); its CPU time is its process's.

Goal: a load at least 10x faster than the backfill.

Run from the repository root (needs Debian's ``prometheus`` package for promtool)::

    python -m benchmarks.dataset_load [--repeats 3] [--promtool-repeats 1]
        [--dataset DIR | --replicas 8 --gpus-per-replica 8 --hours 6 --interval 15]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.common import (
    add_fleet_arguments,
    backfill,
    fleet_dataset,
    interleave,
    mode_line,
    timed_table,
)
from benchmarks.fleet import FleetShape
from inference_obs.source.dataset.reader import SAMPLES, read_dataset
from inference_obs.source.dataset.samples_file import SampleCache
from tests.integration.servers import require_binary

_LABELS = {
    "parse": "read_dataset, no cache",
    "cached": "read_dataset, cache filled",
    "promtool": "promtool backfill (peer)",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds")
    parser.add_argument("--promtool-repeats", type=int, default=1, help="rounds with promtool")
    add_fleet_arguments(parser, FleetShape(replicas=8))
    args = parser.parse_args(argv)
    promtool = require_binary("promtool")
    with fleet_dataset(args) as path, tempfile.TemporaryDirectory(prefix="load-") as tmp_dir:
        tmp = Path(tmp_dir)
        samples = path / SAMPLES
        cache = SampleCache(tmp / "cache", min_bytes=0)
        first = read_dataset(path, cache=cache)  # fills the cache
        total = int(first.samples.offsets[-1])
        series = len(first.samples)
        del first
        print(f"data: {series:,} series, {total:,} samples, {samples.stat().st_size:,} bytes")

        def promtool_once() -> None:
            backfill(promtool, samples, Path(tempfile.mkdtemp(dir=tmp)))

        found = interleave(
            {
                "parse": lambda: read_dataset(path, cache=None),
                "cached": lambda: read_dataset(path, cache=cache),
                "promtool": promtool_once,
            },
            max(args.repeats, args.promtool_repeats),
            runs={"parse": args.repeats, "cached": args.repeats, "promtool": args.promtool_repeats},
        )
        cached = sum(f.stat().st_size for f in (tmp / "cache").iterdir())
    print(f"sample cache: {cached:,} bytes")
    timed = found.sides
    peer, peer_cpu = timed["promtool"].median, timed["promtool"].cpu_median
    notes = {
        name: f"{total / timed[name].median:,.0f} samples/s; promtool / it: "
        f"{peer / timed[name].median:.1f}x wall, {peer_cpu / timed[name].cpu_median:.1f}x CPU"
        for name in _LABELS
    }
    print("\n" + timed_table(found, _LABELS, "s", notes))
    print(
        f"\ngoal: promtool / read_dataset >= 10x (no cache {peer / timed['parse'].median:.1f}x "
        f"wall, {peer_cpu / timed['parse'].cpu_median:.1f}x CPU; cache "
        f"{peer / timed['cached'].median:.1f}x wall, {peer_cpu / timed['cached'].cpu_median:.1f}x "
        "CPU; CPU counts promtool's own process and read_dataset's hashing thread)"
    )
    print(mode_line(found.mode() + ", the slow peer in the first rounds only"))


if __name__ == "__main__":
    main()
