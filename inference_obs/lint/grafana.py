"""Grafana dashboards: every Prometheus query of every panel, with its unit and variables.

Reads the JSON model Grafana exports, in its current form (``panels`` with
``row`` panels, collapsed rows holding their own ``panels``) and its classic one
(schemaVersion < 16: ``rows`` of ``panels``), bare or wrapped as the HTTP API
returns it (``{"dashboard": {...}}``). Library panels are read from the
``__elements`` an external export inlines; one that is not inlined (only its
``libraryPanel`` reference is in the file) is named as not read (OBS002).
Targets of another data source type (Loki, expressions) are skipped; targets
without an ``expr`` too.

The unit a query's values are shown with is the panel's
(``fieldConfig.defaults.unit``; ``yaxes[0].format`` or ``format`` in classic
panels), or a ``byFrameRefID`` override's. When another override or a second
y axis may apply instead, the unit is left undecided (None) rather than
guessed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from inference_obs.documents import json_document
from inference_obs.errors import DocumentError, LintInputError, NotLintable
from inference_obs.lint.cloudmonitoring import is_cloud_monitoring, read_cloud_monitoring
from inference_obs.lint.inputs import Document, Lines, Query, Variable
from inference_obs.lint.limits import check_json_nesting
from inference_obs.lint.placeholders import references

__all__ = ["read_dashboard"]

# Data source types whose targets are not PromQL.
_PROMQL_TYPES = frozenset({"prometheus", "datasource", "victoriametrics-datasource", "mimir"})


def read_dashboard(path: str, text: str) -> Document:
    """The queries and variables of the Grafana dashboard ``text`` (read from ``path``).

    A Google Cloud Monitoring dashboard is read by
    :func:`~inference_obs.lint.cloudmonitoring.read_cloud_monitoring`.

    Raises
    ------
    LintInputError
        When ``text`` is not JSON (naming line and column) or not a dashboard.
    """
    check_json_nesting(path, text)
    try:
        model = json_document(text, path)
    except json.JSONDecodeError as exc:
        raise LintInputError(
            f"{path}:{exc.lineno}:{exc.colno}: not JSON, so not a Grafana dashboard: {exc.msg}"
        ) from exc
    except DocumentError as exc:
        raise LintInputError(str(exc)) from None
    if isinstance(model, dict) and isinstance(model.get("dashboard"), dict):
        model = model["dashboard"]
    if is_cloud_monitoring(model):
        assert isinstance(model, dict)
        return read_cloud_monitoring(path, text, model)
    if not isinstance(model, dict) or not any(
        key in model for key in ("panels", "rows", "templating", "__elements")
    ):
        raise NotLintable(
            f"{path}:1:1: JSON but not a Grafana dashboard (no panels, rows or templating)"
        )
    library = _library_panels(model)
    queries: list[Query] = []
    referenced: set[str] = set()
    finder = Lines(text)
    used_library: set[str] = set()
    not_read: list[tuple[str, str, int | None]] = []
    for where, panel in _panels(model, library, used_library):
        reference = panel.get("libraryPanel")
        if isinstance(reference, dict) and not panel.get("targets"):
            uid, name = str(reference.get("uid", "")), str(reference.get("name", ""))
            message = (
                f"library panel {name or uid!r} (uid {uid!r}) is not inlined in this file: "
                "its queries were not read"
            )
            not_read.append((where, message, finder.line(uid) if uid else None))
        repeat = panel.get("repeat")
        if isinstance(repeat, str):
            referenced |= references(f"${repeat}" if not repeat.startswith("$") else repeat)
        referenced |= references(json.dumps(panel.get("datasource", "")))
        queries += _queries(where, panel, finder)
    for uid, element in library.items():
        if uid not in used_library:
            queries += _queries(str(element.get("title", uid)), element, finder)
    return Document(
        path=path,
        kind="dashboard",
        queries=tuple(queries),
        variables=tuple(_variables(model)),
        other_references=frozenset(referenced),
        not_read=tuple(not_read),
    )


def _library_panels(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    elements = model.get("__elements")
    out: dict[str, dict[str, Any]] = {}
    if isinstance(elements, dict):
        for uid, element in elements.items():
            if isinstance(element, dict) and isinstance(element.get("model"), dict):
                out[str(element.get("uid", uid))] = element["model"]
    return out


def _panels(
    model: dict[str, Any], library: dict[str, dict[str, Any]], used: set[str]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, panel)`` for every panel, rows' panels included."""

    def walk(panels: object, prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if not isinstance(panels, list):
            return
        section = prefix  # an expanded row's panels follow it as siblings
        for panel in panels:
            if not isinstance(panel, dict):
                continue
            title = str(panel.get("title") or f"panel {panel.get('id', '?')}")
            if panel.get("type") == "row":
                section = f"{prefix}{title} / "
                yield from walk(panel.get("panels"), section)
                continue
            ref = panel.get("libraryPanel")
            if (
                isinstance(ref, dict)
                and str(ref.get("uid")) in library
                and not panel.get("targets")
            ):
                used.add(str(ref.get("uid")))
                panel = {**library[str(ref["uid"])], **{"title": title}}
            yield f"{section}{title}", panel
            yield from walk(panel.get("panels"), f"{section}{title} / ")

    yield from walk(model.get("panels"), "")
    rows = model.get("rows")
    if isinstance(rows, list):
        for row in rows:
            if isinstance(row, dict):
                title = str(row.get("title") or "row")
                yield from walk(row.get("panels"), f"{title} / ")


def _datasource_type(source: object) -> str | None:
    if isinstance(source, dict):
        kind = source.get("type")
        return str(kind) if kind else None
    return None


def _queries(where: str, panel: dict[str, Any], finder: Lines) -> list[Query]:
    targets = panel.get("targets")
    if not isinstance(targets, list):
        return []
    default_unit, by_ref, decided = _units(panel)
    panel_source = _datasource_type(panel.get("datasource"))
    title = str(panel.get("title") or "")
    out = []
    for index, target in enumerate(targets):
        if not isinstance(target, dict):
            continue
        expr = target.get("expr")
        if not isinstance(expr, str) or not expr.strip():
            continue
        source = _datasource_type(target.get("datasource")) or panel_source
        if source is not None and source not in _PROMQL_TYPES:
            continue
        ref = str(target.get("refId") or chr(ord("A") + index % 26))
        unit = by_ref.get(ref, default_unit if decided else None)
        legend = str(target.get("legendFormat") or "")
        out.append(
            Query(
                where=where,
                ref=ref,
                text=expr,
                line=finder.line(expr),
                unit=unit,
                words=f"{title} {legend}".lower(),
                grafana=True,
            )
        )
    return out


def _units(panel: dict[str, Any]) -> tuple[str | None, dict[str, str], bool]:
    """The panel's unit, units set per refId, and whether the panel unit decides the rest."""
    if panel.get("type") == "heatmap":
        return None, {}, False  # values are bucket counts; the unit is the y axis's bounds
    decided = True
    by_ref: dict[str, str] = {}
    config = panel.get("fieldConfig")
    unit: object = None
    if isinstance(config, dict):
        defaults = config.get("defaults")
        if isinstance(defaults, dict):
            unit = defaults.get("unit")
        for override in config.get("overrides") or ():
            if not isinstance(override, dict):
                continue
            units = [
                p.get("value")
                for p in override.get("properties") or ()
                if isinstance(p, dict) and p.get("id") == "unit"
            ]
            if not units:
                continue
            matcher = override.get("matcher") or {}
            if isinstance(matcher, dict) and matcher.get("id") == "byFrameRefID":
                by_ref[str(matcher.get("options"))] = str(units[-1])
            else:
                decided = False  # by name or by regex: which query it hits is not known
    if unit is None:
        options = panel.get("options")
        field_options = options.get("fieldOptions") if isinstance(options, dict) else None
        if isinstance(field_options, dict) and isinstance(field_options.get("defaults"), dict):
            unit = field_options["defaults"].get("unit")  # stat/gauge before Grafana 7
    if unit is None and isinstance(panel.get("yaxes"), list) and panel["yaxes"]:
        axes = [a for a in panel["yaxes"] if isinstance(a, dict)]
        unit = axes[0].get("format") if axes else None
        second = axes[1].get("format") if len(axes) > 1 else unit
        if second != unit and any(
            isinstance(o, dict) and o.get("yaxis") == 2 for o in panel.get("seriesOverrides") or ()
        ):
            decided = False
    if unit is None:
        unit = panel.get("format")  # singlestat
    return (str(unit) if isinstance(unit, str) and unit else None), by_ref, decided


def _variables(model: dict[str, Any]) -> Iterator[Variable]:
    templating = model.get("templating")
    entries = templating.get("list") if isinstance(templating, dict) else None
    for entry in entries or ():
        if not isinstance(entry, dict) or not entry.get("name"):
            continue
        query = entry.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        definition = " ".join(
            str(part) for part in (query, entry.get("definition"), entry.get("regex")) if part
        )
        yield Variable(
            name=str(entry["name"]),
            kind=str(entry.get("type", "")),
            definition=definition,
            hidden=entry.get("hide") == 2,
        )
