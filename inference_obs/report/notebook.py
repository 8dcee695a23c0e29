"""What a notebook shows of a report: the summary at once, each figure and section when asked.

A report's whole HTML, figures embedded, is about a megabyte on a bundled
dataset and grows with the fleet; a notebook that showed it would keep it in
its file on every run. ``Report._repr_html_``
(:func:`~inference_obs.report.summary.summary_html`) therefore shows the
summary and :func:`on_demand_html`: the names of the figures and sections,
each with the call that shows it. :func:`report_figure` draws one figure
(:class:`ReportFigure`, the PNG that ``write_report`` writes to
``figures/<name>.png``); :func:`report_section` renders one section
(:class:`ReportSection`), its figures named, not embedded.
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from inference_obs.analyses.run import DeploymentResults
from inference_obs.errors import ConfigurationError
from inference_obs.report.document import Block, FigureRef, Folded, Heading
from inference_obs.report.figure_plan import FIGURES, figure_name, nothing_to_draw
from inference_obs.report.figures import draw_figure
from inference_obs.report.sections import sections
from inference_obs.report.shown import ReportFigure, ReportSection, section_call
from inference_obs.report.write import figure_png

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = [
    "ReportFigure",
    "ReportSection",
    "figure_names",
    "on_demand_html",
    "report_figure",
    "report_section",
    "section_call",
    "section_titles",
]


def figure_names(report: Report) -> tuple[str, ...]:
    """The names of the report's figures, each deployment's in turn; none is drawn."""
    return tuple(name for run in report.deployments for name in _drawn(run))


def _drawn(run: DeploymentResults) -> dict[str, str]:
    """The name -> the figure (one of :data:`FIGURES`) of each figure ``run`` has."""
    return {figure_name(run, f): f for f in FIGURES if nothing_to_draw(run, f) is None}


def report_figure(report: Report, name: str) -> ReportFigure:
    """Draw the figure ``name`` (one of :func:`figure_names`) of ``report``.

    Raises
    ------
    ConfigurationError
        When the report has no figure of that name; the message lists those it has.
    """
    for run in report.deployments:
        figure = _drawn(run).get(name)
        if figure is not None:
            captions = {ref.name: ref.caption for ref in _figure_refs(sections(report))}
            drawn = draw_figure(run, figure)
            return ReportFigure(name, captions.get(name, ""), figure_png(drawn), drawn)
    raise ConfigurationError(
        f"no figure {name!r} in this report; its figures: {', '.join(figure_names(report))}"
    )


def section_titles(report: Report) -> tuple[str, ...]:
    """The titles of the report's sections (its level-2 headings), in order."""
    return tuple(b.text for b in sections(report) if isinstance(b, Heading) and b.level == 2)


def report_section(report: Report, title: str) -> ReportSection:
    """The section of ``report`` titled ``title`` (one of :func:`section_titles`).

    Raises
    ------
    ConfigurationError
        When the report has no section of that title; the message lists those it has.
    """
    blocks = sections(report)
    starts = [i for i, b in enumerate(blocks) if isinstance(b, Heading) and b.level == 2]
    for at, end in zip(starts, [*starts[1:], len(blocks)], strict=True):
        heading = blocks[at]
        if isinstance(heading, Heading) and heading.text == title:
            return ReportSection(title, blocks[at:end])
    raise ConfigurationError(
        f"no section {title!r} in this report; its sections: {', '.join(section_titles(report))}"
    )


def on_demand_html(report: Report) -> str:
    """What the summary leaves to be asked for: each deployment's figures and the sections,
    each with the call that shows it, and how to write the whole report."""

    def e(text: str) -> str:  # element content: quotes stay as typed, to copy into a cell
        return html.escape(text, quote=False)

    count, rows = 0, []
    for run in report.deployments:
        mine = _drawn(run)
        count += len(mine)
        calls = ", ".join(f"<code>report.figure({e(repr(n))})</code>" for n in mine) or "none"
        rows.append(f"<tr><td>{e(run.deployment.name)}</td><td>{calls}</td></tr>")
    titles = ", ".join(f"<code>{e(repr(t))}</code>" for t in section_titles(report))
    return (
        "<h4>More, when asked</h4>\n"
        f"<p>{count} figures, each drawn when asked (<code>report.figures</code> "
        "lists them):</p>\n"
        f"<table><thead><tr><th>deployment</th><th>figures</th></tr></thead><tbody>"
        f"{''.join(rows)}</tbody></table>\n"
        f"<p>Sections, one at a time with <code>report.section(title)</code> "
        f"(<code>report.sections</code> lists them): {titles}.</p>\n"
        "<p>The whole report, every figure embedded: "
        "<code>report.write(&quot;my-report&quot;)</code> writes "
        "<code>my-report/report.html</code>, <code>report.md</code>, <code>report.json</code> "
        "and <code>figures/</code>.</p>"
    )


def _figure_refs(blocks: Sequence[Block]) -> Iterator[FigureRef]:
    """Every figure cited in ``blocks``, those inside folds included."""
    for block in blocks:
        if isinstance(block, FigureRef):
            yield block
        elif isinstance(block, Folded):
            yield from _figure_refs(block.blocks)
