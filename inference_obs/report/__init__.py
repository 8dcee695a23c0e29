"""Observation reports: analyses gathered once, rendered as Markdown, HTML and JSON.

:func:`report` (``obs.report`` at the top level) resolves what a report reads
and builds it (:mod:`~inference_obs.report.from_source`); :func:`with_baseline`
adds the comparison with an earlier ``report.json``
(:mod:`~inference_obs.report.baseline`); :func:`draw_figures` draws a
report's figures from its results.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from inference_obs.report.baseline import Baseline, compare_reports, read_report_json
from inference_obs.report.build import ReportTimeout, build_report
from inference_obs.report.from_source import InputNames, ReportInputs, report, resolve_inputs
from inference_obs.report.model import Report, Scope
from inference_obs.report.report_json import report_json
from inference_obs.report.with_baseline import with_baseline

if TYPE_CHECKING:
    from inference_obs.report.figures import draw_figures
    from inference_obs.report.write import write_report

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

#: Names whose modules load matplotlib: each is imported when first read (module
#: ``__getattr__``, PEP 562), so loading the package, and ``import inference_obs``
#: with it, draws in no plotting library.
_DRAWING = {
    "draw_figures": "inference_obs.report.figures",
    "write_report": "inference_obs.report.write",
}


def __getattr__(name: str) -> Any:
    module = _DRAWING.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # read once: later reads find it as any other name
    return value
