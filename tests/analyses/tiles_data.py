"""A hand-planned dataset for reading app scrapes in tiles: two replicas over 10 minutes.

Deployment ``T`` (``namespace="ns"``, pods ``t-0`` and ``t-1``), one vLLM
engine and two GPUs per replica, everything scraped every 15 s off the 60 s
tile edges: replica ``t-0``'s app at +3 s into each tile (3, 18, 33, 48 s),
its GPUs at +7 s; ``t-1``'s at +9 s and +11 s. So each 60 s tile holds four
scrapes of each series and no sample lies on an edge, and Prometheus 2.x
(closed ranges), 3.x and VictoriaMetrics (left-open) see the same tiles.

Replica ``t-0``, tile by tile (``waiting`` at each tile's second scrape,
``running`` at its third, the rest 0; GPU util the same at every scrape of
the tile, GPU 1 with only its first two samples in tile 3 and neither GPU
with a sample in tile 7; PCIe rx is ``1000 x util``):

====  =======  =======  ==============  ====================  ============
tile  waiting  running  GPU 0 / GPU 1   sample-weighted mean  class (50 %)
====  =======  =======  ==============  ====================  ============
0     0        0        10 / 10         10                    idle
1     0        2        60 / 80         70                    busy
2     3        4        90 / 100        95                    capacity
3     0        0        60 / 38 (x2)    (240 + 76) / 6        busy
4     0        0        0 / 0           0                     idle
5     2        1        10 / 20         15                    starved
6     0        3        0 / 0           0                     inconsistent
7     0        0        none            none                  unknown
8, 9  0        0        5 / 5           5                     idle
====  =======  =======  ==============  ====================  ============

In tile 3 the sample-weighted mean is 52.67 (busy) while the mean of the
two GPUs' means is 49 (idle). Replica ``t-1`` runs 5 requests at every
scrape with both GPUs at 80: busy throughout. Work with GPUs under half
busy (the boundary analysis, duty = util / 100): tiles 5 and 6 of ``t-0``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm, vllm
from inference_obs.samples import Series, Window
from inference_obs.source.dataset.manifest import Generator, Manifest, ManifestWindow
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.writer import write_dataset

__all__ = [
    "DEPLOYMENT",
    "START",
    "STEP",
    "T0_CLASSES",
    "T0_MEANS",
    "T0_RUNNING",
    "T0_WAITING",
    "tiles_dataset",
    "tiles_series",
    "tiles_window",
]

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
STEP = 60.0
TILES = 10
DEPLOYMENT = Deployment(
    name="T",
    selector={"namespace": "ns", "pod": "~t-.*"},
    hardware={"gpu_model": "NVIDIA H100 80GB HBM3", "gpus_per_replica": 2},
    engine={"name": "vllm"},
)
T0_WAITING = [0, 0, 3, 0, 0, 2, 0, 0, 0, 0]
T0_RUNNING = [0, 2, 4, 0, 0, 1, 3, 0, 0, 0]
_T0_GPUS = [(10, 10), (60, 80), (90, 100), (60, 38), (0, 0), (10, 20), (0, 0), None, (5, 5), (5, 5)]
T0_MEANS = [10, 70, 95, 316 / 6, 0, 15, 0, None, 5, 5]
T0_CLASSES = ["idle", "busy", "capacity", "busy", "idle", "starved", "inconsistent", "unknown",
              "idle", "idle"]  # fmt: skip


def tiles_window(start: datetime = START) -> Window:
    """The dataset's 10-minute window from ``start``."""
    return Window.parse(start, TILES * STEP)


def _scrapes(start_s: float, phase: float) -> np.ndarray:
    return start_s + phase + 15.0 * np.arange(4 * TILES)


def tiles_series(start: datetime = START, namespace: str = "ns") -> list[Series]:
    """The series of the module docstring, the window starting at ``start``."""
    s = start.timestamp()
    out = []
    per_tile = np.zeros((TILES, 4))
    waiting, running = per_tile.copy(), per_tile.copy()
    waiting[:, 1], running[:, 2] = T0_WAITING, T0_RUNNING
    for pod, app_phase, gpu_phase in (("t-0", 3.0, 7.0), ("t-1", 9.0, 11.0)):
        labels = {"namespace": namespace, "pod": pod, "model_name": "m", "engine": "0"}
        times = _scrapes(s, app_phase)
        if pod == "t-1":
            waiting, running = per_tile.copy(), per_tile + 5.0
        out += [
            Series(vllm.NUM_REQUESTS_WAITING.name, labels, times, waiting.ravel()),
            Series(vllm.NUM_REQUESTS_RUNNING.name, labels, times, running.ravel()),
        ]
        for gpu in (0, 1):
            plan = _T0_GPUS if pod == "t-0" else [(80, 80)] * TILES
            stamps: list[float] = []
            readings: list[float] = []
            for tile, utils in enumerate(plan):
                if utils is None:
                    continue
                kept = 2 if (pod, tile, gpu) == ("t-0", 3, 1) else 4
                stamps += (s + tile * STEP + gpu_phase + 15.0 * np.arange(kept)).tolist()
                readings += [float(utils[gpu])] * kept
            gpu_labels = {"namespace": namespace, "pod": pod, "gpu": str(gpu), "Hostname": pod}
            at, util = np.array(stamps), np.array(readings)
            out += [
                Series(dcgm.GPU_UTIL.name, gpu_labels, at, util),
                Series(dcgm.PROF_PCIE_RX_BYTES.name, gpu_labels, at, 1000.0 * util),
            ]
    return out


def tiles_dataset(tmp: Path, start: datetime = START) -> Dataset:
    """Write the dataset of the module docstring under ``tmp``."""
    window = tiles_window(start)
    manifest = Manifest(
        title="tiles",
        synthetic=True,
        generator=Generator(scenario="tiles", seed=0, version="0"),
        window=ManifestWindow(start=window.start, end=window.end),
        scrape_interval_seconds=15.0,
        deployments=(DEPLOYMENT,),
    )
    return write_dataset(tmp / "tiles", manifest, tiles_series(start))
