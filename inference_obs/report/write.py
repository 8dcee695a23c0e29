"""Write a report's files: report.md, report.html, report.json and figures/*.png.

Paths are fixed by the output directory alone, so scheduled jobs can find
them; the same report gives the same bytes.
"""

from __future__ import annotations

import io
from collections.abc import Collection
from pathlib import Path

import matplotlib

from inference_obs.report.build import Report
from inference_obs.report.html import to_html
from inference_obs.report.markdown import to_markdown
from inference_obs.report.report_json import to_json
from inference_obs.report.sections import sections

__all__ = ["FORMATS", "figure_png", "write_report"]

FORMATS = ("md", "html", "json")


def figure_png(figure: matplotlib.figure.Figure) -> bytes:
    """A figure as PNG bytes (100 dpi, no timestamp in the metadata)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()


def write_report(report: Report, out: Path, formats: Collection[str] = FORMATS) -> dict[str, Path]:
    """Write the report's files under ``out`` (created if needed).

    Parameters
    ----------
    report
        From :func:`~inference_obs.report.build.build_report`.
    out
        The output directory.
    formats
        Any of ``md``, ``html``, ``json``; figures are written with ``md`` or ``html``.

    Returns
    -------
    dict
        Format (and ``figure:<name>``) -> the path written.

    Raises
    ------
    ValueError
        An unknown format, named.
    """
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown report format(s) {unknown}: use any of {', '.join(FORMATS)}")
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    blocks = sections(report)
    pngs = (
        {name: figure_png(fig) for name, fig in report.figures.items()}
        if ({"md", "html"} & set(formats))
        else {}
    )
    if pngs:
        (out / "figures").mkdir(exist_ok=True)
        for name, png in sorted(pngs.items()):
            path = out / "figures" / f"{name}.png"
            path.write_bytes(png)
            written[f"figure:{name}"] = path
    texts = {
        "md": lambda: to_markdown(blocks),
        "html": lambda: to_html(blocks, pngs, report.title),
        "json": lambda: to_json(report),
    }
    for fmt in FORMATS:
        if fmt in formats:
            path = out / f"report.{fmt}"
            path.write_text(texts[fmt](), encoding="utf-8")
            written[fmt] = path
    return written
