"""What a notebook holds of a report when asked: one figure, one section.

:class:`ReportFigure` and :class:`ReportSection` are what
:meth:`Report.figure <inference_obs.report.model.Report.figure>` and
:meth:`Report.section <inference_obs.report.model.Report.section>` return. They
live apart from the code that makes them (:mod:`~inference_obs.report.notebook`),
which reads the report model: the model names them, and imports point one way.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from inference_obs.report.document import Block, FigureRef, Folded, Paragraph
from inference_obs.report.html import html_body
from inference_obs.report.markdown import to_markdown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["ReportFigure", "ReportSection", "render_with", "renderers", "section_call"]

#: How the renderers of a report are loaded; set by the package (``inference_obs.report``).
_load: list[Callable[[], object]] = []


def render_with(load: Callable[[], object]) -> None:
    """Make ``load`` the way a report gets its renderers (the package calls it on import).

    The renderers read the report model, so the model cannot import them; and
    they load matplotlib, so the package does not import them either until a
    report first shows or writes itself.
    """
    _load[:] = [load]


def renderers() -> object:
    """The renderers a report shows itself with (:class:`~.model.Renderers`)."""
    return _load[0]()


@dataclass(frozen=True)
class ReportFigure:
    """One figure of a report, drawn on demand; Jupyter shows it as its PNG.

    Attributes
    ----------
    name
        ``<deployment>-<figure>``, as in ``figures/<name>.png``.
    caption
        The caption the report prints under it.
    png
        The PNG bytes (100 dpi), the same bytes ``write_report`` writes to
        ``figures/<name>.png``.
    figure
        The matplotlib figure drawn (to restyle or save in another format).
    """

    name: str
    caption: str
    png: bytes = field(repr=False)
    figure: Figure = field(repr=False, compare=False)

    def _repr_png_(self) -> bytes:
        return self.png

    def save(self, path: Path) -> Path:
        """Write the PNG bytes to ``path`` (a file name) and return it."""
        path.write_bytes(self.png)
        return path


@dataclass(frozen=True)
class ReportSection:
    """One section of a report (a level-2 heading and what follows it, up to the next).

    Jupyter shows it as HTML with each figure, and each section a note
    cites, named by the call that shows it; ``str()`` gives its Markdown.
    """

    title: str
    blocks: tuple[Block, ...] = field(repr=False)

    def _repr_html_(self) -> str:
        return html_body(tuple(_named(self.blocks)), {}, section_call)

    def __str__(self) -> str:
        return to_markdown(tuple(_named(self.blocks)))


def section_call(title: str) -> str:
    """How a notebook names a section a note cites: the call that shows it, as HTML."""
    return f"<code>report.section({html.escape(repr(title), quote=False)})</code>"


def _named(blocks: Sequence[Block]) -> Iterator[Block]:
    """``blocks`` with each figure replaced by its caption and the call that draws it."""
    for block in blocks:
        if isinstance(block, FigureRef):
            yield Paragraph(f"Figure: {block.caption} (report.figure({block.name!r}) draws it)")
        elif isinstance(block, Folded):
            yield Folded(block.title, tuple(_named(block.blocks)), block.level)
        else:
            yield block
