"""Throughput: what was served, read after the request shapes, as a floor unless saturated."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.collection import COVERAGE
from inference_obs.analyses.naming import MANY
from inference_obs.analyses.throughput import Regime
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table, cell, number

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["throughput"]

#: What each regime (from the throughput analysis) lets the rates be read as.
_READ_AS = {
    Regime.DEMAND_LIMITED: "",
    Regime.CAPACITY_LIMITED: (
        "; the rates still average the span the series cover, idle minutes included"
    ),
    Regime.UNKNOWN: "; read the rates as an observed floor",
}


def throughput(report: Report) -> Iterator[Block]:
    yield Heading(2, "Throughput")
    yield Paragraph(
        "Extrapolated increases over the window (fractional estimates, not audited counts); "
        "rates per wall-clock second of the span the series cover, idle time included. "
        "Observed throughput is an observed floor, not capacity, unless the deployment was "
        "saturated."
    )
    rows, regimes = [], []
    for d in report.deployments:
        t = d.of(analyses.throughput)
        rows.append(
            (
                d.deployment.name,
                "all",
                cell(t.prompt_tokens),
                cell(t.output_tokens),
                cell(t.finished_requests),
                cell(t.output_tokens_per_second),
                cell(t.requests_per_second),
            )
        )
        # One replica's rates are the deployment's: no second row. A fleet's replicas are a
        # distribution in the Replicas section, every one in replicas.csv.
        if 1 < len(t.per_replica) <= MANY:
            for replica, (tokens, requests) in t.per_replica.items():
                rows.append((d.deployment.name, replica, "", "", "", cell(tokens), cell(requests)))
        elif len(t.per_replica) > MANY:
            regimes.append(
                f"{d.deployment.name}: {len(t.per_replica)} replicas; their rates as a "
                "distribution with the outliers under Replicas, each in replicas.csv."
            )
        regimes.append(
            f"{d.deployment.name} ({t.regime.value.replace('_', '-')}): "
            f"{t.regime_reason.rstrip('.')}{_READ_AS[t.regime]}."
        )
        covered = d.of(analyses.collection).covered_seconds
        if covered.value is not None and any(
            a.kind == COVERAGE for a in t.output_tokens_per_second.annotations
        ):
            regimes.append(
                f"{d.deployment.name}: rates per second of the {number(covered.value)} s its "
                "series cover, not of the window (see Collection health)."
            )
    yield Table(
        (
            "deployment",
            "replica",
            "prompt tokens",
            "output tokens",
            "requests finished",
            "output tokens/s",
            "requests/s",
        ),
        tuple(rows),
    )
    yield Items(tuple(regimes))
