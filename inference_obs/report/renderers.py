"""The renderers a :class:`~inference_obs.report.model.Report` shows itself with.

Loaded by the package (``inference_obs.report``) through
:func:`~inference_obs.report.shown.render_with`; each is imported when first
used, so reading or building a report never loads the drawing code.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from inference_obs.report.model import Renderers

if TYPE_CHECKING:
    from inference_obs.report.model import Report
    from inference_obs.report.shown import ReportFigure, ReportSection

__all__ = ["RENDERERS"]


def _figure_names(report: Report) -> tuple[str, ...]:
    from inference_obs.report.notebook import figure_names

    return figure_names(report)


def _figure(report: Report, name: str) -> ReportFigure:
    from inference_obs.report.notebook import report_figure

    return report_figure(report, name)


def _section_titles(report: Report) -> tuple[str, ...]:
    from inference_obs.report.notebook import section_titles

    return section_titles(report)


def _section(report: Report, title: str) -> ReportSection:
    from inference_obs.report.notebook import report_section

    return report_section(report, title)


def _summary_html(report: Report) -> str:
    from inference_obs.report.summary import summary_html

    return summary_html(report)


def _write(report: Report, out: Path, formats: Collection[str] | None) -> dict[str, Path]:
    from inference_obs.report.write import write_report

    if formats is None:
        return write_report(report, out)
    return write_report(report, out, formats)


RENDERERS = Renderers(
    figure_names=_figure_names,
    figure=_figure,
    section_titles=_section_titles,
    section=_section,
    summary_html=_summary_html,
    write=_write,
)
