"""SLO attainment from histogram buckets: the share of observations within each latency target.

For each target (``ttft<=2s@99%``: see :mod:`~inference_obs.metrics.slo`)
the attainment is the share of the window's observations at or below the
threshold, for the deployment (every replica's buckets added) and for each
replica (its own buckets):

- EXACT where the threshold is a bucket bound: the change of the ``le``
  bucket over the change of the ``+Inf`` bucket, per series from its first
  to its last sample (:mod:`~inference_obs.reading.counter_ratios`), as the
  other exact shares are; ``bounds`` equal the value;
- BOUNDED otherwise: ``bounds`` are the shares at the bucket bounds below
  and above the threshold, which must hold the true share; the value is
  interpolated linearly between them (an estimate).

With an objective, the error budget spent is ``(1 - attainment) / (1 -
objective)`` (ratio: 1 is the whole budget), its bounds from the
attainment's. Measurement keys are ``D/slo/ttft_le_2s_attainment``,
``D/slo/ttft_le_2s_budget_spent`` and, per replica, the same with
``[replica]``. Inter-token latency counts engine steps, not requests:
its attainment is the share of steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from inference_obs.analyses.latency import merged_buckets, shares_within
from inference_obs.analyses.throughput import replica_label
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.engine.histograms import fraction_below, parse_le
from inference_obs.errors import Annotation, ConfigurationError
from inference_obs.metrics import builders, vllm
from inference_obs.metrics.slo import DEFAULT_SLOS, SloTarget, parse_target
from inference_obs.query import Expr, increase, to_promql
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import Ratio, counter_ratios_grouped
from inference_obs.reading.measurement import Bounds, Measurement, Status, derive
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Instant, Labels, Vector

__all__ = ["SloAttainment", "SloResult", "SloSettings", "budget_spent", "slo"]

_SERVER = (
    "Server-side histograms of requests vLLM finished: client-aborted requests are not in "
    "them, and client-side latency is longer."
)
_ITL = "Inter-token latency counts engine steps: the share is of steps, not of requests."
_BOUNDED = (
    "The threshold is not a bucket bound: only the interval (the shares at the bucket bounds "
    "around it) is certain; the value is interpolated inside it."
)
_OWN_BUCKETS = "From this replica's own buckets summed across its series."


class SloSettings(Settings):
    """The latency targets whose attainment is reported."""

    targets: tuple[SloTarget, ...] = Field(
        default=DEFAULT_SLOS,
        description="Latency targets, METRIC<=DURATION[@OBJECTIVE], comma-separated "
        "(e.g. ttft<=2s@99%,itl<=50ms): seconds, objective a share; an empty text: none.",
    )

    @field_validator("targets", mode="before")
    @classmethod
    def _parsed(cls, value: Any) -> Any:
        """Text (``--set slo.targets=...``, ``--slo``) parsed; models and dicts as they are."""
        if isinstance(value, str):
            value = [part for part in value.split(",") if part.strip()]
        if isinstance(value, list | tuple):
            out = [parse_target(v) if isinstance(v, str) else v for v in value]
            names = [t.name if isinstance(t, SloTarget) else None for t in out]
            twice = sorted({n for n in names if n is not None and names.count(n) > 1})
            if twice:
                raise ConfigurationError(f"SLO targets given twice: {', '.join(twice)}")
            return tuple(out)
        return value


class SloAttainment(BaseModel):
    """One target's attainment over the window, for the deployment and each replica.

    Attributes
    ----------
    target
        The target.
    exact
        Whether the threshold is a bucket bound of the deployment's histogram (the
        attainment is then exact, else an interval).
    attainment
        Share (ratio 0-1) of observations at or below the threshold, every replica's
        buckets added; ``bounds`` the certain interval.
    budget_spent
        ``(1 - attainment) / (1 - objective)`` (ratio; 1: the whole error budget); None
        without an objective.
    replicas
        Per replica: its attainment from its own buckets.
    replica_budget_spent
        Per replica: its budget spent; empty without an objective.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: SloTarget
    exact: bool
    attainment: Measurement
    budget_spent: Measurement | None
    replicas: dict[str, Measurement]
    replica_budget_spent: dict[str, Measurement]


class SloResult(AnalysisResult):
    """SLO attainment of one deployment over one window.

    Attributes
    ----------
    label
        The label naming a replica.
    targets
        Per target, in the order given: its attainment and budget spent.
    """

    label: str
    targets: tuple[SloAttainment, ...]


def budget_spent(attainment: Measurement, objective: float, statistic: str) -> Measurement:
    """``(1 - attainment) / (1 - objective)``: the share of the error budget spent (ratio).

    Bounds: the attainment's upper bound spends the least, its lower bound the most.

    Examples
    --------
    Attaining 99.5% against a 99% objective spends half the budget:
    ``(1 - 0.995) / (1 - 0.99) = 0.5``.
    """
    budget = 1.0 - objective
    value = None if attainment.value is None else (1.0 - attainment.value) / budget
    spent = derive(
        statistic,
        value,
        "ratio",
        [attainment],
        f"(1 - attainment) / (1 - {objective:g}): error budget {budget:.6g}",
        attainment.caveats,
    )
    if spent.value is None or attainment.bounds is None:
        return spent
    low, high = attainment.bounds.lower, attainment.bounds.upper
    bounds = Bounds(lower=(1.0 - high) / budget, upper=(1.0 - low) / budget)
    return spent.model_copy(update={"bounds": bounds})


def _caveats(target: SloTarget, exact: bool) -> tuple[str, ...]:
    return (_SERVER, *((_ITL,) if target.metric == "itl" else ()), *(() if exact else (_BOUNDED,)))


def _buckets_by(r: Reading, target: SloTarget, label: str) -> Expr:
    """``sum by (<label>, le) (increase(h_bucket{m}[w]))``: each replica's own buckets."""
    expr: Expr = increase(target.family.select(r.matchers, "bucket").over(r.seconds))
    return expr.sum(by=(label, "le"))


def _bounded_by(
    r: Reading,
    target: SloTarget,
    label: str,
    names: Sequence[str],
    answer: Instant,
    layout: Sequence[float],
) -> dict[str, Measurement]:
    """Each replica's attainment between the shares at the bounds around the threshold.

    ``layout``: the deployment's bucket bounds; the value is interpolated linearly between
    the two around the threshold, as the deployment's is.
    """
    expr = _buckets_by(r, target, label)
    index = {name: i for i, name in enumerate(names)}
    rows: list[tuple[int, str, float]] = []
    if isinstance(answer.value, Vector):
        rows = [
            (index[labels[label]], labels.get("le", ""), float(v))
            for labels, v in zip(answer.value.labels, answer.value.values.tolist(), strict=True)
            if labels.get(label) in index
        ]
    upper = parse_le([le for _, le, _ in rows])
    keep = ~np.isnan(upper)
    counts = np.array([v for _, _, v in rows], np.float64)[keep]
    groups = np.array([g for g, _, _ in rows], np.int64)[keep]
    low, high = fraction_below(target.threshold_s, upper[keep], counts, groups, len(names))
    frac = _position(target.threshold_s, layout)
    out = {}
    for name, i in index.items():
        ok = not math.isnan(low[i])
        bounds = Bounds(lower=float(low[i]), upper=float(high[i])) if ok else None
        out[name] = r.made(
            f"{target.name}_attainment[{name}]",
            bounds.lower + (bounds.upper - bounds.lower) * frac if bounds else None,
            "ratio",
            Status.OK if ok else Status.NO_DATA,
            promql=(to_promql(expr),),
            computation=f"{target.threshold_s:g} s is not a bucket bound of this replica: "
            "bounds are its shares at the bucket bounds around it (fraction_below); value "
            "interpolated linearly between them",
            bounds=bounds,
            annotations=() if ok else (Annotation("no_data", f"no observation on {name}"),),
            caveats=(*_caveats(target, False), _OWN_BUCKETS),
        )
    return out


def _position(threshold: float, layout: Sequence[float]) -> float:
    """Where ``threshold`` lies between the bucket bounds around it (0-1), as
    :func:`~inference_obs.analyses.latency.shares_within` interpolates."""
    below = max((u for u in layout if u < threshold), default=0.0)
    above = min((u for u in layout if u > threshold), default=math.inf)
    span = above - below
    return (threshold - below) / span if math.isfinite(span) and span > 0 else 0.0


def _exact_by(
    r: Reading, targets: Sequence[SloTarget], label: str, names: Sequence[str]
) -> list[dict[str, Measurement]]:
    """Each replica's exact attainment of each of ``targets`` (thresholds at bucket bounds)."""
    m = r.matchers
    ratios = [
        Ratio(
            t.family.select((*m, builders.le_matcher(t.threshold_s)), "bucket"),
            t.family.select((*m, builders.le_matcher(math.inf)), "bucket"),
            builders.share_at_or_below(t.family, t.threshold_s, m, r.seconds, by=(label,)),
            f"{t.name}_attainment",
            "ratio",
            ignoring=("le",),
            caveats=(*_caveats(t, True), _OWN_BUCKETS),
        )
        for t in targets
    ]

    def statistic(ratio: Ratio, group: Labels) -> str:
        return f"{ratio.statistic}[{group[label]}]"

    found = counter_ratios_grouped(
        r, ratios, by=(label,), groups=[Labels({label: n}) for n in names], statistic=statistic
    )
    return [{g[label]: _pinned(one) for g, one in by_group.items()} for by_group in found]


def _pinned(m: Measurement) -> Measurement:
    """An exact share with ``bounds`` equal to its value (the interval is a point)."""
    if m.value is None:
        return m
    return m.model_copy(update={"bounds": Bounds(lower=m.value, upper=m.value)})


def _slo(r: Reading, settings: SloSettings) -> SloResult:
    """Each target's attainment (ratio 0-1) and error budget spent, deployment and replicas.

    Per target, one merged-bucket read and, at a bucket bound, one set of
    exact-share requests for the deployment; for the replicas, one set of
    exact requests for every target at a bound and one grouped bucket read per
    target between bounds, whatever the number of replicas.
    """
    targets = settings.targets
    if not targets:
        return SloResult(label="", targets=())
    label, names = replica_label(r, vllm.GENERATION_TOKENS)
    whole = [
        r.soon(
            partial(
                shares_within,
                r,
                t.family,
                [t.threshold_s],
                [f"{t.name}_attainment"],
                caveats=_caveats(t, True),
            ),
        )
        for t in targets
    ]
    deployment = [asked.result()[0] for asked in whole]
    # The same merged-bucket query shares_within asked: which thresholds are bucket bounds.
    layouts = [merged_buckets(r, t.family).upper for t in targets]
    exact = [t.threshold_s in upper for t, upper in zip(targets, layouts, strict=True)]
    exact_targets = [t for t, e in zip(targets, exact, strict=True) if e]
    per_exact = iter(_exact_by(r, exact_targets, label, names) if exact_targets else [])
    inexact = [t for t, e in zip(targets, exact, strict=True) if not e]
    answers = iter(r.ask([_buckets_by(r, t, label) for t in inexact]) if inexact else [])
    out = []
    for target, is_exact, m, layout in zip(targets, exact, deployment, layouts, strict=True):
        if not is_exact:
            m = m.model_copy(update={"caveats": _caveats(target, False)})
        per_replica = (
            next(per_exact)
            if is_exact
            else _bounded_by(r, target, label, names, next(answers), layout)
        )
        spent, replica_spent = None, {}
        if target.objective is not None:
            spent = budget_spent(m, target.objective, f"{target.name}_budget_spent")
            replica_spent = {
                n: budget_spent(one, target.objective, f"{target.name}_budget_spent[{n}]")
                for n, one in per_replica.items()
            }
        out.append(
            SloAttainment(
                target=target,
                exact=is_exact,
                attainment=m,
                budget_spent=spent,
                replicas=per_replica,
                replica_budget_spent=replica_spent,
            )
        )
    return SloResult(label=label, targets=tuple(out))


slo = Analysis(
    name="slo",
    title="SLOs",
    entry=_slo,
    result=SloResult,
    settings=SloSettings,
    summary="Share of observations within each latency target, exact at bucket bounds, "
    "and the error budget spent.",
)
