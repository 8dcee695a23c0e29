"""Google Cloud Monitoring dashboards: the PromQL of each widget, with its title and unit.

Cloud Monitoring's dashboard JSON (what ``gcloud monitoring dashboards
describe --format=json`` prints, and what GKE publishes for DCGM, vLLM and
llm-d) keeps PromQL in ``timeSeriesQuery.prometheusQuery`` of a widget's
charts (``xyChart.dataSets``, ``scorecard``, ``timeSeriesTable.dataSets``,
``pieChart.dataSets``). Widgets sit in one of four layouts: ``mosaicLayout``
(``tiles[].widget``), ``gridLayout`` (``widgets``), ``rowLayout``
(``rows[].widgets``) or ``columnLayout`` (``columns[].widgets``).

A widget's title names its queries in findings. The unit is the query's
``unitOverride``, a UCUM code, read as the Grafana unit id of the same
meaning (``By`` is ``bytes``, ``10^2.%`` a 0-1 ratio shown as percent);
codes without one (``1``, ``1/s``) are not compared. Queries use Cloud
Monitoring's interval variables (``${__interval}``), replaced as Grafana's are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from inference_obs.lint.inputs import Document, Lines, Query

__all__ = ["UCUM_UNITS", "is_cloud_monitoring", "read_cloud_monitoring"]

_LAYOUTS = ("mosaicLayout", "gridLayout", "rowLayout", "columnLayout")

#: UCUM unit codes Cloud Monitoring writes, as the Grafana unit id of the same meaning.
UCUM_UNITS: dict[str, str] = {
    "s": "s",
    "ms": "ms",
    "us": "µs",
    "ns": "ns",
    "min": "m",
    "h": "h",
    "d": "d",
    "%": "percent",
    "10^2.%": "percentunit",  # a 0-1 ratio, shown multiplied by 100
    "By": "bytes",
    "kBy": "deckbytes",
    "KiBy": "kbytes",
    "MBy": "decmbytes",
    "MiBy": "mbytes",
    "GBy": "decgbytes",
    "GiBy": "gbytes",
    "TBy": "dectbytes",
    "TiBy": "tbytes",
    "bit": "bits",
    "By/s": "Bps",
    "kBy/s": "KBs",
    "KiBy/s": "KiBs",
    "MBy/s": "MBs",
    "MiBy/s": "MiBs",
    "GBy/s": "GBs",
    "GiBy/s": "GiBs",
    "bit/s": "bps",
    "Hz": "hertz",
    "W": "watt",
    "kW": "kwatt",
    "mW": "mwatt",
    "J": "joule",
}


def is_cloud_monitoring(model: object) -> bool:
    """Whether a parsed JSON document is a Cloud Monitoring dashboard."""
    return isinstance(model, dict) and any(isinstance(model.get(k), dict) for k in _LAYOUTS)


def read_cloud_monitoring(path: str, text: str, model: dict[str, Any]) -> Document:
    """The PromQL queries of the Cloud Monitoring dashboard ``model`` (parsed from ``text``)."""
    queries: list[Query] = []
    lines = Lines(text)
    per_title: dict[str, int] = {}
    for title, query, legend in _queries(model):
        expr = query.get("prometheusQuery")
        if not isinstance(expr, str) or not expr.strip():
            continue
        unit_code = query.get("unitOverride")
        unit = UCUM_UNITS.get(unit_code) if isinstance(unit_code, str) else None
        per_title[title] = per_title.get(title, 0) + 1
        queries.append(
            Query(
                where=title,
                ref=f"{per_title[title]}",
                text=expr,
                line=lines.line(expr),
                unit=unit,
                words=f"{title} {legend}".lower(),
                grafana=True,
            )
        )
    return Document(path=path, kind="dashboard", queries=tuple(queries))


def _widgets(model: dict[str, Any]) -> Iterator[dict[str, Any]]:
    mosaic = model.get("mosaicLayout")
    if isinstance(mosaic, dict):
        for tile in mosaic.get("tiles") or ():
            if isinstance(tile, dict) and isinstance(tile.get("widget"), dict):
                yield tile["widget"]
    grid = model.get("gridLayout")
    if isinstance(grid, dict):
        yield from (w for w in grid.get("widgets") or () if isinstance(w, dict))
    for layout, key in (("rowLayout", "rows"), ("columnLayout", "columns")):
        section = model.get(layout)
        if not isinstance(section, dict):
            continue
        for part in section.get(key) or ():
            if isinstance(part, dict):
                yield from (w for w in part.get("widgets") or () if isinstance(w, dict))


def _queries(model: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], str]]:
    """``(widget title, timeSeriesQuery, legend template)`` in the order of the file."""
    for widget in _widgets(model):
        title = str(widget.get("title") or "widget")
        for kind, chart in widget.items():
            if not isinstance(chart, dict) or kind == "title":
                continue
            sets = chart.get("dataSets")
            for data_set in sets if isinstance(sets, list) else [chart]:
                if not isinstance(data_set, dict):
                    continue
                query = data_set.get("timeSeriesQuery")
                if isinstance(query, dict):
                    yield title, query, str(data_set.get("legendTemplate") or "")
