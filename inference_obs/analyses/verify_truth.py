"""Check a report's latency quantile bounds against a dataset's ground-truth requests.

Where a dataset ships ``requests.csv`` (every simulated one does), the true
quantile of the window's requests is known: for TTFT the requests whose first
token falls in the window, for the finish-time histograms the finished
requests whose finish falls in it (vLLM leaves client aborts out of them).
Each published quantile bound is one row: ``ok`` when the truth lies inside,
``outside`` when not; a bound annotated as holding for the counted requests
only (``bounds_counted_requests``) and missing the window's truth is
``counted_only``, which is said, not failed. The point estimate and its error
are in the row for the reader; an interpolated estimate is not pass/fail.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from inference_obs.analyses.latency import COUNTED_ONLY, QUANTILES, latency as latency_analysis
from inference_obs.analyses.run import run_one
from inference_obs.analyses.verify_rows import RowStatus, VerifyRow
from inference_obs.deployment import Deployment
from inference_obs.samples import Window
from inference_obs.source.base import Source

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


def truth_rows(
    source: Source, deployments: Sequence[Deployment], window: Window, requests: pd.DataFrame
) -> list[VerifyRow]:
    """One row per latency quantile bound of each deployment, checked against ``requests``.

    ``requests`` holds the ground truth, times in seconds after the window's
    start (the simulator's ``requests.csv``).
    """
    rows: list[VerifyRow] = []
    for deployment in deployments:
        ran = run_one(source, deployment, window, analyses=[latency_analysis])
        mine = requests[requests["deployment"] == deployment.name]
        for m in ran.measurements():
            metric, _, label = m.statistic.rpartition("_")
            q = dict(QUANTILES).get(label)
            if metric not in COLUMNS or q is None or m.bounds is None:
                continue
            column, event, finished = COLUMNS[metric]
            keep = (mine[event] > 0) & (mine[event] <= window.seconds) & mine[column].notna()
            if finished:
                keep &= mine["outcome"] == "finished"
            values = mine.loc[keep, column].to_numpy(np.float64)
            if not values.size:
                continue
            truth = _true_quantile(values, q)
            low, high = m.bounds.lower, m.bounds.upper
            inside = low <= truth <= high
            status = RowStatus.OK if inside else RowStatus.OUTSIDE
            if not inside and any(a.kind == COUNTED_ONLY for a in m.annotations):
                status = RowStatus.COUNTED_ONLY
            where = "inside" if inside else "outside"
            reason = (
                f"truth {truth:.4g} {m.unit} {where} [{low:g}, {high:g}] "
                f"({values.size:,} requests in the window)"
            )
            rows.append(
                VerifyRow(
                    key=f"truth.{m.key}",
                    published=m.value,
                    recomputed=truth,
                    difference=None if m.value is None else truth - m.value,
                    status=status,
                    reason=reason,
                )
            )
    return rows
