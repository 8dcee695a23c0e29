"""Ground truth: one record per simulated request, the table ``requests.csv`` holds.

Times are seconds from the window start (negative during warm-up), kept to
the microsecond; durations are differences of those times, also to the
microsecond (TPOT to the nanosecond), so the CSV holds exactly the values
the series were made from. Columns:

============================  ================================================================
``deployment``, ``replica``   where it ran; ``engine`` is the series' ``engine`` label
``traffic_class``             the scenario's traffic class
``arrival``                   at the API server (it reaches the engine a few ms later,
                              after tokenisation)
``admitted``                  first taken from the queue (prefix-cache lookup)
``scheduled``                 first computed (after any external KV fetch)
``first_token``, ``finish``   first output token; end of the request's life
``outcome``                   finished (vLLM recorded its finished-request stats), aborted
                              (by the client), lost (server restart), rejected (server
                              down), unfinished (in flight when the simulation stopped)
``finish_reason``             stop, length, error (finished); abort (aborted, lost);
                              error (rejected); empty (NaN) when unfinished
``prompt_tokens``             prompt length; ``max_tokens`` empty (NaN) when unset
``output_tokens``             tokens actually produced
``local_hit_tokens``          local prefix-cache hits; ``external_hit_tokens`` external KV hits
                              (the rest of the prompt was prefilled)
``queue_time``                from reaching the engine to ``scheduled`` (vLLM's queue time)
``prefill_time``              first_token - scheduled
``decode_time``               finish - first_token
``ttft``                      first_token - arrival
``tpot``                      decode_time / (output_tokens - 1), 0 for one token or fewer
``e2e``                       finish - arrival
``decode_steps``              decode steps done; with speculative decoding each is a draft
                              of ``num_speculative_tokens`` and ``spec_accepted_tokens`` were
                              accepted (0 without)
``preemptions``               times the request was preempted
============================  ================================================================

vLLM records TTFT when the first token is produced (for every request that
got one); E2E, queue, prefill, decode, TPOT and the length histograms when a
request finishes, and only for finished requests: client aborts leave no
trace there (they are in this table). Requests that ended before the
emitted span (during warm-up) are left out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from inference_obs.samples import Floats, Ints
from inference_obs.simulate.arrivals import PlannedEnd, Requests
from inference_obs.simulate.scenario import DeploymentSpec
from inference_obs.simulate.trace import EngineRun, Outcome

__all__ = ["OUTCOMES", "published_requests", "request_table"]

OUTCOMES: dict[Outcome, str] = {
    Outcome.FINISHED: "finished",
    Outcome.ABORTED: "aborted",
    Outcome.LOST: "lost",
    Outcome.REJECTED: "rejected",
    Outcome.UNFINISHED: "unfinished",
}
_PLANNED = {PlannedEnd.STOP: "stop", PlannedEnd.LENGTH: "length", PlannedEnd.ERROR: "error"}
# Times and durations to the microsecond, TPOT to the nanosecond: short, exact CSV text.
_TIME_DECIMALS, _TPOT_DECIMALS = 6, 9


def _times(values: Floats) -> Floats:
    out: Floats = np.round(values, _TIME_DECIMALS)
    return out


def _reasons(outcome: Ints, planned: Ints) -> list[str | None]:
    """``finish_reason`` of each request: vLLM's for finished ones, else what the client saw."""
    out: list[str | None] = []
    for code, plan in zip(outcome.tolist(), planned.tolist(), strict=True):
        if code == Outcome.FINISHED:
            out.append(_PLANNED[PlannedEnd(plan)])
        elif code in (Outcome.ABORTED, Outcome.LOST):
            out.append("abort")
        elif code == Outcome.REJECTED:
            out.append("error")
        else:
            out.append(None)
    return out


def request_table(spec: DeploymentSpec, requests: Requests, runs: list[EngineRun]) -> pd.DataFrame:
    """Ground truth of every request of a deployment, in arrival order (see the module)."""
    if not runs:
        return pd.DataFrame()
    ids = np.concatenate([r.ids for r in runs])

    def gather(field: str) -> npt.NDArray[Any]:
        return np.concatenate([getattr(r, field) for r in runs])

    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    outcome = gather("outcome")[order]
    first, finish = _times(gather("first_token")[order]), _times(gather("finish")[order])
    scheduled = _times(gather("scheduled")[order])
    produced = gather("produced_tokens")[order]
    steps = gather("decode_steps_done")[order]
    arrival, engine_arrival = _times(requests.arrival[ids]), _times(requests.engine_arrival[ids])
    reason = _reasons(outcome, requests.planned_end[ids])
    decode = _times(finish - first)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(produced > 1, decode / (produced - 1), 0.0)
    tpot = np.where(np.isnan(decode), np.nan, np.round(tpot, _TPOT_DECIMALS))
    k = spec.speculative_tokens
    max_tokens = requests.max_tokens[ids]
    table = pd.DataFrame(
        {
            "deployment": spec.name,
            "replica": np.asarray(spec.replicas, dtype=object)[requests.replica[ids]],
            "engine": requests.engine[ids],
            "traffic_class": np.asarray([c.name for c in spec.workload], dtype=object)[
                requests.traffic_class[ids]
            ],
            "arrival": arrival,
            "admitted": _times(gather("admitted")[order]),
            "scheduled": scheduled,
            "first_token": first,
            "finish": finish,
            "outcome": [OUTCOMES[Outcome(o)] for o in outcome],
            "finish_reason": reason,
            "prompt_tokens": requests.prompt_tokens[ids],
            "max_tokens": np.where(max_tokens > 0, max_tokens, np.nan),
            "output_tokens": produced,
            "local_hit_tokens": requests.local_hit_tokens[ids],
            "external_hit_tokens": requests.external_hit_tokens[ids],
            "queue_time": _times(scheduled - engine_arrival),
            "prefill_time": _times(first - scheduled),
            "decode_time": decode,
            "ttft": _times(first - arrival),
            "tpot": tpot,
            "e2e": _times(finish - arrival),
            "decode_steps": steps,
            "spec_accepted_tokens": np.maximum(produced - 1 - steps, 0) * (1 if k else 0),
            "preemptions": gather("preemptions")[order],
        }
    )
    for column in ("e2e", "decode_time", "tpot"):
        table.loc[outcome == Outcome.REJECTED, column] = np.nan
    return table


def published_requests(table: pd.DataFrame, since: float) -> pd.DataFrame:
    """The rows ``requests.csv`` keeps: requests not over before ``since`` (the first sample)."""
    return table[~(table["finish"] < since)].reset_index(drop=True)
