"""Presentation: panel units against the values' unit, and template variables no query applies."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from inference_obs.lint.context import Context, Problem
from inference_obs.lint.inputs import Document, Variable
from inference_obs.lint.placeholders import references
from inference_obs.lint.units import Unit, grafana_unit, grafana_unit_for, unit_of

__all__ = ["check_unit", "unused_variables", "variables_not_applied"]

# Scales within 0.1 % are the same unit (rounding in the tables above).
_SAME = 1e-3
# A factor of 10 or more is a wrong number, less a misleading one (MiB shown as MB).
_WRONG = 10.0
# Grafana variable types that filter data when a query uses them.
_FILTERS = frozenset({"query", "custom", "textbox", "interval"})
# Share of an exporter's queries that must use a variable before one that does not is reported.
_MOST = 2 / 3
_FEWEST = 3


def check_unit(ctx: Context) -> Iterator[Problem]:
    """OBS501, OBS502 and OBS505: the panel's unit against the unit of the values.

    A byte rate on a byte unit (OBS505) shows the right number with the wrong
    unit; a byte amount on a rate unit (OBS501) claims a rate that is not one.
    """
    shown = grafana_unit(ctx.query.unit)
    if shown is None:
        return
    values = unit_of(ctx.expr, ctx.series)
    if values is None:
        return
    if {values.dimension, shown.dimension} == {"data", "data/s"}:
        right = grafana_unit_for(values)
        yield Problem(
            "OBS505" if values.dimension == "data/s" else "OBS501",
            f"panel unit {ctx.query.unit} is {_what(shown)}, the values are {_what(values)}"
            + (f" (unit {right})" if right else ""),
        )
        return
    if values.dimension != shown.dimension:
        return
    factor = shown.scale / values.scale
    if abs(factor - 1) <= _SAME:
        return
    right = grafana_unit_for(values)
    off = max(factor, 1 / factor)
    advice = f"; the values are in {_describe(values)}" + (f" (unit {right})" if right else "")
    yield Problem(
        "OBS501" if off >= _WRONG else "OBS502",
        f"panel unit {ctx.query.unit} shows the values {_factor(off)}x "
        f"{'too large' if factor > 1 else 'too small'}{advice}",
    )


def _what(unit: Unit) -> str:
    return "a rate (bytes per second)" if unit.dimension == "data/s" else "an amount (bytes)"


def _factor(off: float) -> str:
    return f"{off:,.0f}" if off >= _WRONG else f"{off:.3g}"


def _describe(unit: Unit) -> str:
    names = {
        ("time", 1.0): "seconds",
        ("time", 1e-3): "milliseconds",
        ("fraction", 1.0): "0-1 fractions",
        ("fraction", 0.01): "percent (0-100)",
        ("data", 1024.0**2): "MiB",
        ("data", 1.0): "bytes",
        ("data/s", 1.0): "bytes per second",
        ("data/s", 1024.0**2): "MiB per second",
    }
    return names.get((unit.dimension, unit.scale), f"{unit.dimension} x {unit.scale:g}")


def unused_variables(document: Document) -> Iterator[Variable]:
    """Filter variables of a dashboard that no query reads, directly or through another variable."""
    used: set[str] = set(document.other_references)
    for query in document.queries:
        used |= references(query.text)
    by_name = {v.name: v for v in document.variables}
    # A variable read by a used variable's definition filters through it.
    frontier = [name for name in used if name in by_name]
    while frontier:
        for name in references(by_name[frontier.pop()].definition):
            if name not in used:
                used.add(name)
                if name in by_name:
                    frontier.append(name)
    for variable in document.variables:
        if variable.kind in _FILTERS and not variable.hidden and variable.name not in used:
            yield variable


def variables_not_applied(
    document: Document, exporters: Sequence[frozenset[str]]
) -> Iterator[tuple[int, Variable]]:
    """``(query index, variable)`` for queries that ignore a variable most of their exporter's use.

    ``exporters[i]`` names the exporters whose families query ``i`` reads.
    """
    names = {v.name: v for v in document.variables if v.kind in _FILTERS and not v.hidden}
    refs = [references(q.text) for q in document.queries]
    for exporter in sorted(set().union(*exporters) if exporters else set()):
        members = [i for i, found in enumerate(exporters) if exporter in found]
        if len(members) < _FEWEST:
            continue
        for name, variable in names.items():
            using = [i for i in members if name in refs[i]]
            if len(using) >= _MOST * len(members) and len(using) < len(members):
                for i in members:
                    if name not in refs[i]:
                        yield i, variable
