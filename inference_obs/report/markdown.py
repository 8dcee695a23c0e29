"""Blocks to Markdown (GitHub-flavoured tables; figures as relative image links).

A fold (:class:`~.document.Folded`) becomes a sub-heading over its blocks;
ranked notes link to their sections by the ids GitHub gives headings.
"""

from __future__ import annotations

from collections.abc import Sequence

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
)

__all__ = ["to_markdown"]


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_escape(c) for c in cells) + " |"


def _note(rank: int, note: Note) -> str:
    text = f"{rank}. {note.text}"
    if note.caveat:
        text += f" *Not to conclude:* {note.caveat}"
    refs = [f"[{note.section}](#{anchor(note.section)})"] if note.section else []
    if note.keys:
        refs.append(", ".join(f"`{key}`" for key in note.keys))
    if refs:
        text += f" ({'; '.join(refs)})"
    return text


def _blocks(blocks: Sequence[Block], figure_dir: str) -> list[str]:
    out: list[str] = []
    for block in blocks:
        match block:
            case Heading(level, text):
                out.append(f"{'#' * level} {text}")
            case Paragraph(text):
                out.append(text)
            case Items(items, lead):
                # A list may follow its lead line directly (CommonMark lets it interrupt
                # a paragraph).
                out.append("\n".join((*([lead] if lead else []), *(f"- {i}" for i in items))))
            case Notes(items, lead):
                notes = (_note(rank, n) for rank, n in enumerate(items, 1))
                out.append("\n".join((*([lead] if lead else []), *notes)))
            case Table(header, rows):
                rule = "|" + "---|" * len(header)
                lines = [_table_row(header), rule, *(_table_row(row) for row in rows)]
                out.append("\n".join(lines))
            case FigureRef(name, caption):
                # A backslash at the line's end is a hard break: the caption shows under
                # the image, in the same paragraph.
                out.append(f"![{caption}]({figure_dir}/{name}.png)\\\n*{caption}*")
            case Code(text, language):
                out.append(f"```{language}\n{text.rstrip()}\n```")
            case Folded(title, inner, level):
                out.append(f"{'#' * level} {title}")
                out.extend(_blocks(inner, figure_dir))
    return out


def to_markdown(blocks: Sequence[Block], figure_dir: str = "figures") -> str:
    """The report as Markdown; figures link to ``<figure_dir>/<name>.png``."""
    return "\n\n".join(_blocks(blocks, figure_dir)) + "\n"
