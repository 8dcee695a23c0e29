"""Recompute a simulated dataset's request figures from its ground truth, ``requests.csv``.

The simulator's ``realised`` request figures (:mod:`inference_obs.simulate.aggregates`)
are statistics of the request records over the window; where the dataset
ships those records they are recomputed here, by the same definitions written
out again (so a changed definition on either side shows as a difference):

- finished-request figures over the requests vLLM finished (``outcome``
  ``finished``) whose ``finish`` falls in the window (after 0, at or before
  its length, seconds after its start); TTFT over every request whose
  ``first_token`` falls in it; client aborts over aborted requests finishing
  in it;
- quantiles by numpy's default (linear interpolation between order statistics);
- cache hit rates over the requests admitted in the window (hit tokens over
  prompt tokens; the external rate over the tokens the local cache missed,
  null where no external hit was recorded);
- mean in-flight requests: each request's time between arrival and finish
  (unfinished ones to the window's end), clipped to the window, over its length.

Engine figures (generated tokens, inter-token latency, speculative acceptance,
preemptions) count engine steps, which ``requests.csv`` does not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FROM_REQUESTS", "request_figures"]

_SUMMARIES = {
    "ttft_seconds": "ttft",
    "tpot_seconds": "tpot",
    "e2e_seconds": "e2e",
    "queue_seconds": "queue_time",
    "prefill_seconds": "prefill_time",
    "decode_seconds": "decode_time",
}
#: ``realised`` statistics that :func:`request_figures` recomputes.
FROM_REQUESTS = frozenset(
    {
        *_SUMMARIES,
        "requests_finished",
        "finish_reason_shares",
        "client_aborts_unrecorded",
        "mean_prompt_tokens",
        "mean_output_tokens",
        "mean_max_tokens",
        "share_max_tokens_le_20",
        "share_max_tokens_le_50",
        "prefix_cache_hit_rate",
        "external_cache_hit_rate",
        "mean_in_flight_requests",
    }
)


def _inside(times: pd.Series, seconds: float) -> pd.Series:
    return (times > 0) & (times <= seconds)


def _summary(values: pd.Series) -> dict[str, float | None]:
    data = values.dropna().to_numpy(np.float64)
    if not data.size:
        return {"mean": None, "p50": None, "p95": None, "p99": None}
    quantiles = {f"p{q}": float(np.quantile(data, q / 100)) for q in (50, 95, 99)}
    return {"mean": float(data.mean()), **quantiles}


def _mean(values: pd.Series) -> float | None:
    return float(values.mean()) if values.size else None


def request_figures(requests: pd.DataFrame, seconds: float) -> dict[str, Mapping[str, object]]:
    """Each deployment's request figures over a window ``seconds`` long, by ``realised`` name.

    Parameters
    ----------
    requests
        The ground-truth records (``requests.csv``), times in seconds after the
        window's start.
    seconds
        The window's length, seconds.
    """
    out: dict[str, Mapping[str, object]] = {}
    for name, table in requests.groupby("deployment", sort=True):
        done = table[(table["outcome"] == "finished") & _inside(table["finish"], seconds)]
        first = table[_inside(table["first_token"], seconds)]
        admitted = table[_inside(table["admitted"], seconds)]
        limits = done["max_tokens"].dropna()
        prompt = float(admitted["prompt_tokens"].sum())
        missed = float((admitted["prompt_tokens"] - admitted["local_hit_tokens"]).sum())
        external = float(admitted["external_hit_tokens"].sum())
        arrival = table["arrival"].clip(lower=0, upper=seconds)
        finish = table["finish"].fillna(seconds).clip(lower=0, upper=seconds)
        aborted = (table["outcome"] == "aborted") & _inside(table["finish"], seconds)
        shares = done["finish_reason"].value_counts(normalize=True)
        figures: dict[str, object] = {
            "requests_finished": float(len(done)),
            "finish_reason_shares": {str(k): float(v) for k, v in shares.items()},
            "client_aborts_unrecorded": float(aborted.sum()),
            "mean_prompt_tokens": _mean(done["prompt_tokens"]),
            "mean_output_tokens": _mean(done["output_tokens"]),
            "mean_max_tokens": _mean(limits),
            "share_max_tokens_le_20": _mean(limits <= 20),
            "share_max_tokens_le_50": _mean(limits <= 50),
            "prefix_cache_hit_rate": float(admitted["local_hit_tokens"].sum()) / prompt
            if prompt
            else None,
            "external_cache_hit_rate": external / missed if missed and external else None,
            "mean_in_flight_requests": float((finish - arrival).clip(lower=0).sum()) / seconds,
        }
        for key, column in _SUMMARIES.items():
            figures[key] = _summary((first if key == "ttft_seconds" else done)[column])
        out[str(name)] = figures
    return out
