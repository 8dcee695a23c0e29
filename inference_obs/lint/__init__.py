"""Dashboards and rule files checked against the catalogue's statistics.

Reading (:mod:`.grafana`, :mod:`.rulefiles`, Grafana variables in
:mod:`.placeholders`), the checks (``check_*`` modules, one family of codes
each, :mod:`.codes` lists them), running them (:mod:`.run`) and writing the
findings (:mod:`.output`).

Examples
--------
>>> from inference_obs.lint import lint_text
>>> [f.code for f in lint_text("avg(histogram_quantile(0.99, rate(x_bucket[5m])))")]
['OBS101', 'OBS103']
"""

from __future__ import annotations

from inference_obs.lint.codes import CODES, Code, Severity, code
from inference_obs.lint.context import Options
from inference_obs.lint.findings import Finding
from inference_obs.lint.output import to_json, to_sarif, to_text
from inference_obs.lint.run import Result, lint_documents, lint_paths, lint_text, read_file

__all__ = [
    "CODES",
    "Code",
    "Finding",
    "Options",
    "Result",
    "Severity",
    "code",
    "lint_documents",
    "lint_paths",
    "lint_text",
    "read_file",
    "to_json",
    "to_sarif",
    "to_text",
]
