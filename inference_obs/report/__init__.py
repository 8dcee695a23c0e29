"""Observation reports: analyses gathered once, rendered as Markdown, HTML and JSON.

:func:`report` (``obs.report`` at the top level) resolves what a report reads
and builds it (:mod:`~inference_obs.report.from_source`); :func:`with_baseline`
adds the comparison with an earlier ``report.json``
(:mod:`~inference_obs.report.baseline`); :func:`draw_figures` draws a
report's figures from its results.

``import inference_obs`` loads this package, so it loads no analysis and no
plotting library: the names of modules that do (the build, the model, the
baseline, the figures and the writer, which loads matplotlib) load them when
first read. :func:`report`, :func:`report_json` and :func:`with_baseline` are
imported here at once, each before a submodule of the same name could be
bound in its place.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from inference_obs.report.from_source import InputNames, ReportInputs, report, resolve_inputs
from inference_obs.report.report_json import report_json
from inference_obs.report.shown import render_with
from inference_obs.report.with_baseline import with_baseline

if TYPE_CHECKING:
    from inference_obs.report.baseline import Baseline, compare_reports, read_report_json
    from inference_obs.report.build import ReportTimeout, build_report
    from inference_obs.report.figures import draw_figures
    from inference_obs.report.model import Report, Scope
    from inference_obs.report.write import write_report


def _renderers() -> object:
    from inference_obs.report.renderers import RENDERERS

    return RENDERERS


# Reports show themselves with the renderers, which read the model: the model cannot
# import them, so the package hands it a way to load them, when a report first asks.
render_with(_renderers)

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


def __getattr__(name: str) -> object:
    # PEP 562: a name whose module loads the analyses or matplotlib, read for the first time.
    module: ModuleType
    if name in {"Baseline", "compare_reports", "read_report_json"}:
        from inference_obs.report import baseline as module
    elif name in {"ReportTimeout", "build_report"}:
        from inference_obs.report import build as module
    elif name == "draw_figures":
        from inference_obs.report import figures as module
    elif name in {"Report", "Scope"}:
        from inference_obs.report import model as module
    elif name == "write_report":
        from inference_obs.report import write as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(module, name)
    globals()[name] = value  # found directly from now on
    return value
