"""The simulator's ground truth for the requests a window's counters recorded.

Which requests count: for each replica, those whose event (first token for
TTFT, finish otherwise) falls in (first, last] of its counter samples inside
the window, and for finish-time histograms only requests vLLM finished
(client aborts are absent from the histograms). Every expected number comes
from the dataset's ``requests.csv``, never from the code under test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from inference_obs.deployment import Deployment
from inference_obs.metrics import vllm
from inference_obs.query import Selector
from inference_obs.samples import Series, Window
from inference_obs.source.dataset.source import DatasetSource

Floats = npt.NDArray[np.float64]
#: Relative tolerance of exact means and shares: floating-point summation only.
EXACT = 1e-12
#: The shipped datasets, and the three a truth test reads.
DATASETS = Path(__file__).resolve().parents[2] / "datasets"
BUNDLED = ("pro5000-vs-h20", "h100-vs-h200", "r1-decode")
#: latency metric -> (requests.csv column, the event that records it, finished only)
COLUMNS = {
    "ttft": ("ttft", "first_token", False),
    "tpot": ("tpot", "finish", True),
    "e2e": ("e2e", "finish", True),
    "queue": ("queue_time", "finish", True),
    "prefill": ("prefill_time", "finish", True),
    "decode": ("decode_time", "finish", True),
}


def window_of(source: DatasetSource) -> Window:
    return source.dataset.manifest.window.window()


def deployment(source: DatasetSource, name: str) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == name)


def requests_of(source: DatasetSource) -> pd.DataFrame:
    requests = source.dataset.requests
    assert isinstance(requests, pd.DataFrame)
    return requests


def scrapes(source: DatasetSource, dep: Deployment, window: Window) -> list[Floats]:
    """Per replica (in ``dep.replicas`` order), its counter scrape times as window offsets.

    A replica running several engines has one series per engine, scraped
    together; the first of them gives the times.
    """
    selector = Selector(f"{vllm.E2E_REQUEST_LATENCY.name}_count", dep.matchers)
    by_pod: dict[str, Series] = {}
    for one in source.raw(selector, window):
        by_pod.setdefault(one.labels["pod"], one)
    assert len(by_pod) == len(dep.replicas)
    return [by_pod[pod].t_ms / 1000.0 - window.start_s for pod in sorted(by_pod)]


def truth(
    source: DatasetSource,
    name: str,
    column: str,
    time: str = "finish",
    finished: bool = True,
    dtype: type = np.float64,
) -> npt.NDArray[Any]:
    """Ground-truth values of ``column`` for the requests the window's counters recorded."""
    dep, window, requests = deployment(source, name), window_of(source), requests_of(source)
    values = []
    for replica, offsets in zip(dep.replicas, scrapes(source, dep, window), strict=True):
        rows = requests[requests["replica"] == replica]
        keep = (rows[time] > offsets[0]) & (rows[time] <= offsets[-1]) & rows[column].notna()
        if finished:
            keep &= rows["outcome"] == "finished"
        values.append(rows.loc[keep, column].to_numpy(dtype=dtype))
    return np.concatenate(values)


def true_quantile(values: Floats, q: float) -> float:
    """The smallest observation with at least q of the observations at or below it."""
    ordered = np.sort(values)
    return float(ordered[np.searchsorted(np.arange(1, ordered.size + 1), q * ordered.size)])
