"""Counter series scraped exactly at the window's start, for the exact changes on every engine.

Prometheus 2.x closes a range at both ends; Prometheus 3.x and
VictoriaMetrics leave its start out. The exact changes must read the
sample at the start on all of them, and nothing before it.

One TTFT series per pod over the minute from :data:`START` (offsets in
seconds from it; the true mean is 2.0 s for each):

=========  ===================  =================  ==================  ============
pod        scraped at           ``_count``         ``_sum``            start lost
=========  ===================  =================  ==================  ============
``one``    0 15 30 45           10 20 30 40        10 20 45 70         50 / 20
``reset``  0 15 30 45           10 2 12 22         10 2 22 44          42 / 20
``early``  -0.001 0 15 30 45    0 10 20 30 40      0 10 20 45 70       50 / 20
=========  ===================  =================  ==================  ============

``one``: 30 requests, 60 s of TTFT; without the start sample, the first
interval's 10 requests (10 s) are lost from both sides and the mean reads
2.5. ``reset`` restarted just after the start scrape: 2 requests (2 s)
after the restart, then 20 (42 s), so 22 requests and 44 s; a Prometheus 3
range without the start sees no reset and reads 42 / 20 = 2.1
(VictoriaMetrics's ``resets`` counts from the sample before its range, so
it sees the drop). ``early`` has one more
scrape a millisecond before the start, which must stay out (70 / 40 = 1.75
if it came in).

``restart`` is scraped every 15 s for 16 minutes (0 to 960 s) and restarted
just after its first scrape: ``_count`` 10, then 2, 12, ... 632, ``_sum``
twice that (20, then 4, 24, ... 1264), so 632 requests of 2.0 s.

The fleet: the H20 deployment of ``datasets/pro5000-vs-h20`` (four replicas
scraped every 60 s at their own phases) over half an hour from a scrape of
``h20-model-02``, so that replica's first scrape is exactly at the start.
Its ground truth comes from the dataset's ``requests.csv``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from inference_obs.deployment import Deployment
from inference_obs.metrics import builders, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Matcher, Selector
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import mean_ratio
from inference_obs.reading.counter_totals import Pair, Pairing, totals
from inference_obs.samples import SampleSet, Series, Window
from inference_obs.source.base import Source
from inference_obs.source.dataset import Dataset, write_dataset
from inference_obs.source.dataset.source import DatasetSource

__all__ = [
    "FLEET",
    "START",
    "TTFT",
    "FleetTruth",
    "RawWindows",
    "edge_deployment",
    "edge_series",
    "edges_dataset",
    "exact_mean_and_count",
    "finished_count",
    "fleet_deployment",
    "fleet_series",
    "fleet_truth",
    "fleet_window",
]

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
TTFT = vllm.TIME_TO_FIRST_TOKEN
#: Inside the dataset's hour, so one backfill holds the pods and the fleet.
START = datetime(2026, 10, 19, 10, 0, tzinfo=UTC)
#: The fleet's replica scraped exactly at the start of :func:`fleet_window`.
FLEET = "h20-model-02"
#: The fleet window starts at this scrape of :data:`FLEET` and lasts half an hour.
_FLEET_SCRAPE, _FLEET_SECONDS = 1, 1800.0

_RESTART = [10.0, *(2.0 + 10.0 * np.arange(64)).tolist()]
# pod -> (scrape offsets from the start in s, _count values, _sum values).
_PODS: dict[str, tuple[list[float], list[float], list[float]]] = {
    "one": ([0, 15, 30, 45], [10, 20, 30, 40], [10, 20, 45, 70]),
    "reset": ([0, 15, 30, 45], [10, 2, 12, 22], [10, 2, 22, 44]),
    "early": ([-0.001, 0, 15, 30, 45], [0, 10, 20, 30, 40], [0, 10, 20, 45, 70]),
    "restart": ((15.0 * np.arange(65)).tolist(), _RESTART, [2 * v for v in _RESTART]),
}


def edge_deployment(pod: str) -> Deployment:
    """A deployment of the one pod ``pod``."""
    return Deployment(
        name=pod,
        selector={"pod": pod},
        hardware={"gpu_model": "NVIDIA H20", "gpus_per_replica": 1},
        engine={"name": "vllm"},
    )


def edge_series(start: float, prefix: str = "") -> list[Series]:
    """The TTFT series of the module docstring from ``start`` (unix s), pods ``prefix + pod``."""
    series = []
    for pod, (offsets, count, total) in _PODS.items():
        labels = {"pod": prefix + pod, "model_name": "m"}
        times = start + np.array(offsets)
        series += [
            Series(f"{TTFT.name}_count", labels, times, np.array(count, dtype=float)),
            Series(f"{TTFT.name}_sum", labels, times, np.array(total, dtype=float)),
        ]
    return series


@cache
def _shipped() -> DatasetSource:
    return DatasetSource(DATASET)


def _fleet_deployment(source: DatasetSource) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == "H20")


def fleet_window() -> Window:
    """Half an hour from a scrape of :data:`FLEET`, in the shipped dataset's hour."""
    shipped = _shipped()
    whole = shipped.dataset.manifest.window.window()
    (one,) = shipped.raw(Selector(f"{TTFT.name}_count", (Matcher.equal("pod", FLEET),)), whole)
    start = datetime.fromtimestamp(int(one.t_ms[_FLEET_SCRAPE]) / 1000, whole.start.tzinfo)
    return Window.parse(start, _FLEET_SECONDS)


def fleet_series() -> list[Series]:
    """The fleet's TTFT ``_count`` and ``_sum`` and its finished requests, as shipped."""
    shipped = _shipped()
    names = {f"{TTFT.name}_count", f"{TTFT.name}_sum", vllm.REQUEST_SUCCESS.select(()).metric}
    pods = _fleet_deployment(shipped).selector["pod"].removeprefix("~")
    return [s for s in shipped.samples if s.name in names and re.fullmatch(pods, s.labels["pod"])]


def edges_dataset(tmp: Path) -> Dataset:
    """The pods and the fleet as one dataset under ``tmp``, with the shipped manifest."""
    manifest = _shipped().dataset.manifest
    return write_dataset(tmp / "edges", manifest, edge_series(START.timestamp()) + fleet_series())


def fleet_deployment(prefix: str = "") -> Deployment:
    """The fleet's deployment as the shipped manifest declares it, pods named ``prefix + pod``."""
    shipped = _fleet_deployment(_shipped())
    pods = shipped.selector["pod"].removeprefix("~")
    return shipped.model_copy(update={"selector": {**shipped.selector, "pod": f"~{prefix}{pods}"}})


@dataclass(frozen=True, slots=True)
class FleetTruth:
    """What the fleet's counters recorded over :func:`fleet_window`, from ``requests.csv``."""

    #: Requests with their first token between each replica's first and last scrape.
    ttft_count: int
    #: Their mean TTFT, s.
    ttft_mean: float
    #: Requests vLLM finished between each replica's first and last scrape.
    finished: int
    #: Requests :data:`FLEET` recorded between the start and its next scrape.
    first_interval: int


@cache
def fleet_truth() -> FleetTruth:
    """The fleet's ground truth over :func:`fleet_window` (scrapes at its edges included)."""
    shipped, window = _shipped(), fleet_window()
    dep = _fleet_deployment(shipped)
    requests = shipped.dataset.requests
    assert isinstance(requests, pd.DataFrame)
    begin = shipped.dataset.manifest.window.window().start_s
    selector = Selector(f"{TTFT.name}_count", dep.matchers)
    scrapes = {one.labels["pod"]: one.t_ms / 1000 - begin for one in shipped.raw(selector, window)}
    assert len(scrapes) == len(dep.replicas)
    ttft: list[np.ndarray] = []
    finished = first_interval = 0
    for replica, pod in zip(dep.replicas, sorted(scrapes), strict=True):
        at = scrapes[pod]
        rows = requests[requests["replica"] == replica]
        starts = (rows["first_token"] > at[0]) & (rows["first_token"] <= at[-1])
        ttft.append(rows.loc[starts, "ttft"].to_numpy(dtype=np.float64))
        ends = (rows["finish"] > at[0]) & (rows["finish"] <= at[-1])
        finished += int((ends & (rows["outcome"] == "finished")).sum())
        if pod == FLEET:
            assert round(at[0] * 1000) == round((window.start_s - begin) * 1000)
            first = (rows["first_token"] > at[0]) & (rows["first_token"] <= at[1])
            first_interval = int(first.sum())
    values = np.concatenate(ttft)
    return FleetTruth(values.size, float(values.mean()), finished, first_interval)


def _pair_totals(source: Source, window: Window, pair: Pair) -> tuple[float, float]:
    (found,) = totals(source, window, [pair])
    ((top, bottom),) = found.groups.values()
    return top, bottom


def exact_mean_and_count(
    source: Source, deployment: Deployment, window: Window, family: Family = TTFT
) -> tuple[float, float]:
    """The exact mean of ``family`` over ``window`` and the count of requests behind it."""
    ratio = mean_ratio(Reading(source, deployment, window, "t"), family, "mean")
    top, bottom = _pair_totals(source, window, ratio.pair())
    return top / bottom, bottom


def finished_count(source: Source, deployment: Deployment, window: Window) -> float:
    """The exact change of every finished-request counter of ``deployment`` over ``window``."""
    success, m = vllm.REQUEST_SUCCESS, deployment.matchers
    check = builders.increase_total(success, m, window.seconds)
    pair = Pair(success.select(m), success.select(m), frozenset(), Pairing.PART_OF_WHOLE, (), check)
    return _pair_totals(source, window, pair)[1]


class RawWindows:
    """Delegates to a source and keeps the length of every window read raw (s)."""

    def __init__(self, source: Source) -> None:
        self._source = source
        self.seconds: list[float] = []

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        self.seconds.append(window.seconds)
        return self._source.raw(selector, window)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)
