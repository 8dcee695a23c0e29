"""A report in Jupyter: the HTML a notebook shows for a :class:`~.model.Report`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from inference_obs.report.figures import draw_figures
from inference_obs.report.html import html_body
from inference_obs.report.sections import sections
from inference_obs.report.write import figure_png

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["report_html"]


def report_html(report: Report) -> str:
    """The report's HTML body, figures inline."""
    pngs = {name: figure_png(fig) for name, fig in draw_figures(report).items()}
    return html_body(sections(report), pngs)
