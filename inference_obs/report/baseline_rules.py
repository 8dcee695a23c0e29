"""Whether a deployment then and now can be compared: the comparison-validity rules over time.

The same rules, thresholds and finding codes as
:mod:`~inference_obs.analyses.validity.checks` (``docs/comparison-findings.md``),
applied to one deployment in two ``report.json`` documents
(:class:`~inference_obs.report.report_json_model.ReportDocument`, read by key)
instead of two deployments in one window. Each returns ``(code, message)`` pairs; the
messages carry both values.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from inference_obs.analyses.validity.checks import Thresholds
from inference_obs.report.report_json_model import DeploymentEntry, ReportDocument

__all__ = ["comparability", "observation_findings"]

Finding = tuple[str, str]
# Parts of a declared deployment that name where it is, not what it is.
_WHERE = ("name", "replicas", "selector", "gpu_selector")
_QUANTILE = re.compile(r"_p([0-9]+)$")


def _value(report: ReportDocument, key: str) -> float | None:
    """The finite value of ``key`` where it is ok or partial; None otherwise."""
    m = report.measurement(key)
    if m is None or m.status not in ("ok", "partial") or not isinstance(m.value, int | float):
        return None
    return float(m.value)


def _deployment(report: ReportDocument, name: str) -> DeploymentEntry:
    found = report.deployment(name)
    if found is None:  # the comparison asks only of deployments both reports have
        raise KeyError(f"no deployment {name!r} in the report")
    return found


def _seconds(d: DeploymentEntry) -> float:
    start = datetime.fromisoformat(d.window.start)
    return (datetime.fromisoformat(d.window.end) - start).total_seconds()


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return max(a, b) / min(a, b)


def _rate(report: ReportDocument, name: str) -> float | None:
    """Finished requests per second of the window per replica seen."""
    finished = _value(report, f"{name}/throughput/finished_requests")
    replicas = _value(report, f"{name}/throughput/replicas_seen")
    seconds = _seconds(_deployment(report, name))
    if finished is None or not replicas or seconds <= 0:
        return None
    return finished / seconds / replicas


def comparability(
    name: str, previous: ReportDocument, current: ReportDocument, t: Thresholds
) -> list[Finding]:
    """Findings that make every change of deployment ``name`` caveated (workload, load, setup)."""
    out: list[Finding] = []
    for what, stat in (("output", "output_tokens_mean"), ("prompt", "prompt_tokens_mean")):
        a, b = _value(previous, f"{name}/shapes/{stat}"), _value(current, f"{name}/shapes/{stat}")
        r = _ratio(a, b)
        if r is not None and r >= t.length_ratio:
            out.append(
                (
                    f"{what}_length_differs",
                    f"mean {what} length {a:.4g} tokens then, {b:.4g} now ({r:.1f}x): the "
                    "requests did different work",
                )
            )
    a, b = _rate(previous, name), _rate(current, name)
    r = _ratio(a, b)
    if r is not None and r >= t.volume_ratio:
        out.append(
            (
                "traffic_volume_differs",
                f"finished requests per second per replica {a:.4g} then, {b:.4g} now "
                f"({r:.1f}x): latency under a different load",
            )
        )
    then, now = _deployment(previous, name), _deployment(current, name)
    r = _ratio(_seconds(then), _seconds(now))
    if r is not None and r >= t.window_ratio:
        out.append(
            (
                "window_differs",
                f"windows of {_seconds(then):g} s then and {_seconds(now):g} s now",
            )
        )
    changed = sorted(
        _changed(
            {k: v for k, v in then.declared.items() if k not in _WHERE},
            {k: v for k, v in now.declared.items() if k not in _WHERE},
        )
    )
    if changed:
        out.append(("deployment_changed", f"declared {', '.join(changed)} changed"))
    rules = (previous.scope.rules, current.scope.rules)
    if rules[0] != rules[1]:
        out.append(("rules_differ", f"numbers follow {rules[0]} rules then, {rules[1]} now"))
    return out


def _changed(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            path
            for key in sorted(set(a) | set(b))
            for path in _changed(a.get(key), b.get(key), f"{prefix}{key}.")
        ]
    return [] if a == b else [prefix.rstrip(".")]


def observation_findings(
    name: str,
    statistic: str,
    previous: ReportDocument,
    current: ReportDocument,
    statuses: tuple[str, str],
    t: Thresholds,
) -> list[Finding]:
    """Findings that caveat one number: partial values, too few requests for it."""
    out: list[Finding] = []
    if "partial" in statuses:
        out.append(("partial_data", f"partial data ({statuses[0]} then, {statuses[1]} now)"))
    quantile = _QUANTILE.search(statistic)
    if statistic.startswith("latency/"):
        q = int(quantile.group(1)) / 100 if quantile else None
        needed = t.tail_observations / (1 - q) if q is not None else t.min_observations
        counts = [_value(r, f"{name}/throughput/finished_requests") for r in (previous, current)]
        few = [c for c in counts if c is not None and c < needed]
        if few:
            out.append(
                (
                    "too_few_observations",
                    f"{min(few):.0f} finished requests where this number needs about {needed:.0f}",
                )
            )
    return out
