"""Replicas: each per-replica statistic as a distribution, and the replicas that stand out.

The body stays the same size whatever the fleet: one row per statistic
(minimum, median, maximum across replicas) and the outliers named, at most
:data:`LISTED` replicas per deployment; every
replica's value is in ``replicas.csv`` and report.json.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs.analyses.outliers import Fleet, ReplicaValue, Spread
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["LISTED", "replicas"]

#: Outlying replicas listed per deployment, those with the most statistics first.
LISTED = 3

_MAD_LIMIT, _SMALLEST_DIFFERENCE = Fleet.thresholds()
_INTRO = (
    "Each replica's statistics (latency from its own buckets and exact means, rates, GPU "
    "utilisation, KV-cache peak, restarts and scrape gaps) as a distribution across the "
    "deployment's replicas: minimum, median and maximum, a quantile with the bucket that "
    "holds it. An outlier is a replica whose exact number has a modified z-score beyond "
    f"{_MAD_LIMIT:g} (median absolute deviation) and differs from the median by at least "
    f"{_SMALLEST_DIFFERENCE:.0%} of it; for a quantile, its bucket must also lie wholly above "
    "the others' median bucket. Every replica's value: replicas.csv and report.json."
)


#: What shares a latency's row, in order: its mean, P50 and P95.
_BESIDE = ("mean", "p50", "p95")
#: The two rates, which share a row.
_RATES = ("output_tokens_per_second", "requests_per_second")


def _cell(v: ReplicaValue | None) -> str:
    if v is None:
        return "—"
    return f"{v.text()} ({v.replica})"


def _outliers(name: str, fleet: Fleet) -> Iterator[str]:
    grouped = fleet.by_replica()
    listed = list(grouped.items())[:LISTED]
    for k, (replica, found) in enumerate(listed):
        shown = "; ".join(o.text() for o in found[:4])
        more = (
            f"; and {len(found) - 4} more statistic{'s' * (len(found) > 5)}"
            if len(found) > 4
            else ""
        )
        # The last line says how many more replicas stand out, rather than a line of its own.
        left = len(grouped) - len(listed) if k == len(listed) - 1 else 0
        rest = f" And {left} more replicas of {name} (replicas.csv, 'outlier')." if left else ""
        yield f"{name} {replica}: {shown}{more}.{rest}"


def _rows(name: str, one: Fleet) -> Iterator[tuple[str, ...]]:
    """One row per statistic that differs across replicas; a latency's mean, P50 and P95
    share one."""
    spreads = {s.statistic: s for s in one.spreads if s.replicas and not _equal(s)}
    flagged: dict[str, set[str]] = {}
    for o in one.outliers:
        flagged.setdefault(o.statistic, set()).add(o.replica)
    for statistic, s in spreads.items():
        metric, _, kind = statistic.rpartition("_")
        if kind in ("mean", "p95") and f"{metric}_p50" in spreads:
            continue  # shown beside its P50
        if statistic == _RATES[1] and _RATES[0] in spreads:
            continue  # shown beside the output tokens/s
        pair = [s]
        if kind == "p50":
            pair = [spreads[f"{metric}_{k}"] for k in _BESIDE if f"{metric}_{k}" in spreads]
        elif statistic == _RATES[0]:
            pair = [spreads[k] for k in _RATES if k in spreads]
        words = " / ".join(x.words() for x in pair)
        for latency in (" / TTFT", " / E2E", " / TPOT"):
            words = words.replace(latency, " /")
        yield (
            name,
            words,
            str(s.replicas),
            " / ".join(_cell(x.minimum) for x in pair),
            " / ".join(_cell(x.median) for x in pair),
            " / ".join(_cell(x.maximum) for x in pair),
            str(len(set().union(*(flagged.get(x.statistic, set()) for x in pair)))),
        )


def _equal(s: Spread) -> bool:
    """Whether every replica has the same value (no restart anywhere)."""
    return bool(s.minimum and s.maximum and s.minimum.value == s.maximum.value)


def replicas(report: Report) -> Iterator[Block]:
    """The Replicas section: distributions and named outliers, one table for every deployment
    of more than one replica."""
    fleets = [(name, f) for name, f in report.fleet.items() if len(f.replicas) > 1]
    if not fleets:
        return
    yield Heading(2, "Replicas")
    # A statistic equal on every replica (no restart anywhere) is a clause, not a row.
    same = "; ".join(
        f"{name}, {len(one.replicas)} replicas: equal on every one: "
        + ", ".join(
            f"{s.words()} {s.minimum.plain()}"
            for s in one.spreads
            if s.replicas and _equal(s) and s.minimum
        )
        if any(s.replicas and _equal(s) for s in one.spreads)
        else f"{name}, {len(one.replicas)} replicas"
        for name, one in fleets
    )
    yield Paragraph(f"{_INTRO} {same}.")
    rows = tuple(row for name, one in fleets for row in _rows(name, one))
    yield Table(
        ("deployment", "statistic", "replicas", "minimum", "median", "maximum", "outliers"), rows
    )
    found = tuple(line for name, one in fleets for line in _outliers(name, one))
    yield (
        Items(found, lead="Outliers, with what makes each one:")
        if found
        else Paragraph("No replica stands out by these rules.")
    )
