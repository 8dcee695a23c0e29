"""The headline numbers of a simulated observation, for ``aggregates.json``.

Two sections: ``targets``, the numbers of the observation the scenario is
shaped after (copied from the scenario file), and ``realised``, what the
simulation produced over the window, per deployment. Request figures come
from the ground truth (requests whose event falls inside the window, as vLLM
would have recorded them: finished-request figures over recorded requests
finishing in it, TTFT over first tokens in it); token, cache and
speculative-decoding figures from what the engines recorded; gauge and GPU
figures from the sampled series (sample-weighted, as a report reads them).
Means of an empty set are ``null``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from inference_obs.metrics import dcgm, vllm
from inference_obs.simulate.trace import Records

if TYPE_CHECKING:
    from inference_obs.simulate.run import Simulation

__all__ = ["headline_numbers"]

_DIGITS = 6  # significant digits kept in aggregates.json


def _number(value: float) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{_DIGITS}g}")


def _summary(values: pd.Series) -> dict[str, float | None]:
    data = values.dropna().to_numpy(dtype=np.float64)
    if not data.size:
        return {"mean": None, "p50": None, "p95": None, "p99": None}
    return {
        "mean": _number(float(data.mean())),
        **{f"p{q}": _number(float(np.quantile(data, q / 100))) for q in (50, 95, 99)},
    }


def _weighted_summary(values: npt.NDArray[Any], weights: npt.NDArray[Any]) -> dict[str, Any]:
    """Mean and quantiles of observations ``values`` made ``weights`` times each."""
    if not weights.sum():
        return {"mean": None, "p50": None, "p95": None, "p99": None}
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order]) / weights.sum()
    quantiles = {
        f"p{q}": _number(float(values[order][np.searchsorted(cumulative, q / 100)]))
        for q in (50, 95, 99)
    }
    return {"mean": _number(float(np.sum(values * weights) / weights.sum())), **quantiles}


def _in_window(times: pd.Series | npt.NDArray[Any], duration: float) -> npt.NDArray[Any]:
    values = np.asarray(times, dtype=np.float64)
    out: npt.NDArray[Any] = (values > 0) & (values <= duration)
    return out


def _requests(table: pd.DataFrame, duration: float) -> dict[str, Any]:
    done = table[(table["outcome"] == "finished") & _in_window(table["finish"], duration)]
    first = table[_in_window(table["first_token"], duration)]
    limits = done["max_tokens"].dropna()
    admitted = table[_in_window(table["admitted"], duration)]
    local_queries = float(admitted["prompt_tokens"].sum())
    external_queries = float((admitted["prompt_tokens"] - admitted["local_hit_tokens"]).sum())
    arrival = table["arrival"].clip(lower=0, upper=duration)
    finish = table["finish"].fillna(duration).clip(lower=0, upper=duration)
    reasons = done["finish_reason"].value_counts(normalize=True).sort_index()
    return {
        "requests_finished": len(done),
        "finish_reason_shares": {k: _number(float(v)) for k, v in reasons.items()},
        "client_aborts_unrecorded": int(
            ((table["outcome"] == "aborted") & _in_window(table["finish"], duration)).sum()
        ),
        "ttft_seconds": _summary(first["ttft"]),
        "tpot_seconds": _summary(done["tpot"]),
        "e2e_seconds": _summary(done["e2e"]),
        "queue_seconds": _summary(done["queue_time"]),
        "prefill_seconds": _summary(done["prefill_time"]),
        "decode_seconds": _summary(done["decode_time"]),
        "mean_prompt_tokens": _number(float(done["prompt_tokens"].mean())),
        "mean_output_tokens": _number(float(done["output_tokens"].mean())),
        "mean_max_tokens": _number(float(limits.mean())) if limits.size else None,
        "share_max_tokens_le_20": _number(float((limits <= 20).mean())) if limits.size else None,
        "share_max_tokens_le_50": _number(float((limits <= 50).mean())) if limits.size else None,
        "prefix_cache_hit_rate": _number(float(admitted["local_hit_tokens"].sum()) / local_queries)
        if local_queries
        else None,
        "external_cache_hit_rate": _number(
            float(admitted["external_hit_tokens"].sum()) / external_queries
        )
        if external_queries and admitted["external_hit_tokens"].sum()
        else None,
        "mean_in_flight_requests": _number(
            float((finish - arrival).clip(lower=0).sum()) / duration
        ),
    }


def _engines(sim: Simulation, name: str, duration: float, replicas: int) -> dict[str, Any]:
    runs = sim.engines[name]

    def total(field: str) -> float:
        """What the engines recorded in the window, summed."""
        records: list[Records] = [getattr(run, field) for run in runs]
        return float(sum((r.value * r.weight)[_in_window(r.time, duration)].sum() for r in records))

    itl = [run.inter_token_latency for run in runs]
    values = np.concatenate([r.value[_in_window(r.time, duration)] for r in itl])
    weights = np.concatenate([r.weight[_in_window(r.time, duration)] for r in itl])
    generated = total("generation_tokens")
    drafts, accepted = total("spec_drafts"), total("spec_accepted")
    return {
        "generated_tokens": _number(generated),
        "output_tokens_per_second": _number(generated / duration),
        "output_tokens_per_second_per_replica": _number(generated / duration / replicas),
        "mean_acceptance_length": _number(1 + accepted / drafts) if drafts else None,
        "preemptions": _number(total("preemption_events")),
        "inter_token_latency_seconds": _weighted_summary(values, weights),
    }


def _sampled(sim: Simulation, pods: set[str], start: float, end: float) -> dict[str, Any]:
    def values(name: str, **labels: str) -> npt.NDArray[Any]:
        picked = [
            s.values[(s.timestamps >= start) & (s.timestamps <= end)]
            for s in sim.series
            if s.name == name
            and s.labels.get("pod") in pods
            and all(s.labels.get(k) == v for k, v in labels.items())
        ]
        return np.concatenate(picked) if picked else np.zeros(0)

    def peak(data: npt.NDArray[Any]) -> float | None:
        return _number(float(data.max())) if data.size else None

    def mean(data: npt.NDArray[Any]) -> float | None:
        return _number(float(data.mean())) if data.size else None

    waiting = vllm.NUM_REQUESTS_WAITING_BY_REASON.name
    return {
        "max_sampled_running": peak(values(vllm.NUM_REQUESTS_RUNNING.name)),
        "max_sampled_waiting": peak(values(vllm.NUM_REQUESTS_WAITING.name)),
        "max_sampled_waiting_capacity": peak(values(waiting, reason="capacity")),
        "max_sampled_waiting_deferred": peak(values(waiting, reason="deferred")),
        "gpu_util_mean_percent": mean(values(dcgm.GPU_UTIL.name)),
        "gpu_power_mean_watts": mean(values(dcgm.POWER_USAGE.name)),
        "gpu_dram_active_mean": mean(values(dcgm.PROF_DRAM_ACTIVE.name)),
        "gpu_tensor_active_mean": mean(values(dcgm.PROF_PIPE_TENSOR_ACTIVE.name)),
    }


def headline_numbers(sim: Simulation) -> dict[str, Any]:
    """``aggregates.json`` of a simulation: the scenario's targets and what was realised."""
    scenario = sim.scenario
    window = scenario.window.window()
    duration = scenario.window.duration
    realised: dict[str, Any] = {}
    for spec in scenario.deployments:
        table = sim.requests[sim.requests["deployment"] == spec.name]
        pods = {spec.pod(r) for r in range(len(spec.replicas))}
        realised[spec.name] = {
            **_requests(table, duration),
            **_engines(sim, spec.name, duration, len(spec.replicas)),
            **_sampled(sim, pods, window.start_s, window.end_s),
        }
    return {
        "synthetic": True,
        "note": (
            "realised: what the simulation produced in the window (see the inference_obs "
            "simulate.aggregates docstring for the definitions); targets: the numbers of the "
            "observation the scenario is shaped after"
        ),
        "window": {"start": window.start.isoformat(), "end": window.end.isoformat()},
        "targets": dict(scenario.targets),
        "realised": realised,
    }
