"""Per-replica values and outliers in words, for the Replicas section and the Summary."""

from __future__ import annotations

from collections.abc import Sequence

from inference_obs.analyses.outliers import WORDS, Outlier
from inference_obs.reading.measurement import Bounds
from inference_obs.report.document import duration, number

__all__ = ["by_replica", "outlier_text", "value_text"]


def value_text(value: float | None, unit: str, bounds: Bounds | None = None) -> str:
    """One per-replica value as a sentence shows it: a time in ms or s with its bucket,
    a ratio as a percent, anything else with its unit."""
    if value is None:
        return "no data"
    if unit == "seconds":
        return duration(value, bounds)
    if unit == "ratio":
        return f"{number(100 * value)}%"
    if unit in ("restarts", "gaps"):
        return number(value)
    if unit == "percent":
        return f"{number(value)}%"
    return f"{number(value)} {unit}"


def outlier_text(o: Outlier) -> str:
    """``TTFT P50 120 ms [100, 250] (others' median 42 ms)``: what makes one outlier."""
    words = WORDS.get(o.statistic, o.statistic)
    return (
        f"{words} {value_text(o.value, o.unit, o.bounds)} "
        f"(others' median {value_text(o.fleet_median, o.unit)})"
    )


def by_replica(outliers: Sequence[Outlier]) -> dict[str, list[Outlier]]:
    """The outliers grouped by replica, the replica with the most statistics first."""
    grouped: dict[str, list[Outlier]] = {}
    for o in outliers:
        grouped.setdefault(o.replica, []).append(o)
    return dict(sorted(grouped.items(), key=lambda kv: (-len(kv[1]), kv[0])))
