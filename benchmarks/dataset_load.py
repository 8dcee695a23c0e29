"""Loading an observation dataset, against promtool backfilling the same samples.om.

Data: a generated dataset of 1,000 histogram-bucket series (100 replicas x 10
``le`` buckets, four labels each, timestamps on odd milliseconds) with 1,000
samples each: 1,000,000 samples, about 150 MB of OpenMetrics text. The loader
is timed end to end (:func:`read_dataset`: manifest, SHA-256 of every file,
parsing and checking every line, building the SampleSet); promtool is timed
running ``tsdb create-blocks-from openmetrics`` on the same file into a fresh
directory. Both are medians of repeated runs in the same process, after one
warm-up run each; the ratio says how many loads fit in one backfill.

Run from the repository root (needs Debian's ``prometheus`` package for promtool)::

    python -m benchmarks.dataset_load [--repeats 5] [--series 1000] [--samples 1000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from inference_obs.samples import Series
from inference_obs.source.dataset import read_dataset, write_dataset
from inference_obs.source.manifest import Manifest
from tests.integration.servers import require_binary

STEP_S = 15.0
START = 1.7e9 + 0.123  # odd milliseconds: every timestamp takes the midpoint form
LE = ("0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "25.0", "50.0", "+Inf")
MANIFEST = {
    "title": "Loader benchmark (generated)",
    "synthetic": True,
    "window": {"start": "2023-11-14T22:13:20Z", "end": "2023-11-15T22:13:20Z"},
    "scrape_interval_seconds": STEP_S,
    "deployments": [
        {
            "name": "BENCH",
            "selector": {"pod": "~bench-.*"},
            "hardware": {"gpu_model": "NVIDIA H20", "gpus_per_replica": 8},
            "engine": {"name": "vllm"},
        }
    ],
    "generator": {"scenario": "benchmarks/dataset_load.py", "seed": 7, "version": "0.1.0"},
}


def make_series(n_series: int, n_samples: int, seed: int = 7) -> list[Series]:
    """Cumulative bucket counters, seeded."""
    rng = np.random.default_rng(seed)
    times = START + STEP_S * np.arange(n_samples)
    out = []
    for r in range(max(1, n_series // len(LE))):
        per_step = rng.poisson(3.0, size=(n_samples, len(LE))).astype(np.float64)
        cumulative = np.cumsum(np.cumsum(per_step, axis=1), axis=0)
        for j, le in enumerate(LE):
            labels = {
                "pod": f"bench-{r:03d}",
                "le": le,
                "model_name": "deepseek-ai/DeepSeek-V3",
                "namespace": "inference",
            }
            out.append(
                Series("vllm:e2e_request_latency_seconds_bucket", labels, times, cumulative[:, j])
            )
    return out


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls, after one warm-up call."""
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def backfill(promtool: str, samples: Path, tmp: Path) -> None:
    """promtool's backfill of ``samples`` into a new directory under ``tmp``."""
    out = Path(tempfile.mkdtemp(dir=tmp))
    argv = [promtool, "tsdb", "create-blocks-from", "openmetrics", str(samples), str(out)]
    subprocess.run(argv, check=True, capture_output=True, timeout=1800)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=1000, help="samples per series")
    args = parser.parse_args()
    promtool = require_binary("promtool")

    series = make_series(args.series, args.samples)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        started = time.perf_counter()
        dataset = write_dataset(tmp / "ds", Manifest.model_validate(MANIFEST), series)
        wrote = time.perf_counter() - started
        samples = dataset.path / "samples.om"
        total = int(dataset.samples.values.size)
        print(f"data: {len(series)} series, {total:,} samples, {samples.stat().st_size:,} bytes")
        print(f"write_dataset: {wrote:.2f} s (once)")
        del series, dataset

        load = median_seconds(lambda: read_dataset(tmp / "ds"), args.repeats)
        promtool_s = median_seconds(lambda: backfill(promtool, samples, tmp), args.repeats)
    print(f"\n{'':24} {'median s':>9} {'samples/s':>12}")
    print(f"{'read_dataset':24} {load:9.3f} {total / load:12,.0f}")
    print(f"{'promtool backfill':24} {promtool_s:9.3f} {total / promtool_s:12,.0f}")
    print(f"\npromtool / read_dataset: {promtool_s / load:.1f}x (medians of {args.repeats} runs)")


if __name__ == "__main__":
    main()
