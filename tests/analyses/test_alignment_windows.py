"""A scrape's class and aligned GPU reading do not depend on the report's window.

Queueing and the boundary analysis pair each app scrape with the GPU reading
nearest it in time (:mod:`inference_obs.reading.alignment`). On the bundled
PRO 5000 vs H20 dataset the same scrape is classified in the dataset's hour
(17:40-18:40 +08:00), in the two hours and the 90 minutes ending at 18:40,
and in the hour 30 s later: every scrape the four windows share must get the
same class and the same GPU mean in each.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.boundaries.evidence import gather
from inference_obs.analyses.queueing import QueueClass, QueueingResult, queueing
from inference_obs.deployment import Deployment
from inference_obs.metrics import dcgm
from inference_obs.reading.context import Reading
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"
SAMPLES = BUNDLED / "samples.om"


@pytest.fixture(scope="module")
def windows(source: DatasetSource) -> dict[str, Window]:
    edges = source.dataset.manifest.window
    hour = Window(edges.start, edges.end)
    late = timedelta(seconds=30)
    return {
        "1h": hour,
        "2h": Window(hour.end - timedelta(hours=2), hour.end),
        "90m": Window(hour.end - timedelta(minutes=90), hour.end),
        "1h+30s": Window(hour.start + late, hour.end + late),
    }


def _deployments(source: DatasetSource) -> list[Deployment]:
    return list(source.dataset.manifest.deployments)


Rows = dict[tuple[str, str, int], tuple[str, float]]


def _queue_rows(result: QueueingResult) -> Rows:
    """(replica, scrape ms) -> (class, GPU mean), with NaN written as -1 to compare."""
    out: Rows = {}
    for rows in result.rows:
        for t, cls, util in zip(rows.t.tolist(), rows.classes, rows.gpu_util.tolist(), strict=True):
            out[("", rows.replica, round(t * 1000))] = (cls.value, -1.0 if np.isnan(util) else util)
    return out


@pytest.fixture(scope="module")
def classified(source: DatasetSource, windows: dict[str, Window]) -> dict[str, Rows]:
    out: dict[str, Rows] = {}
    for name, window in windows.items():
        rows: Rows = {}
        for deployment in _deployments(source):
            for (_, replica, t), row in _queue_rows(queueing(source, deployment, window)).items():
                rows[(deployment.name, replica, t)] = row
        out[name] = rows
    return out


def _shared(per_window: dict[str, Rows]) -> set[tuple[str, str, int]]:
    keys = [set(rows) for rows in per_window.values()]
    return set.intersection(*keys)


def test_every_shared_scrape_keeps_its_class_and_gpu_mean(classified: dict[str, Rows]) -> None:
    shared = _shared(classified)
    # The PRO replica and the four H20 ones, 60 scrapes an hour each; the windows
    # share 59 or 60 of each replica's (the hour 30 s later loses the first scrape
    # after 17:40:00 only where it comes before 17:40:30).
    assert len(shared) >= 5 * 59
    moved = {
        key: {name: rows[key] for name, rows in classified.items()}
        for key in sorted(shared)
        if len({rows[key] for rows in classified.values()}) > 1
    }
    assert not moved, list(moved.items())[:5]


def test_the_classes_are_not_all_one(classified: dict[str, Rows]) -> None:
    # The agreement above must be between classifications that say something.
    classes = {row[0] for row in classified["1h"].values()}
    assert {QueueClass.CAPACITY.value, QueueClass.STARVED.value, QueueClass.IDLE.value} <= classes
    assert QueueClass.UNKNOWN.value not in {classified["1h"][k][0] for k in _shared(classified)}


def test_boundary_rows_do_not_depend_on_the_window(
    source: DatasetSource, windows: dict[str, Window]
) -> None:
    per_window: dict[str, Rows] = {}
    for name, window in windows.items():
        rows: Rows = {}
        for deployment in _deployments(source):
            reading = Reading(source, deployment, window, "boundaries")
            evidence = gather(reading, dcgm.GPU_UTIL, 0.01, tolerance_ms=None, idle_below=0.5)
            for replica, track in evidence.tracks.items():
                flags = track.boundary(0.5).tolist()
                for t, flag, duty in zip(track.times_ms.tolist(), flags, track.duty, strict=True):
                    mean = -1.0 if np.isnan(duty) else float(duty)
                    rows[(deployment.name, replica, t)] = ("boundary" if flag else "", mean)
        per_window[name] = rows
    shared = _shared(per_window)
    assert len(shared) >= 5 * 59
    moved = [k for k in shared if len({rows[k] for rows in per_window.values()}) > 1]
    assert not moved, sorted(moved)[:5]
    assert any(per_window["1h"][k][0] for k in shared)  # some rows are boundary rows


def _pro_row(result: QueueingResult, at: datetime) -> tuple[str, float, float]:
    (rows,) = result.rows
    k = int(np.argmin(np.abs(rows.t - at.timestamp())))
    assert abs(rows.t[k] - at.timestamp()) < 1.0
    return rows.classes[k].value, float(rows.waiting[k]), float(rows.gpu_util[k])


def test_two_pro_scrapes_read_the_gpu_samples_nearest_them(
    source: DatasetSource, windows: dict[str, Window]
) -> None:
    # From samples.om, pod pro-model-01: the app is scraped at hh:mm:25.67 every
    # 60 s, dcgm-exporter at hh:mm:03.34, so the GPU sample nearest an app scrape is
    # always 22.3 s before it (the next is 37.7 s after), within the 60 s tolerance.
    #
    # 17:56:25.669: waiting 14, running 9. GPU samples at 17:56:03.3455, GPUs 0-7:
    # 100, 100, 100, 98, 100, 99, 98, 97 -> mean 792 / 8 = 99.0 >= 50: capacity.
    # 18:31:25.666: waiting 1, running 0. GPU samples at 18:31:03.3415, GPUs 0-7:
    # 30, 30, 31, 30, 30, 31, 30, 31 -> mean 243 / 8 = 30.375 < 50: starved.
    pro = next(d for d in _deployments(source) if d.name == "PRO")
    zone = windows["1h"].start.tzinfo
    capacity_at = datetime(2026, 10, 19, 17, 56, 25, 669_000, zone)
    starved_at = datetime(2026, 10, 19, 18, 31, 25, 666_000, zone)
    for window in windows.values():
        result = queueing(source, pro, window)
        assert _pro_row(result, capacity_at) == ("capacity", 14.0, 99.0)
        assert _pro_row(result, starved_at) == ("starved", 1.0, 30.375)


def test_every_shared_tile_keeps_its_class_and_gpu_mean(
    source: DatasetSource, windows: dict[str, Window]
) -> None:
    # Read in 60 s tiles, each window's tiles end on whole minutes (multiples of 60 s
    # since the epoch), the window 30 s later's too: 17:42:00, ..., 18:40:00 for it.
    per_window: dict[str, Rows] = {}
    for name, window in windows.items():
        rows: Rows = {}
        for deployment in _deployments(source):
            result = queueing(source, deployment, window, step=60.0)
            for (_, replica, t), row in _queue_rows(result).items():
                assert t % 60_000 == 0
                rows[(deployment.name, replica, t)] = row
        per_window[name] = rows
    shared = _shared(per_window)
    assert len(shared) >= 5 * 58
    moved = [k for k in shared if len({rows[k] for rows in per_window.values()}) > 1]
    assert not moved, sorted(moved)[:5]


def test_windows_holding_the_same_scrapes_give_the_same_waiting_idle_table(
    source: DatasetSource, windows: dict[str, Window]
) -> None:
    # The dataset's samples lie in 17:40-18:40, so the hour, the two hours and the
    # 90 minutes ending at 18:40 hold the same scrapes: the same 2x2 table, the same p.
    def table(window: Window, deployment: Deployment) -> tuple[float | None, ...]:
        pooled = queueing(source, deployment, window).waiting_idle
        cells = (pooled.waiting_idle, pooled.waiting_busy, pooled.not_waiting_idle)
        return (*(m.value for m in cells), pooled.not_waiting_busy.value, pooled.p_value.value)

    for deployment in _deployments(source):
        hour = table(windows["1h"], deployment)
        assert sum(v or 0 for v in hour[:4]) == 60 * len(deployment.replicas)
        assert table(windows["2h"], deployment) == hour
        assert table(windows["90m"], deployment) == hour
