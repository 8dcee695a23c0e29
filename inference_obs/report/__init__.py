"""Observation reports: analyses gathered once, rendered as Markdown, HTML and JSON."""

from inference_obs.report.build import DeploymentReport, Report, ReportTimeout, Scope, build_report
from inference_obs.report.report_json import report_json
from inference_obs.report.write import write_report

__all__ = [
    "DeploymentReport",
    "Report",
    "ReportTimeout",
    "Scope",
    "build_report",
    "report_json",
    "write_report",
]
