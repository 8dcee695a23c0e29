"""Blocks to Markdown (GitHub-flavoured tables; figures as relative image links).

A fold (:class:`~.document.Folded`) becomes a sub-heading over its blocks;
ranked notes link to their sections by the ids GitHub gives headings.

A block's text is plain text, as :mod:`~.html` escapes it whole, and much of
it comes from data: a dataset's title and methodology, deployment names, label
values such as pod and model names. GitHub, GitLab, Jupyter and wikis render
report.md, so every text goes through :func:`_text` (or :func:`_label`) here,
and nowhere else, before it meets the markup this module adds:

- ``&`` becomes ``&amp;`` and ``<`` becomes ``&lt;``: every HTML tag, comment
  and autolink starts with ``<``, and an entity (``&#106;`` for ``j``) could
  spell a ``javascript:`` link target; ``>`` opens nothing and stays, so
  ``util > 0`` reads as written;
- a ``]`` followed by ``(``, ``[`` or ``:`` gets a backslash (unless an odd
  run of them escapes it already), so a text can close no link or image
  (``[x](javascript:...)``) and define no link reference (``[x]: url``);
- in the text of a link or image the report makes (a note's section, a
  figure's caption) every bracket gets a backslash, as the text must balance;
- a table cell's ``|`` is escaped and its newlines become spaces.

A rendering shows the text as written (``<script>`` appears as text). A code
listing or span (a Measurement key holds a deployment's name) is fenced with
more backticks than any run inside it, so its text cannot end the fence, and a
figure's file name is percent-encoded in its link.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from urllib.parse import quote

from inference_obs.report.document import (
    Block,
    Code,
    FigureRef,
    Folded,
    Heading,
    Items,
    Note,
    Notes,
    Paragraph,
    Table,
    anchor,
    separated,
)

__all__ = ["markdown_parts", "to_markdown"]


_HTML = str.maketrans({"&": "&amp;", "<": "&lt;"})
#: A ``]`` that would close a link, an image or a reference definition.
_CLOSER = re.compile(r"(\\*)(\](?=[(\[:]))")
#: Any bracket, for the text of a link the report makes.
_BRACKET = re.compile(r"(\\*)([\[\]])")


def _backslashed(pattern: re.Pattern[str], text: str) -> str:
    """``text`` with a backslash before each match of ``pattern``'s second group, unless
    the backslashes before it (the first group) are odd in number: they escape it already.
    """
    return pattern.sub(lambda m: m[1] + "\\" * (len(m[1]) % 2 == 0) + m[2], text)


def _text(text: str) -> str:
    """``text`` as Markdown that renders it as written: no HTML, no link of its own.

    Examples
    --------
    >>> _text("<img src=x onerror=alert(1)> & [x](javascript:alert(1)) [20, 40]")
    '&lt;img src=x onerror=alert(1)> &amp; [x\\\\](javascript:alert(1)) [20, 40]'
    """
    return _backslashed(_CLOSER, text.translate(_HTML))


def _label(text: str) -> str:
    """``text`` as the text of a link or image the report makes: every bracket escaped, as
    an unbalanced one would end the link's text early.

    >>> _label("PRO [x](y) [20, 40")
    'PRO \\\\[x\\\\](y) \\\\[20, 40'
    """
    return _backslashed(_BRACKET, text.translate(_HTML))


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|").replace("\n", " ")


def _table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _fence(text: str, least: int) -> str:
    """Backticks enough to fence ``text``: ``least``, or one more than its longest run."""
    return "`" * max([least, *(len(run) + 1 for run in re.findall("`+", text))])


def _span(text: str) -> str:
    """``text`` as a code span; a space pads a backtick at either end, as CommonMark asks."""
    fence = _fence(text, 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _note(rank: int, note: Note) -> str:
    text = f"{rank}. {_text(note.text)}"
    if note.caveat:
        text += f" *Not to conclude:* {_text(note.caveat)}"
    refs = [f"[{_label(note.section)}](#{anchor(note.section)})"] if note.section else []
    if note.keys:
        refs.append(", ".join(_span(key) for key in note.keys))
    if refs:
        text += f" ({'; '.join(refs)})"
    return text


def _blocks(blocks: Sequence[Block], figure_dir: str) -> Iterator[str]:
    for block in blocks:
        match block:
            case Heading(level, text):
                yield f"{'#' * level} {_text(text)}"
            case Paragraph(text):
                yield _text(text)
            case Items(items, lead):
                # A list may follow its lead line directly (CommonMark lets it interrupt
                # a paragraph).
                bullets = (f"- {_text(i)}" for i in items)
                yield "\n".join((*([_text(lead)] if lead else []), *bullets))
            case Notes(items, lead):
                notes = (_note(rank, n) for rank, n in enumerate(items, 1))
                yield "\n".join((*([_text(lead)] if lead else []), *notes))
            case Table(header, rows):
                rule = "|" + "---|" * len(header)
                lines = [_table_row(header), rule, *(_table_row(row) for row in rows)]
                yield "\n".join(lines)
            case FigureRef(name, caption):
                # A backslash at the line's end is a hard break: the caption shows under
                # the image, in the same paragraph.
                alt, path = _label(caption), quote(f"{figure_dir}/{name}.png")
                yield f"![{alt}]({path})\\\n*{_text(caption)}*"
            case Code(text, language):
                fence = _fence(text, 3)
                yield f"{fence}{language}\n{text.rstrip()}\n{fence}"
            case Folded(title, inner, level):
                yield f"{'#' * level} {_text(title)}"
                yield from _blocks(inner, figure_dir)


def to_markdown(blocks: Sequence[Block], figure_dir: str = "figures") -> str:
    """The report as Markdown; figures link to ``<figure_dir>/<name>.png``."""
    return "".join(markdown_parts(blocks, figure_dir))


def markdown_parts(blocks: Sequence[Block], figure_dir: str = "figures") -> Iterator[str]:
    """The text of :func:`to_markdown` in parts, a block's at a time, each made when asked for."""
    yield from separated(_blocks(blocks, figure_dir), "\n\n")
    yield "\n"
