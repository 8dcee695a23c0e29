"""Blocks to Markdown (GitHub-flavoured tables; figures as relative image links)."""

from __future__ import annotations

from collections.abc import Sequence

from inference_obs.report.document import Block, Code, FigureRef, Heading, Items, Paragraph, Table

__all__ = ["to_markdown"]


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(_escape(c) for c in cells) + " |"


def to_markdown(blocks: Sequence[Block], figure_dir: str = "figures") -> str:
    """The report as Markdown; figures link to ``<figure_dir>/<name>.png``."""
    out: list[str] = []
    for block in blocks:
        match block:
            case Heading(level, text):
                out.append(f"{'#' * level} {text}")
            case Paragraph(text):
                out.append(text)
            case Items(items):
                out.append("\n".join(f"- {item}" for item in items))
            case Table(header, rows):
                rule = "|" + "---|" * len(header)
                lines = [_table_row(header), rule, *(_table_row(row) for row in rows)]
                out.append("\n".join(lines))
            case FigureRef(name, caption):
                out.append(f"![{caption}]({figure_dir}/{name}.png)\n\n*{caption}*")
            case Code(text, language):
                out.append(f"```{language}\n{text.rstrip()}\n```")
    return "\n\n".join(out) + "\n"
