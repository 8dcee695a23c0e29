"""Observation reports: analyses gathered once, rendered as Markdown, HTML and JSON.

:func:`report` (``obs.report`` at the top level) resolves what a report reads
and builds it (:mod:`~inference_obs.report.from_source`); :func:`with_baseline`
adds the comparison with an earlier ``report.json``
(:mod:`~inference_obs.report.baseline`); :func:`draw_figures` draws a
report's figures from its results.
"""

from inference_obs.report.baseline import Baseline, compare_reports, read_report_json
from inference_obs.report.build import ReportTimeout, build_report
from inference_obs.report.figures import draw_figures
from inference_obs.report.from_source import InputNames, ReportInputs, report, resolve_inputs
from inference_obs.report.model import Report, Scope, render_with
from inference_obs.report.renderers import RENDERERS
from inference_obs.report.report_json import report_json
from inference_obs.report.with_baseline import with_baseline
from inference_obs.report.write import write_report

# Reports show themselves with the renderers; the model cannot import them (they read it).
render_with(RENDERERS)

__all__ = [
    "Baseline",
    "InputNames",
    "Report",
    "ReportInputs",
    "ReportTimeout",
    "Scope",
    "build_report",
    "compare_reports",
    "draw_figures",
    "read_report_json",
    "report",
    "report_json",
    "resolve_inputs",
    "with_baseline",
    "write_report",
]
