"""SLOs: the share of observations within each latency target, and the error budget spent."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.slo import SloAttainment
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import duration, number, share_cell
from inference_obs.report.document import Block, Heading, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["slos"]


def _lowest(one: SloAttainment) -> str:
    """The replica with the lowest attainment (by its lower bound), when there are several."""
    found = [(name, m) for name, m in one.replicas.items() if m.value is not None]
    if len(found) < 2:
        return "—"
    name, m = min(found, key=lambda item: _low(item[1]))
    return f"{name} {share_cell(m, 3)}"


def _low(m: Measurement) -> float:
    return m.bounds.lower if m.bounds is not None else (m.value or 0.0)


def _spent(one: SloAttainment) -> str:
    if one.budget_spent is None:
        return "no objective"
    return share_cell(one.budget_spent, 3)


def _target(one: SloAttainment) -> str:
    """``ttft ≤ 2 s, 99%``: the target as the table reads it."""
    t = one.target
    goal = "" if t.objective is None else f", {number(t.objective * 100, 6)}%"
    return f"{t.metric} ≤ {duration(t.threshold_s)}{goal}"


def _attained(one: SloAttainment) -> str:
    """The attainment, said exact or bounded where it has a value."""
    m = one.attainment
    if m.value is None:
        return share_cell(m)
    return f"{'exact' if one.exact else 'bounded'} {share_cell(m)}"


def slos(report: Report) -> Iterator[Block]:
    """One row per deployment and target: attainment, budget spent, the lowest replica."""
    rows = tuple(
        (
            d.deployment.name,
            _target(one),
            _attained(one),
            _spent(one),
            _lowest(one),
        )
        for d in report.deployments
        if analyses.slo.name in d.results
        for one in d.of(analyses.slo).targets
    )
    if not rows:
        return
    yield Heading(2, "SLOs")
    yield Paragraph(
        "Share of the window's observations within each target (--slo), from the buckets: "
        "exact where the target is a bucket bound, else bounded by the shares at the bounds "
        "around it [brackets]. Budget spent: (1 - attainment) / (1 - objective); 100% is "
        "the whole error budget. Inter-token latency counts engine steps, not requests."
    )
    yield Table(("deployment", "target", "attainment", "budget spent", "lowest replica"), rows)
