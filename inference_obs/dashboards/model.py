"""The Grafana JSON model: dashboards, rows, time-series panels, targets, variables.

What Grafana 10 and 11 import: schemaVersion 39, panels placed on the
24-column grid, every target on the ``$datasource`` variable. Queries are
expressions of the tree rendered with ``to_promql``; their windows are a
placeholder that is written as ``$__rate_interval``, so each panel follows
Grafana's step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from inference_obs.lint.placeholders import Substitution
from inference_obs.query import Expr, to_promql

__all__ = ["WINDOW", "Dashboard", "Panel", "Row", "Target", "render"]

_GRAFANA_WINDOW = Substitution("", frozenset())
WINDOW: float = _GRAFANA_WINDOW.duration("__rate_interval")
"""Window (seconds) of every query: rendered as ``$__rate_interval``."""

_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_WIDTH, _HEIGHT, _COLUMNS = 12, 8, 24


def render(expr: Expr) -> str:
    """PromQL text of ``expr`` with :data:`WINDOW` written as ``$__rate_interval``."""
    return _GRAFANA_WINDOW.restore(to_promql(expr))


@dataclass(frozen=True, slots=True)
class Target:
    """One query of a panel and its legend."""

    expr: Expr
    legend: str


@dataclass(frozen=True, slots=True)
class Panel:
    """A time-series panel: a title, a unit (a Grafana unit id), a description, its targets."""

    title: str
    unit: str
    description: str
    targets: tuple[Target, ...]


@dataclass(frozen=True, slots=True)
class Row:
    """A titled row of panels."""

    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True, slots=True)
class Dashboard:
    """A dashboard with one deployment variable that every query filters on.

    Attributes
    ----------
    uid
        Grafana uid (stable across exports, so re-imports replace).
    title
        Title.
    variable
        Name of the deployment variable (``model_name``, ``pod``).
    variable_query
        Grafana's ``label_values(...)`` query listing its values.
    rows
        The rows in order.
    description
        What the dashboard shows and how its numbers are computed.
    """

    uid: str
    title: str
    variable: str
    variable_query: str
    rows: tuple[Row, ...]
    description: str = ""
    tags: tuple[str, ...] = field(default=("inference-obs",))

    def model(self) -> dict[str, Any]:
        """The dashboard as Grafana's JSON model."""
        panels: list[dict[str, Any]] = []
        y = 0
        next_id = 1
        for row in self.rows:
            panels.append(
                {
                    "type": "row",
                    "title": row.title,
                    "id": next_id,
                    "collapsed": False,
                    "gridPos": {"h": 1, "w": _COLUMNS, "x": 0, "y": y},
                    "panels": [],
                }
            )
            next_id += 1
            y += 1
            for index, panel in enumerate(row.panels):
                x = (index % 2) * _WIDTH
                if index and index % 2 == 0:
                    y += _HEIGHT
                panels.append(_panel(panel, next_id, x, y))
                next_id += 1
            y += _HEIGHT
        return {
            "uid": self.uid,
            "title": self.title,
            "description": self.description,
            "tags": list(self.tags),
            "editable": True,
            "graphTooltip": 1,
            "schemaVersion": 39,
            "version": 1,
            "time": {"from": "now-6h", "to": "now"},
            "refresh": "1m",
            "timezone": "",
            "annotations": {"list": []},
            "links": [],
            "templating": {"list": _variables(self.variable, self.variable_query)},
            "panels": panels,
        }


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    return {
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "id": panel_id,
        "datasource": dict(_DATASOURCE),
        "gridPos": {"h": _HEIGHT, "w": _WIDTH, "x": x, "y": y},
        "fieldConfig": {
            "defaults": {"unit": panel.unit, "custom": {"lineWidth": 1, "fillOpacity": 0}},
            "overrides": [],
        },
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": [_target(t, chr(ord("A") + i)) for i, t in enumerate(panel.targets)],
    }


def _target(target: Target, ref: str) -> dict[str, Any]:
    return {
        "refId": ref,
        "datasource": dict(_DATASOURCE),
        "editorMode": "code",
        "expr": render(target.expr),
        "legendFormat": target.legend,
        "range": True,
    }


def _variables(name: str, query: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "datasource",
            "label": "Data source",
            "type": "datasource",
            "query": "prometheus",
            "current": {},
            "hide": 0,
        },
        {
            "name": name,
            "label": name,
            "type": "query",
            "datasource": dict(_DATASOURCE),
            "query": {"query": query, "refId": "variable"},
            "definition": query,
            "refresh": 2,
            "multi": True,
            "includeAll": True,
            # "All" selects every series that has the label at all.
            "allValue": ".+",
            "current": {},
            "hide": 0,
            "sort": 1,
        },
    ]


def titled(lines: Sequence[str]) -> str:
    """Description paragraphs joined as Grafana shows them (Markdown)."""
    return "\n\n".join(line for line in lines if line)
