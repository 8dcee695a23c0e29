"""Check a report's latency means and quantile bounds against a dataset's ground truth.

Where a dataset ships ``requests.csv`` (every simulated one does), the true
quantile of the window's requests is known: for TTFT the requests whose first
token falls in the window, for the finish-time histograms the finished
requests whose finish falls in it (vLLM leaves client aborts out of them).
Each published quantile bound is one row: ``ok`` when the truth lies inside,
``outside`` when not; a bound annotated as holding for the counted requests
only (``bounds_counted_requests``) is checked against those requests
instead, as it says. Each latency mean is
compared with the mean of the requests the counters recorded (exact: the
counters' sums hold them all). The point estimate of a quantile and its error
are in the row for the reader; an interpolated estimate is not pass/fail.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from inference_obs.analyses.latency import (
    COUNTED_ONLY,
    METRICS,
    QUANTILES,
    latency as latency_analysis,
)
from inference_obs.analyses.run import run_one
from inference_obs.analyses.verify_rows import RowStatus, VerifyRow
from inference_obs.deployment import Deployment
from inference_obs.query import Selector
from inference_obs.reading.context import Source
from inference_obs.reading.measurement import Measurement
from inference_obs.samples import Window

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["truth_rows"]

#: latency metric -> (requests.csv column, the event that records it, finished requests only)
COLUMNS: dict[str, tuple[str, str, bool]] = {
    "ttft": ("ttft", "first_token", False),
    "tpot": ("tpot", "finish", True),
    "e2e": ("e2e", "finish", True),
    "queue": ("queue_time", "finish", True),
    "prefill": ("prefill_time", "finish", True),
    "decode": ("decode_time", "finish", True),
}


def _true_quantile(values: np.ndarray, q: float) -> float:
    """The smallest value with at least ``q`` of the values at or below it."""
    ordered = np.sort(values)
    return float(ordered[int(np.searchsorted(np.arange(1, ordered.size + 1), q * ordered.size))])


def _counted(
    source: Source, deployment: Deployment, window: Window, requests: pd.DataFrame, metric: str
) -> np.ndarray:
    """Ground-truth values of ``metric`` for the requests its counters recorded: per replica,
    those whose event falls after its first and at or before its last sample in the window.

    Replicas are matched to series by order: the manifest's replica names and the
    series' ``pod`` labels, both sorted, as the simulator names them.
    """
    column, event, finished = COLUMNS[metric]
    family = METRICS[metric][0]
    selector = Selector(family.series_name("count"), deployment.matchers)
    times: dict[str, np.ndarray] = {}
    for series in source.raw(selector, window):
        times.setdefault(series.labels.get("pod", ""), series.t_ms / 1000.0 - window.start_s)
    values = []
    for replica, pod in zip(sorted(deployment.replicas), sorted(times), strict=False):
        offsets = times[pod]
        rows = requests[requests["replica"] == replica]
        keep = (rows[event] > offsets[0]) & (rows[event] <= offsets[-1]) & rows[column].notna()
        if finished:
            keep &= rows["outcome"] == "finished"
        values.append(rows.loc[keep, column].to_numpy(np.float64))
    return np.concatenate(values) if values else np.zeros(0)


def _in_window(requests: pd.DataFrame, window: Window, metric: str) -> np.ndarray:
    """Ground-truth values of ``metric`` for the requests whose event falls in the window."""
    column, event, finished = COLUMNS[metric]
    keep = (requests[event] > 0) & (requests[event] <= window.seconds) & requests[column].notna()
    if finished:
        keep &= requests["outcome"] == "finished"
    out: np.ndarray = requests.loc[keep, column].to_numpy(np.float64)
    return out


def _row(key: str, published: float | None, status: RowStatus, reason: str) -> VerifyRow:
    return VerifyRow(key=key, published=published, recomputed=None, status=status, reason=reason)


def _mean_row(m: Measurement, counted: np.ndarray, rel_tol: float) -> VerifyRow:
    """The report's mean (a number) against the mean of the requests the counters recorded."""
    assert m.value is not None  # a mean without a number is "absent", decided before
    if not counted.size:
        why = "no request in requests.csv that the counters recorded"
        return _row(f"truth.{m.key}", m.value, RowStatus.MISSING, why)
    truth = float(counted.mean())
    tolerance = rel_tol * max(abs(m.value), abs(truth))
    difference = truth - m.value
    status = RowStatus.OK if abs(difference) <= tolerance else RowStatus.DIFFERS
    return VerifyRow(
        key=f"truth.{m.key}",
        published=m.value,
        recomputed=truth,
        difference=difference,
        tolerance=tolerance,
        status=status,
        reason=f"truth {truth:.6g} {m.unit}: the mean of the {counted.size:,} requests counted "
        "between each replica's first and last scrape",
    )


def _bound_row(m: Measurement, q: float, values: np.ndarray, counted_only: bool) -> VerifyRow:
    """A quantile's bounds against the true quantile of ``values``."""
    assert m.bounds is not None  # only bounded quantiles are checked
    if not values.size:
        return _row(f"truth.{m.key}", m.value, RowStatus.MISSING, "no such request in requests.csv")
    truth = _true_quantile(values, q)
    low, high = m.bounds.lower, m.bounds.upper
    inside = low <= truth <= high
    who = (
        "requests counted between the first and last scrape (as the bound says)"
        if counted_only
        else "requests in the window"
    )
    return VerifyRow(
        key=f"truth.{m.key}",
        published=m.value,
        recomputed=truth,
        difference=None if m.value is None else truth - m.value,
        status=RowStatus.OK if inside else RowStatus.OUTSIDE,
        reason=f"truth {truth:.4g} {m.unit} {'inside' if inside else 'outside'} "
        f"[{low:g}, {high:g}] ({values.size:,} {who}); the estimate is not checked",
    )


def truth_rows(
    source: Source,
    deployments: Sequence[Deployment],
    window: Window,
    requests: pd.DataFrame,
    rel_tol: float,
) -> list[VerifyRow]:
    """One row per latency mean and quantile bound of each deployment, against ``requests``.

    ``requests`` holds the ground truth, times in seconds after the window's
    start (the simulator's ``requests.csv``). Means are compared with the
    mean of the requests the counters recorded, within ``rel_tol`` (the
    counters' sums are exact, so only float rounding differs); inter-token
    latency is per engine step, which the records do not hold.
    """
    rows: list[VerifyRow] = []
    for deployment in deployments:
        ran = run_one(source, deployment, window, analyses=[latency_analysis])
        mine = requests[requests["deployment"] == deployment.name]
        for m in ran.measurements():
            metric, _, label = m.statistic.rpartition("_")
            if label != "mean" and label not in dict(QUANTILES):
                continue
            key = f"truth.{m.key}"
            if metric == "itl" and m.value is not None:
                why = "inter-token latency is per engine step; requests.csv holds requests"
                rows.append(_row(key, m.value, RowStatus.NOT_RECOMPUTABLE, why))
            elif metric not in COLUMNS:
                continue
            elif m.value is None or (label != "mean" and m.bounds is None):
                why = f"the report has no {'number' if m.value is None else 'bound'}"
                rows.append(_row(key, m.value, RowStatus.ABSENT, f"{why} ({m.status.value})"))
            elif label == "mean":
                values = _counted(source, deployment, window, mine, metric)
                rows.append(_mean_row(m, values, rel_tol))
            elif any(a.kind == COUNTED_ONLY for a in m.annotations):
                values = _counted(source, deployment, window, mine, metric)
                rows.append(_bound_row(m, dict(QUANTILES)[label], values, True))
            else:
                values = _in_window(mine, window, metric)
                rows.append(_bound_row(m, dict(QUANTILES)[label], values, False))
    return rows
