"""Accuracy of quantile estimates from merged buckets, against the simulator's ground truth.

Every bundled scenario is simulated at several seeds (none of those the
scenarios ship with, unless ``--seeds`` names them) and read as a dataset.
For P50/P90/P95/P99 of TTFT, E2E, TPOT, inter-token latency and queue time
of each deployment, three point estimates are compared with the true
quantile of the observations the window's counters recorded:

- ``promql``: Prometheus's ``histogram_quantile`` (linear interpolation),
  the value the latency analysis keeps as ``promql_value``;
- ``estimate``: the latency analysis's value
  (:func:`~inference_obs.engine.quantile_estimate.mean_constrained_quantile`);
- ``aiperf``: an estimator written from the published description of
  NVIDIA AIPerf's server-metrics percentiles: each bucket's mean position
  learned from scrape intervals in which only that bucket grew (else its
  midpoint), the ``+Inf`` bucket's mean back-calculated from the exact sum,
  the remaining difference to the exact sum spread over the finite buckets,
  observations placed evenly around each bucket's mean inside the bucket,
  and the percentile of those observations.

The error is ``|estimate - truth| / truth`` (truth 0, as a queue time often
is, is left out of relative errors and counted apart). The share of true
quantiles inside the analysis's ``bounds`` is printed too: it must be 1.

The truth is the smallest observation with at least ``q`` of them at or
below it (``inverted_cdf``, the observation a bucket search finds): for
requests, the rows of ``requests.csv`` whose event (first token for TTFT,
finish otherwise, finished requests only) falls in (first, last] of their
engine's samples in the window; for inter-token latency, the engines'
weighted records over the same spans.

Run from the repository root::

    python -m benchmarks.quantile_accuracy [--seeds-per-scenario 3] [--seeds 11 12]
        [--scenarios pro5000-vs-h20 ...]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from inference_obs.analyses.latency import QUANTILES, LatencyResult, latency, merged_buckets
from inference_obs.metrics import vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Matcher, Selector
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Bounds
from inference_obs.samples import Floats, Series, Window
from inference_obs.simulate.publish import write_simulation
from inference_obs.simulate.run import Simulation, run_scenario
from inference_obs.simulate.scenario import load_scenario, scenario_names
from inference_obs.source.dataset.source import DatasetSource

__all__ = ["Case", "aiperf_style_quantile", "cases", "main", "summary"]

#: metric -> (family, requests.csv column, event time column, finished requests only);
#: inter-token latency has no column: its truth is the engines' records.
METRICS: dict[str, tuple[Family, str, str, bool]] = {
    "ttft": (vllm.TIME_TO_FIRST_TOKEN, "ttft", "first_token", False),
    "e2e": (vllm.E2E_REQUEST_LATENCY, "e2e", "finish", True),
    "tpot": (vllm.REQUEST_TIME_PER_OUTPUT_TOKEN, "tpot", "finish", True),
    "itl": (vllm.INTER_TOKEN_LATENCY, "", "", False),
    "queue": (vllm.REQUEST_QUEUE_TIME, "queue_time", "finish", True),
}
ESTIMATORS = ("promql", "estimate", "aiperf")


@dataclass(frozen=True)
class Case:
    """One quantile of one histogram of one deployment, and each estimator's value."""

    scenario: str
    seed: int
    deployment: str
    metric: str
    q: float
    truth: float
    values: dict[str, float]
    lower: float
    upper: float

    def error(self, estimator: str) -> float | None:
        """Absolute relative error of ``estimator``; None for a true value of 0 or no value."""
        value = self.values[estimator]
        if self.truth == 0 or math.isnan(value):
            return None
        return abs(value - self.truth) / self.truth

    @property
    def held(self) -> bool:
        """Whether the bounds hold the true value."""
        return self.lower <= self.truth <= self.upper


def weighted_quantile(values: Floats, weights: Floats, q: float) -> float:
    """Smallest value with at least ``q`` of the total weight at or below it."""
    order = np.argsort(values, kind="stable")
    ordered, cumulative = values[order], np.cumsum(weights[order])
    index = int(np.searchsorted(cumulative, q * cumulative[-1] * (1 - 1e-12)))
    return float(ordered[min(index, ordered.size - 1)])


def _series(
    source: DatasetSource, name: str, matchers: Sequence[Matcher], window: Window
) -> list[Series]:
    return list(source.raw(Selector(name, tuple(matchers)), window))


def _spans(
    source: DatasetSource, family: Family, matchers: Sequence[Matcher], window: Window
) -> dict[tuple[str, str], tuple[float, float]]:
    """Per (pod, engine), (first, last] of its ``_count`` samples, seconds from the window start."""
    out = {}
    for s in _series(source, f"{family.name}_count", matchers, window):
        t = s.t_ms / 1000.0 - window.start_s
        out[(s.labels["pod"], s.labels.get("engine", "0"))] = (float(t[0]), float(t[-1]))
    return out


def _truth(
    sim: Simulation, source: DatasetSource, dep_name: str, metric: str, window: Window
) -> tuple[Floats, Floats]:
    """True values (and weights) the window's histogram of ``metric`` recorded."""
    family, column, time, finished = METRICS[metric]
    dep = next(d for d in source.dataset.manifest.deployments if d.name == dep_name)
    spec = next(d for d in sim.scenario.deployments if d.name == dep_name)
    spans = _spans(source, family, dep.matchers, window)
    values, weights = [], []
    if not column:
        for run in sim.engines[dep_name]:
            span = spans.get((spec.pod(run.replica), str(run.engine)))
            if span is not None:
                r = run.inter_token_latency
                inside = (r.time > span[0]) & (r.time <= span[1])
                values.append(r.value[inside])
                weights.append(r.weight[inside])
        return np.concatenate(values), np.concatenate(weights)
    requests = source.dataset.requests
    assert isinstance(requests, pd.DataFrame)
    rows = requests[requests["deployment"] == dep_name]
    for i, replica in enumerate(spec.replicas):
        for (pod, engine), (first, last) in spans.items():
            if pod != spec.pod(i):
                continue
            mine = rows[(rows["replica"] == replica) & (rows["engine"].astype(str) == engine)]
            keep = (mine[time] > first) & (mine[time] <= last) & mine[column].notna()
            if finished:
                keep &= mine["outcome"] == "finished"
            values.append(mine.loc[keep, column].to_numpy(np.float64))
    out = np.concatenate(values)
    return out, np.ones(out.size)


def _learned_means(
    source: DatasetSource,
    family: Family,
    matchers: Sequence[Matcher],
    window: Window,
    upper: Floats,
) -> Floats:
    """Each finite bucket's mean learned from scrape intervals in which only it grew (NaN
    where none did): the change of ``_sum`` over the change of ``_count`` there."""
    sums, counts = np.zeros(upper.size), np.zeros(upper.size)
    by_series: dict[tuple[str, str], dict[float, Floats]] = {}
    for s in _series(source, f"{family.name}_bucket", matchers, window):
        key = (s.labels["pod"], s.labels.get("engine", "0"))
        by_series.setdefault(key, {})[float(s.labels["le"])] = s.values
    totals = {
        (s.labels["pod"], s.labels.get("engine", "0")): s.values
        for s in _series(source, f"{family.name}_sum", matchers, window)
    }
    for key, buckets in by_series.items():
        if key not in totals:
            continue
        les = sorted(buckets)
        size = min(min(v.size for v in buckets.values()), totals[key].size)
        cumulative = np.stack([buckets[le][:size] for le in les])
        per_bucket = np.diff(np.vstack((np.zeros(size), cumulative)), axis=0)
        grew = np.diff(per_bucket, axis=1)
        dsum = np.diff(totals[key][:size])
        for j in np.flatnonzero(((grew > 0).sum(axis=0) == 1) & (grew >= 0).all(axis=0)):
            i = int(np.argmax(grew[:, j] > 0))
            if i < upper.size and les[i] == upper[i]:
                sums[i] += dsum[j]
                counts[i] += grew[i, j]
    with np.errstate(invalid="ignore", divide="ignore"):
        out: Floats = np.where(counts > 0, sums / counts, np.nan)
    return out


def aiperf_style_quantile(
    q: float, upper: Floats, cumulative: Floats, mean: float, learned: Floats
) -> float:
    """The estimate written from AIPerf's published description (see the module docstring)."""
    finite = upper.size - 1
    lower = np.concatenate(([0.0], upper[: finite - 1]))
    per_bucket = np.diff(np.concatenate(([0.0], cumulative)))
    n, n_inf = per_bucket[:finite], float(per_bucket[finite])
    total = float(cumulative[-1])
    if total <= 0:
        return math.nan
    means = np.where(np.isnan(learned[:finite]), (lower + upper[:finite]) / 2, learned[:finite])
    means = np.clip(means, lower, upper[:finite])
    target = mean * total
    inf_mean = float(upper[finite - 1])
    if n_inf > 0:
        inf_mean = max((target - float(np.sum(n * means))) / n_inf, float(upper[finite - 1]))
    left = target - float(np.sum(n * means)) - n_inf * inf_mean
    occupied = float(np.sum(n))
    if occupied > 0:
        means = np.clip(means + left / occupied, lower, upper[:finite])
    # Observations placed evenly around each bucket's mean, as wide as the bucket allows.
    scale = min(1.0, 100_000 / total)
    parts = []
    for lo, hi, m, k in zip(lower, upper[:finite], means, n, strict=True):
        count = round(k * scale)
        if count:
            half = min(m - lo, hi - m)
            parts.append(np.linspace(m - half, m + half, count + 2)[1:-1])
    count = round(n_inf * scale)
    if count:
        half = inf_mean - float(upper[finite - 1])
        parts.append(np.linspace(inf_mean - half, inf_mean + half, count + 2)[1:-1])
    observations = np.concatenate(parts) if parts else np.zeros(0)
    return float(np.percentile(observations, q * 100)) if observations.size else math.nan


def _seed_cases(scenario: str, seed: int, out: Path) -> list[Case]:
    """Every quantile case of one scenario simulated at one seed (written under ``out``)."""
    sim = run_scenario(scenario, seed)
    write_simulation(sim, out)
    source = DatasetSource(out)
    window = source.dataset.manifest.window.window()
    found = []
    for dep in source.dataset.manifest.deployments:
        result: LatencyResult = latency(source, dep, window)
        for metric, (family, *_) in METRICS.items():
            summary = getattr(result, metric)
            observed, weights = _truth(sim, source, dep.name, metric, window)
            quantiles = [(label, q, getattr(summary, label)) for label, q in QUANTILES]
            if not observed.size or any(
                m.bounds is None or m.value is None for _, _, m in quantiles
            ):
                continue
            mean = summary.mean.value or 0.0
            buckets = merged_buckets(Reading(source, dep, window, "latency"), family)
            upper, cumulative = np.array(buckets.upper), np.array(buckets.counts)
            learned = _learned_means(source, family, dep.matchers, window, upper)
            for _, q, m in quantiles:
                promql = m.provenance.promql_value
                assert m.bounds is not None
                aiperf = aiperf_style_quantile(q, upper, cumulative, mean, learned)
                values = {
                    "promql": m.value if promql is None else promql,
                    "estimate": m.value,
                    "aiperf": aiperf,
                }
                truth = weighted_quantile(observed, weights, q)
                found.append(
                    Case(scenario, seed, dep.name, metric, q, truth, values, *_edges(m.bounds))
                )
    return found


def _edges(bounds: Bounds) -> tuple[float, float]:
    return bounds.lower, bounds.upper


def cases(scenarios: Sequence[str], seeds: Sequence[int]) -> list[Case]:
    """Every case of ``scenarios`` at each of ``seeds``."""
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in scenarios:
            for seed in seeds:
                found += _seed_cases(scenario, seed, Path(tmp) / f"{scenario}-{seed}")
    return found


def _median_error(picked: Sequence[Case], estimator: str) -> float | None:
    errors = [e for c in picked if (e := c.error(estimator)) is not None]
    return statistics.median(errors) if errors else None


def summary(found: Sequence[Case]) -> str:
    """Median absolute relative error per quantile level (then per metric) and estimator, as
    Markdown tables, and the values read where the truth is 0."""
    levels = [(label.upper(), q) for label, q in QUANTILES] + [("all", math.nan)]
    rows = [(n, [c for c in found if math.isnan(q) or c.q == q]) for n, q in levels]
    lines = _table("quantile", rows)
    metrics = sorted({c.metric for c in found}, key=list(METRICS).index)
    lines += ["", *_table("metric", [(m, [c for c in found if c.metric == m]) for m in metrics])]
    zero = [c for c in found if c.truth == 0]
    if zero:
        values = ", ".join(
            f"{e} {statistics.median(c.values[e] for c in zero):.3g}" for e in ESTIMATORS
        )
        lines += ["", f"Truth 0 ({len(zero)} cases, queue time): median value read: {values}"]
    return "\n".join(lines)


def _table(title: str, rows: Sequence[tuple[str, Sequence[Case]]]) -> list[str]:
    lines = [f"| {title} | cases | " + " | ".join(ESTIMATORS) + " | bounds hold |"]
    lines.append("| --- | ---: |" + " ---: |" * (len(ESTIMATORS) + 1))
    for name, picked in rows:
        medians = [_median_error(picked, estimator) for estimator in ESTIMATORS]
        cells = ["-" if m is None else f"{100 * m:.1f} %" for m in medians]
        held = sum(c.held for c in picked) / len(picked) if picked else math.nan
        lines.append(f"| {name} | {len(picked)} | " + " | ".join(cells) + f" | {held:.3f} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=list(scenario_names()))
    parser.add_argument("--seeds", nargs="+", type=int, default=None)
    parser.add_argument("--seeds-per-scenario", type=int, default=3)
    args = parser.parse_args(argv)
    shipped = {load_scenario(name).seed for name in scenario_names()}
    seeds = args.seeds or []
    draw = random.SystemRandom()
    while not args.seeds and len(seeds) < args.seeds_per_scenario:
        if (seed := draw.randrange(1, 2**31)) not in shipped and seed not in seeds:
            seeds.append(seed)
    found = cases(args.scenarios, seeds)
    print(f"scenarios: {', '.join(args.scenarios)}; seeds: {' '.join(map(str, seeds))}")
    print(f"cases: {len(found)} (truth 0, left out of relative errors: "
          f"{sum(c.truth == 0 for c in found)})")  # fmt: skip
    print(summary(found))
    print(
        "mode: accuracy, not timed; every estimator reads the same simulated scrapes, and "
        "the truth is the observations the window's counters recorded"
    )


if __name__ == "__main__":
    main()
