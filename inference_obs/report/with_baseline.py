"""A report with its comparison against an earlier report.json (``report --baseline``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from inference_obs.report.report_json import report_document

if TYPE_CHECKING:
    from inference_obs.report.model import Report
    from inference_obs.report.report_json_model import ReportDocument

__all__ = ["with_baseline"]


def with_baseline(report: Report, previous: ReportDocument | Path, source: str = "") -> Report:
    """``report`` with :attr:`~Report.baseline` set: every headline number against ``previous``.

    Parameters
    ----------
    report
        This run's report.
    previous
        An earlier report.json: its path, or its document as :func:`read_report_json`
        returns it.
    source
        How the report names the previous one (default: its path).

    Raises
    ------
    DatasetError
        When ``previous`` is a path that does not hold a report.json.
    """
    # Here, not at the top: `import inference_obs` loads this module (the package binds
    # `with_baseline` to the function), and the comparison's rules load the analyses.
    from inference_obs.report.baseline import compare_reports, read_report_json

    if isinstance(previous, Path):
        source = source or str(previous)
        previous = read_report_json(previous)
    found = compare_reports(previous, report_document(report), source=source or "baseline")
    return report.model_copy(update={"baseline": found})
