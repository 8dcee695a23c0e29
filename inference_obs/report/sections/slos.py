"""SLOs: the share of observations within each latency target, and the error budget spent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.slo import SloAttainment
from inference_obs.metrics.slo import SloTarget
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import duration, number, share_cell
from inference_obs.report.document import Block, Heading, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["slos"]


def _low(m: Measurement) -> float:
    return m.bounds.lower if m.bounds is not None else (m.value or 0.0)


def _target(t: SloTarget) -> str:
    """``ttft ≤ 2 s, 99%``: the target as the table's header reads it."""
    goal = "" if t.objective is None else f", {number(t.objective * 100, 6)}%"
    return f"{t.metric} ≤ {duration(t.threshold_s)}{goal}"


def _cell(one: SloAttainment | None) -> str:
    """Attainment (exact, or [bounds]); budget spent; the lowest of several replicas."""
    if one is None:
        return "—"
    m = one.attainment
    if m.value is None:
        return share_cell(m)
    parts = [("exact " if one.exact else "") + share_cell(m)]
    if one.budget_spent is not None:
        parts.append(f"budget {share_cell(one.budget_spent, 3)}")
    found = [(name, r) for name, r in one.replicas.items() if r.value is not None]
    if len(found) > 1:
        name, r = min(found, key=lambda item: _low(item[1]))
        parts.append(f"lowest {name} {share_cell(r, 3)}")
    return "; ".join(parts)


def slos(report: Report) -> Iterator[Block]:
    """One row per deployment, one column per target (the definitions say how they are read)."""
    results = [
        (d.deployment.name, {a.target.text: a for a in d.of(analyses.slo).targets})
        for d in report.deployments
        if analyses.slo.name in d.results
    ]
    targets = {a.target.text: a.target for _, found in results for a in found.values()}
    if not targets:
        return
    yield Heading(2, "SLOs")
    rows = tuple((name, *(_cell(found.get(text)) for text in targets)) for name, found in results)
    yield Table(("deployment", *(_target(t) for t in targets.values())), rows)
