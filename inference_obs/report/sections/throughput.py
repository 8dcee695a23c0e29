"""Throughput: what was served, read after the request shapes, as a floor unless saturated."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.collection import COVERAGE
from inference_obs.analyses.naming import MANY
from inference_obs.analyses.regime import RegimeReading, judge
from inference_obs.reading.wording import cell, number
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["throughput"]

#: What the deployment's reading lets the rates be read as.
_READ_AS = {
    RegimeReading.DEMAND_LIMITED: "an observed floor, not a capacity",
    RegimeReading.CAPACITY_LIMITED: "near capacity, averaged over the span the series cover",
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
        # The deployment's one reading, with the numbers throughput read it from.
        found, share = judge(d), t.waiting_sample_share
        rows_are = "scrapes" if d.step_seconds is None else "tiles"
        waited = "no data" if share.value is None else f"{number(100 * share.value, 3)}%"
        read_as = _READ_AS.get(found.reading, "an observed floor, idle minutes included")
        regimes.append(
            f"{d.deployment.name} ({found.label}): requests waited in {waited} of its "
            f"{rows_are}, KV-cache peak {cell(t.kv_cache_usage_max)}; read the rates as {read_as}."
        )
        if len(t.per_replica) > MANY:
            regimes.append(
                f"{d.deployment.name}: {len(t.per_replica)} replicas; their rates as a "
                "distribution with the outliers under Replicas, each in replicas.csv."
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
