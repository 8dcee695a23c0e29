"""The report's table (``report/sections/table.py``) against the registry of analyses.

In the manner of Prometheus's function-list test (every function the PromQL
parser knows has an implementation in the engine): every registered analysis
has a section decision, a part of the report that shows it or a place among
those shown generically, and an analysis registered without one fails here.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from inference_obs.analyses import registry
from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.reading.context import Reading
from inference_obs.reading.result import AnalysisResult
from inference_obs.report.document import Heading, Paragraph
from inference_obs.report.figure_plan import FIGURES
from inference_obs.report.model import Report
from inference_obs.report.sections import table
from inference_obs.report.sections.appendix import appendix
from inference_obs.report.sections.scope import scope


class _NothingResult(AnalysisResult):
    """A result without numbers: the dummy below is never run, only registered."""


def _nothing(r: Reading, settings: NoSettings) -> _NothingResult:
    return _NothingResult()


#: An analysis a new module might register and forget the report for.
DUMMY: Analysis[NoSettings, _NothingResult] = Analysis(
    name="dummy",
    title="A dummy analysis",
    entry=_nothing,
    result=_NothingResult,
    settings=NoSettings,
    summary="Registered by a test, with no section decision.",
)


def check_every_analysis_has_a_section_decision() -> None:
    """The check itself: fails naming each registered analysis without a decision."""
    missing = [one.name for one in table.undecided()]
    assert not missing, (
        f"registered without a section decision: {', '.join(missing)}; add each to a Part "
        "of PARTS in report/sections/table.py, or to GENERICALLY"
    )


def test_every_registered_analysis_has_a_section_decision() -> None:
    check_every_analysis_has_a_section_decision()


def test_an_analysis_registered_without_a_decision_fails_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "ANALYSES", (*registry.ANALYSES, DUMMY))
    with pytest.raises(AssertionError, match="without a section decision: dummy;"):
        check_every_analysis_has_a_section_decision()
    # Marked as shown generically, the same analysis passes, and is the one shown so.
    monkeypatch.setattr(table, "GENERICALLY", frozenset({DUMMY}))
    check_every_analysis_has_a_section_decision()
    assert table.generic() == (DUMMY,)


def test_an_analysis_without_a_section_is_shown_as_a_table_under_its_title(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Undecided or not, its numbers are not lost from the report: a heading of its own.
    monkeypatch.setattr(registry, "ANALYSES", (*registry.ANALYSES, DUMMY))
    report = cast(Report, SimpleNamespace(deployments=()))
    blocks = list(table.other_analyses(report))
    assert blocks[:2] == [Heading(2, "A dummy analysis"), Paragraph(DUMMY.summary)]
    # The registry today: every analysis has a section, so no generic table at all.
    monkeypatch.setattr(registry, "ANALYSES", registry.ANALYSES[:-1])
    assert list(table.other_analyses(report)) == []


def test_each_analysis_is_shown_by_one_part_and_is_registered() -> None:
    claims = [one for part in table.PARTS for one in part.shows]
    assert len(claims) == len(set(claims)), "an analysis is shown by two parts"
    assert set(claims) <= set(registry.ANALYSES)
    assert not table.GENERICALLY & set(claims)
    assert frozenset(one.name for one in claims) == table.SHOWN


def test_the_table_orders_the_sections_with_scope_first_and_the_appendix_last() -> None:
    order: tuple[Any, ...] = table.ORDER
    assert order[0] is scope
    assert order[-1] is appendix
    assert table.other_analyses in order


def test_the_tables_figures_are_the_figures_drawn_in_order() -> None:
    # Each figure is drawn from one analysis's result, and cited in the part that shows it.
    assert table.figures() == FIGURES
