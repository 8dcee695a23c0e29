"""The emitted series agree exactly with the ground truth they were made from.

For each deployment and each family, the increase of a counter (or of a
histogram's ``_sum``/``_count``) between the first and last samples inside
the window equals the total of what the ground truth says was recorded in
between: request records (``requests.csv``, as read back) for per-request
quantities, the engines' step records for per-step ones. Means agree to
1e-9, counts exactly, and each true quantile lies in the bucket interval
``quantile_bounds`` gives for the merged bucket increases.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

from inference_obs.engine.histograms import parse_le, quantile_bounds
from inference_obs.metrics import vllm
from inference_obs.samples import Floats
from inference_obs.simulate.trace import EngineRun, Records

from .conftest import SHIPPED, Observed

# family -> (event time column, value column, only requests vLLM finished?)
PER_REQUEST: dict[str, tuple[str, str, bool]] = {
    vllm.TIME_TO_FIRST_TOKEN.name: ("first_token", "ttft", False),
    vllm.REQUEST_TIME_PER_OUTPUT_TOKEN.name: ("finish", "tpot", True),
    vllm.E2E_REQUEST_LATENCY.name: ("finish", "e2e", True),
    vllm.REQUEST_QUEUE_TIME.name: ("finish", "queue_time", True),
    vllm.REQUEST_PREFILL_TIME.name: ("finish", "prefill_time", True),
    vllm.REQUEST_DECODE_TIME.name: ("finish", "decode_time", True),
    vllm.REQUEST_PROMPT_TOKENS.name: ("finish", "prompt_tokens", True),
    vllm.REQUEST_GENERATION_TOKENS.name: ("finish", "output_tokens", True),
    vllm.REQUEST_PARAMS_MAX_TOKENS.name: ("finish", "max_tokens", True),
}
PER_STEP: dict[str, Callable[[EngineRun], Records]] = {
    vllm.INTER_TOKEN_LATENCY.name: lambda run: run.inter_token_latency,
    vllm.ITERATION_TOKENS.name: lambda run: run.iteration_tokens,
}
QUANTILES = (0.01, 0.25, 0.5, 0.9, 0.95, 0.99)


@dataclass
class Span:
    """One engine's series and the span (first, last] of its samples inside the window."""

    pod: str
    engine: str
    replica: str
    first: float
    last: float
    rows: pd.DataFrame
    run: EngineRun


@dataclass
class Tally:
    emitted: float = 0.0
    values: list[Floats] = field(default_factory=list)
    weights: list[Floats] = field(default_factory=list)


def _spans(data: Observed, deployment: str) -> list[Span]:
    scenario = data.sim.scenario
    spec = next(d for d in scenario.deployments if d.name == deployment)
    table = data.dataset.requests
    assert table is not None
    out = []
    for run in data.sim.engines[deployment]:
        pod, engine = spec.pod(run.replica), str(run.engine)
        (count,) = data.select(f"{vllm.E2E_REQUEST_LATENCY.name}_count", pod=pod, engine=engine)
        inside = (count.t_ms >= data.start_ms) & (count.t_ms <= data.end_ms)
        offsets = data.offsets(count)[inside]
        replica = spec.replicas[run.replica]
        rows = table[(table["replica"] == replica) & (table["engine"] == run.engine)]
        out.append(Span(pod, engine, replica, offsets[0], offsets[-1], rows, run))
    return out


def _increase(data: Observed, span: Span, name: str, **labels: str) -> float:
    (series,) = data.select(name, pod=span.pod, engine=span.engine, **labels)
    offsets = data.offsets(series)
    first, last = np.flatnonzero(offsets == span.first)[0], np.flatnonzero(offsets == span.last)[0]
    return float(series.values[last] - series.values[first])


def _truth(span: Span, name: str) -> tuple[Floats, Floats]:
    """Values and weights of what the ground truth says ``name`` observed in the span."""
    if name in PER_STEP:
        records = PER_STEP[name](span.run)
        inside = (records.time > span.first) & (records.time <= span.last)
        return records.value[inside], records.weight[inside]
    time, value, finished_only = PER_REQUEST[name]
    rows = span.rows
    keep = (rows[time] > span.first) & (rows[time] <= span.last) & rows[value].notna()
    if finished_only:
        keep &= rows["outcome"] == "finished"
    values = rows.loc[keep, value].to_numpy(dtype=np.float64)
    return values, np.ones(values.size)


def _histograms(data: Observed) -> set[str]:
    return {s.name.removesuffix("_count") for s in data.series if s.name.endswith("_count")}


def _true_quantile(values: Floats, weights: Floats, q: float) -> float:
    """The smallest observation with at least q of the weight at or below it."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, q * cumulative[-1])])


@pytest.mark.parametrize("scenario", SHIPPED)
def test_histograms_agree_with_ground_truth(scenario: str, shipped: dict[str, Observed]) -> None:
    data = shipped[scenario]
    names = _histograms(data)
    assert names <= set(PER_REQUEST) | set(PER_STEP), names - set(PER_REQUEST) - set(PER_STEP)
    checked = 0
    for deployment in (d.name for d in data.sim.scenario.deployments):
        spans = _spans(data, deployment)
        for name in sorted(names):
            total, count = 0.0, 0.0
            buckets: dict[str, float] = {}
            values, weights = [], []
            for span in spans:
                total += _increase(data, span, f"{name}_sum")
                count += _increase(data, span, f"{name}_count")
                v, w = _truth(span, name)
                values.append(v)
                weights.append(w)
                for series in data.select(f"{name}_bucket", pod=span.pod, engine=span.engine):
                    le = series.labels["le"]
                    buckets[le] = buckets.get(le, 0.0) + _increase(data, span, series.name, le=le)
            v, w = np.concatenate(values), np.concatenate(weights)
            assert count == w.sum(), (deployment, name)
            if not count:
                continue
            truth = float(np.sum(v * w) / w.sum())
            assert math.isclose(total / count, truth, rel_tol=1e-9, abs_tol=1e-12), (
                deployment,
                name,
            )
            checked += 1
            if buckets:
                les = sorted(buckets, key=lambda text: float(parse_le([text])[0]))
                upper = parse_le(les)
                counts = np.array([buckets[le] for le in les])
                assert counts[-1] == count
                groups = np.zeros(upper.size, dtype=np.int64)
                for q in QUANTILES:
                    lo, hi = quantile_bounds(q, upper, counts, groups, 1)
                    assert lo[0] <= _true_quantile(v, w, q) <= hi[0], (deployment, name, q)
    assert checked >= 5


def _counter_truth(span: Span, name: str, labels: dict[str, str], k: int) -> float:
    rows = span.rows
    run = span.run

    def requests(time: str, amount: pd.Series, where: pd.Series | None = None) -> float:
        keep = (rows[time] > span.first) & (rows[time] <= span.last)
        if where is not None:
            keep &= where
        return float(amount[keep].sum())

    def steps(records: Records, factor: float = 1.0) -> float:
        inside = (records.time > span.first) & (records.time <= span.last)
        return float((records.value * records.weight)[inside].sum()) * factor

    prompt, local = rows["prompt_tokens"], rows["local_hit_tokens"]
    external = rows["external_hit_tokens"]
    by_source = {
        "local_compute": prompt - local - external,
        "local_cache_hit": local,
        "external_kv_transfer": external,
    }
    one = pd.Series(1.0, index=rows.index)
    table: dict[str, Callable[[], float]] = {
        vllm.PROMPT_TOKENS.name: lambda: requests("first_token", prompt),
        vllm.PROMPT_TOKENS_BY_SOURCE.name: lambda: requests(
            "first_token", by_source[labels.get("source", "")]
        ),
        vllm.REQUEST_SUCCESS.name: lambda: requests(
            "finish",
            one,
            (rows["outcome"] == "finished") & (rows["finish_reason"] == labels["finished_reason"]),
        ),
        vllm.PREFIX_CACHE_QUERIES.name: lambda: requests("admitted", prompt),
        vllm.PREFIX_CACHE_HITS.name: lambda: requests("admitted", local),
        vllm.EXTERNAL_PREFIX_CACHE_QUERIES.name: lambda: requests("admitted", prompt - local),
        vllm.EXTERNAL_PREFIX_CACHE_HITS.name: lambda: requests("admitted", external),
        vllm.GENERATION_TOKENS.name: lambda: steps(run.generation_tokens),
        vllm.NUM_PREEMPTIONS.name: lambda: steps(run.preemption_events),
        vllm.SPEC_DECODE_NUM_DRAFTS.name: lambda: steps(run.spec_drafts),
        vllm.SPEC_DECODE_NUM_DRAFT_TOKENS.name: lambda: steps(run.spec_drafts, k),
        vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS.name: lambda: steps(run.spec_accepted),
    }
    return table[name]()


@pytest.mark.parametrize("scenario", SHIPPED)
def test_counters_agree_with_ground_truth(scenario: str, shipped: dict[str, Observed]) -> None:
    data = shipped[scenario]
    checked = set()
    for spec in data.sim.scenario.deployments:
        for span in _spans(data, spec.name):
            for series in data.series:
                if not (series.name.startswith("vllm:") and series.name.endswith("_total")):
                    continue
                if (series.labels.get("pod"), series.labels.get("engine")) != (
                    span.pod,
                    span.engine,
                ):
                    continue
                labels = {
                    k: v for k, v in series.labels.items() if k in ("source", "finished_reason")
                }
                emitted = _increase(data, span, series.name, **labels)
                truth = _counter_truth(span, series.name, labels, spec.speculative_tokens)
                assert emitted == pytest.approx(truth, rel=1e-12, abs=1e-9), (series.name, labels)
                checked.add(series.name)
    assert {
        vllm.PROMPT_TOKENS.name,
        vllm.GENERATION_TOKENS.name,
        vllm.REQUEST_SUCCESS.name,
    } <= checked


@pytest.mark.parametrize("scenario", SHIPPED)
def test_generated_tokens_are_the_requests_outputs(
    scenario: str, shipped: dict[str, Observed]
) -> None:
    sim = shipped[scenario].sim
    for spec in sim.scenario.deployments:
        runs = sim.engines[spec.name]
        generated = sum(run.generation_tokens.total() for run in runs)
        table = sim.requests[sim.requests["deployment"] == spec.name]
        assert generated == table["output_tokens"].sum()
        if spec.speculative_tokens:
            accepted = sum(run.spec_accepted.total() for run in runs)
            assert accepted == table["spec_accepted_tokens"].sum()


@pytest.mark.parametrize("scenario", SHIPPED)
def test_inter_token_latencies_add_up_to_decode_time(
    scenario: str, shipped: dict[str, Observed]
) -> None:
    sim = shipped[scenario].sim
    for spec in sim.scenario.deployments:
        runs = sim.engines[spec.name]
        itl = sum(run.inter_token_latency.total() for run in runs)
        steps = sum(run.inter_token_latency.weight.sum() for run in runs)
        decode = np.concatenate([run.finish - run.first_token for run in runs])
        done = np.concatenate([run.outcome == 0 for run in runs])
        unfinished = sum(int((run.outcome != 0).sum()) for run in runs)
        table = sim.requests[sim.requests["deployment"] == spec.name]
        assert steps == table["decode_steps"].sum()
        if not unfinished:
            assert itl == pytest.approx(float(np.sum(decode[done])), rel=1e-9)
