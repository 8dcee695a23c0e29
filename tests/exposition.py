"""Prometheus text for tests: counters and histograms after ``n`` scrapes of known increments.

Each series starts at a known value (100 observations of nothing for a
histogram, ``start`` for a counter) and grows by the same amount every scrape,
so the expected increase over a window is worked out by hand.
"""

from __future__ import annotations

from collections.abc import Sequence


def counter(name: str, parts: Sequence[tuple[str, float, float]], n: int) -> list[str]:
    """``name``'s series ``(labels, start, step)`` after ``n`` steps, with its TYPE line."""
    lines = [f"# TYPE {name} counter"]
    return lines + [f"{name}{{{labels}}} {start + step * n!r}" for labels, start, step in parts]


def histogram(
    name: str,
    bounds: Sequence[float],
    series: Sequence[tuple[str, Sequence[tuple[float, int]]]],
    n: int,
) -> list[str]:
    """``name`` on the bucket ``bounds`` after ``n`` scrapes, each series ``(labels,
    observed)`` adding its ``(value, count)`` observations every scrape, with its TYPE line."""
    lines = [f"# TYPE {name} histogram"]
    for labels, observed in series:
        for le in (*bounds, float("inf")):
            count = 100 + n * sum(k for value, k in observed if value <= le)
            text = "+Inf" if le == float("inf") else repr(float(le))
            lines.append(f'{name}_bucket{{{labels},le="{text}"}} {float(count)!r}')
        total = 100 + n * sum(k for _, k in observed)
        lines.append(f"{name}_sum{{{labels}}} {100.0 + n * sum(v * k for v, k in observed)!r}")
        lines.append(f"{name}_count{{{labels}}} {float(total)!r}")
    return lines
