"""Replicas: each per-replica statistic as a distribution, and the replicas that stand out.

The body stays the same size whatever the fleet: one row per statistic
(minimum, median, maximum across replicas) and the outliers named, at most
:data:`~inference_obs.analyses.naming.NAMED` replicas per deployment; every
replica's value is in ``replicas.csv`` and report.json.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs.analyses.naming import NAMED
from inference_obs.analyses.outliers import (
    MAD_LIMIT,
    SMALLEST_DIFFERENCE,
    WORDS,
    Fleet,
    ReplicaValue,
)
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table
from inference_obs.report.fleet_text import by_replica, outlier_text, value_text

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["replicas"]

_INTRO = (
    "Each replica's statistics (latency from its own buckets and exact means, rates, GPU "
    "utilisation, KV-cache peak, restarts and scrape gaps) as a distribution across the "
    "deployment's replicas: minimum, median and maximum, a quantile with the bucket that "
    "holds it. An outlier is a replica whose exact number has a modified z-score beyond "
    f"{MAD_LIMIT:g} (median absolute deviation) and differs from the median by at least "
    f"{SMALLEST_DIFFERENCE:.0%} of it; for a quantile, its bucket must also lie wholly above "
    "the others' median bucket. Every replica's value: replicas.csv and report.json."
)


def _cell(v: ReplicaValue | None) -> str:
    if v is None:
        return "—"
    return f"{value_text(v.value, v.unit, v.bounds)} ({v.replica})"


def _outliers(name: str, fleet: Fleet) -> Iterator[str]:
    grouped = by_replica(fleet.outliers)
    for replica, found in list(grouped.items())[:NAMED]:
        shown = "; ".join(outlier_text(o) for o in found[:4])
        more = f"; and {len(found) - 4} more statistics" if len(found) > 4 else ""
        yield f"{name} {replica}: {shown}{more}."
    if len(grouped) > NAMED:
        yield f"{name}: {len(grouped) - NAMED} more replicas stand out (replicas.csv, 'outlier')."


def replicas(report: Report) -> Iterator[Block]:
    """The Replicas section: distributions and named outliers per deployment."""
    fleets = [(name, f) for name, f in report.fleet.items() if len(f.replicas) > 1]
    if not fleets:
        return
    yield Heading(2, "Replicas")
    yield Paragraph(_INTRO)
    for name, one in fleets:
        spreads = [s for s in one.spreads if s.replicas]
        # A statistic equal on every replica (no restart anywhere) is a clause, not a row.
        equal = [
            s for s in spreads if s.minimum and s.maximum and s.minimum.value == s.maximum.value
        ]
        rows = tuple(
            (
                WORDS.get(s.statistic, s.statistic),
                str(s.replicas),
                _cell(s.minimum),
                _cell(s.median),
                _cell(s.maximum),
                str(len({o.replica for o in one.outliers if o.statistic == s.statistic})),
            )
            for s in spreads
            if s not in equal
        )
        same = ", ".join(
            f"{WORDS.get(s.statistic, s.statistic)} {value_text(s.minimum.value, s.unit)}"
            for s in equal
            if s.minimum
        )
        lead = f"{name}, {len(one.replicas)} replicas"
        yield Paragraph(f"{lead}{f'; equal on every replica: {same}' if same else ''}:")
        yield Table(("statistic", "replicas", "minimum", "median", "maximum", "outliers"), rows)
        found = tuple(_outliers(name, one))
        yield (
            Items(found, lead=f"{name}'s outliers:")
            if found
            else Paragraph(f"{name}: no replica stands out by these rules.")
        )
