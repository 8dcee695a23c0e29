"""A small dataset with a restarted replica, for the exact counter ratios.

Deployment ``A`` has three replicas scraped every 60 s, off the window's
edges; ``b-0`` belongs to no deployment. Queue-time histogram, worked out by
hand (resets add the value after the drop, as the counter restarted from 0):

============  ===========================  ======  =======  ============
replica       ``_count`` samples           change  ``_sum``  ``le="0.5"``
============  ===========================  ======  =======  ============
``a-0``       10 20 30 40 ...               +30     +15      +12 of 30
``a-1``       100 110 5 15 (restart)        +25     +15      +20 of 25
``a-2``       7 7 7 7                        +0      +0       +0
============  ===========================  ======  =======  ============

So the deployment's mean is 30 / 55 s and its share at or below 0.5 s is
32 / 55; per replica 0.5, 0.6 and no data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from inference_obs.deployment import Deployment
from inference_obs.metrics import vllm
from inference_obs.samples import Series, Window
from inference_obs.source.dataset.manifest import Generator, Manifest, ManifestWindow
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.writer import write_dataset

__all__ = ["DEPLOYMENT", "WINDOW", "restarted_dataset", "restarted_series"]

WINDOW = Window.parse("2026-10-19T17:40+08:00", "4m")
DEPLOYMENT = Deployment(
    name="A",
    selector={"pod": "~a-.*"},
    hardware={"gpu_model": "NVIDIA H20", "gpus_per_replica": 8},
    engine={"name": "vllm"},
)
_NAME = vllm.REQUEST_QUEUE_TIME.name

# pod -> (_count, _sum, le="0.5" bucket) values at the four scrapes.
_REPLICAS: dict[str, tuple[list[float], list[float], list[float]]] = {
    "a-0": ([10, 20, 30, 40], [5, 10, 15, 20], [4, 8, 12, 16]),
    "a-1": ([100, 110, 5, 15], [50, 56, 2, 9], [80, 88, 4, 12]),
    "a-2": ([7, 7, 7, 7], [3, 3, 3, 3], [1, 1, 1, 1]),
    "b-0": ([1, 1000, 2000, 3000], [1, 9000, 9999, 99999], [0, 1, 2, 3]),
}


def restarted_series(window: Window = WINDOW, prefix: str = "") -> list[Series]:
    """The series of the module docstring over ``window`` (4 minutes); pods get ``prefix``."""
    times = window.start_s + 30.0 + 60.0 * np.arange(4)
    series = []
    for pod, (count, total, below) in _REPLICAS.items():
        labels = {"pod": prefix + pod, "model_name": "m"}
        series += [
            Series(f"{_NAME}_count", labels, times, np.array(count, dtype=float)),
            Series(f"{_NAME}_sum", labels, times, np.array(total, dtype=float)),
            Series(f"{_NAME}_bucket", {**labels, "le": "0.5"}, times, np.array(below, float)),
            Series(f"{_NAME}_bucket", {**labels, "le": "+Inf"}, times, np.array(count, float)),
        ]
    return series


def restarted_dataset(tmp: Path) -> Dataset:
    """Write the dataset described in the module docstring under ``tmp``."""
    manifest = Manifest(
        title="restarts",
        synthetic=True,
        window=ManifestWindow(start=WINDOW.start, end=WINDOW.end),
        scrape_interval_seconds=60,
        deployments=(DEPLOYMENT,),
        generator=Generator(scenario="restarts", seed=1, version="0"),
    )
    return write_dataset(tmp / "restarts", manifest, restarted_series())
