"""Windows the data does not fill, on the bundled PRO 5000 vs H20 dataset, and their truth.

Two cases of one defect, rates diluted by time without data:

- a window longer than the data: the dataset holds one hour (17:40 to 18:40 +08:00);
  :func:`long_window` is two hours ending at the same time;
- a pod that starts half-way: :func:`late_dataset` keeps every series of
  ``h20-model-04`` (app, GPU and its targets' ``up``) from :data:`FROM_S` seconds into
  the window on only. Its counters stay as scraped (they count from the traffic's
  start), as when a pod's scrapes begin part-way: ``increase()`` then extrapolates
  half a scrape interval before its first sample, as before any series that starts
  inside a range.

The truth comes from the dataset's ``requests.csv`` (:func:`generated`), never from
the code under test.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from inference_obs.samples import Series, Window
from inference_obs.source.dataset import Dataset, write_dataset
from inference_obs.source.dataset.reader import read_dataset

__all__ = [
    "DATASET",
    "FROM_S",
    "LATE",
    "generated",
    "late_dataset",
    "late_gpus_dataset",
    "long_window",
]

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
#: The replica that starts late, as its pod label and as requests.csv names it.
LATE = ("h20-model-04", "H20-04")
#: Where the late replica's samples begin, seconds after the window's start.
FROM_S = 1800.0


def long_window() -> Window:
    """Two hours ending where the dataset's one hour ends."""
    window = read_dataset(DATASET).manifest.window
    return Window(window.end - timedelta(hours=2), window.end)


def _late(series: Series) -> bool:
    """Whether a series is the late replica's: its pod, or its targets' ``up``."""
    return series.labels.get("pod") == LATE[0] or series.labels.get("instance", "").startswith(
        "10.1.3."
    )


def _h20_gpu(series: Series) -> bool:
    """Whether a series is one of H20's DCGM series."""
    return series.name.startswith("DCGM_") and series.labels.get("pod", "").startswith("h20-")


def late_dataset(tmp: Path) -> Dataset:
    """The bundled dataset with :data:`LATE`'s series from :data:`FROM_S` on only."""
    return _cut(tmp / "late-pod", _late)


def late_gpus_dataset(tmp: Path) -> Dataset:
    """The bundled dataset with H20's GPU (DCGM) series from :data:`FROM_S` on only: an
    exporter that started late, its app series whole."""
    return _cut(tmp / "late-gpus", _h20_gpu)


def _cut(path: Path, late: Callable[[Series], bool]) -> Dataset:
    shipped = read_dataset(DATASET)
    cut_ms = shipped.manifest.window.start.timestamp() * 1000 + FROM_S * 1000
    kept = []
    for one in shipped.samples:
        if late(one):
            keep = one.t_ms >= cut_ms
            assert keep.any()
            assert not keep.all()
            one = Series(one.name, one.labels, one.t_ms[keep] / 1000, one.values[keep])
        kept.append(one)
    return write_dataset(path, shipped.manifest, kept)


def generated(replicas: tuple[str, ...], start_s: float, end_s: float) -> float:
    """Output tokens ``replicas`` (requests.csv names, e.g. ``H20-01``) generated from
    ``start_s`` to ``end_s`` seconds after the window's start.

    Each request's output tokens are spread evenly from its first token to its finish
    (a request finished at its first token counts there): decode emits them at a
    steady pace, which is what the token counter counts as it goes.
    """
    requests = pd.read_csv(DATASET / "requests.csv")
    chosen = requests[requests["replica"].isin(replicas) & requests["first_token"].notna()]
    first, finish = chosen["first_token"].to_numpy(), chosen["finish"].to_numpy()
    tokens = np.nan_to_num(chosen["output_tokens"].to_numpy(dtype=float))
    length = finish - first
    inside = np.clip(np.minimum(finish, end_s) - np.maximum(first, start_s), 0, None)
    share = np.where(
        length > 0,
        inside / np.where(length > 0, length, 1.0),
        ((first > start_s) & (first <= end_s)).astype(float),
    )
    return float((tokens * share).sum())
