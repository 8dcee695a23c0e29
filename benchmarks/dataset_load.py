"""Loading a fleet dataset, against promtool backfilling the same samples.om.

Data: the generated fleet (:mod:`benchmarks.fleet`), by default 8 replicas x
8 GPUs over 6 h at 15 s (about 4,400 series and 6.3 million samples, 1.6 GB
of OpenMetrics text); ``--replicas 32`` is the full fleet (25 million
samples, 6.4 GB). Timed end to end, as medians of ``--repeats`` runs in the
same process:

- ``read_dataset`` without a cache: manifest, the SHA-256 of every file
  (a second thread reads and hashes the blocks ahead of the parser), parsing
  and checking every line block by block, building the SampleSet;
- ``read_dataset`` with its sample cache filled (a fresh cache directory,
  filled by the first load): the same checks of the manifest and of every
  file's SHA-256, then the parsed columns read back from the cache;
- the peer: promtool's ``tsdb create-blocks-from openmetrics`` of the same
  file into a fresh directory (fewer repeats: it takes minutes at full size).

Goal: a load at least 10x faster than the backfill.

Run from the repository root (needs Debian's ``prometheus`` package for promtool)::

    python -m benchmarks.dataset_load [--repeats 3] [--promtool-repeats 1]
        [--dataset DIR | --replicas 8 --gpus-per-replica 8 --hours 6 --interval 15]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.common import add_fleet_arguments, backfill, fleet_dataset, median_seconds
from benchmarks.fleet import FleetShape
from inference_obs.source.dataset.reader import SAMPLES, read_dataset
from inference_obs.source.dataset.samples_file import SampleCache
from tests.integration.servers import require_binary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--promtool-repeats", type=int, default=1)
    add_fleet_arguments(parser, FleetShape(replicas=8))
    args = parser.parse_args(argv)
    promtool = require_binary("promtool")
    with fleet_dataset(args) as path, tempfile.TemporaryDirectory(prefix="load-") as tmp_dir:
        tmp = Path(tmp_dir)
        samples = path / SAMPLES
        first = read_dataset(path, cache=None)
        total = int(first.samples.offsets[-1])
        series = len(first.samples)
        del first
        print(f"data: {series:,} series, {total:,} samples, {samples.stat().st_size:,} bytes")
        cache = SampleCache(tmp / "cache", min_bytes=0)
        read_dataset(path, cache=cache)  # fills the cache
        cold = median_seconds(lambda: read_dataset(path, cache=None), args.repeats)
        warm = median_seconds(lambda: read_dataset(path, cache=cache), args.repeats)
        cached = sum(f.stat().st_size for f in (tmp / "cache").iterdir())

        def promtool_once() -> None:
            backfill(promtool, samples, Path(tempfile.mkdtemp(dir=tmp)))

        peer = median_seconds(promtool_once, args.promtool_repeats)
    print(f"sample cache: {cached:,} bytes")
    print(f"\n{'':34} {'median s':>9} {'samples/s':>12} {'promtool / it':>14}")
    for label, seconds in (
        ("read_dataset, no cache", cold),
        ("read_dataset, cache filled", warm),
        ("promtool backfill (peer)", peer),
    ):
        print(f"{label:34} {seconds:9.3f} {total / seconds:12,.0f} {peer / seconds:13.1f}x")
    print(
        f"\nmedians of {args.repeats} loads and {args.promtool_repeats} backfill(s); goal: "
        f"promtool / read_dataset >= 10x (no cache {peer / cold:.1f}x, cache {peer / warm:.1f}x)"
    )


if __name__ == "__main__":
    main()
