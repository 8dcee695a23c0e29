"""Blocks to one self-contained HTML page: styles inline, figures embedded as PNG data."""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence

from inference_obs.report.document import Block, Code, FigureRef, Heading, Items, Paragraph, Table

__all__ = ["html_body", "to_html"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f7f7f7; padding: 1rem; overflow-x: auto; font-size: 0.8rem; }
"""


def to_html(blocks: Sequence[Block], figures: Mapping[str, bytes], title: str) -> str:
    """The report as an HTML page; ``figures`` maps a figure name to its PNG bytes."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>\n"
        + html_body(blocks, figures)
        + "\n</body></html>\n"
    )


def html_body(blocks: Sequence[Block], figures: Mapping[str, bytes]) -> str:
    """The blocks as HTML elements (no page around them), figures embedded as PNG data.

    A figure without PNG bytes is shown as a note, never as a broken image.
    """
    e = html.escape
    body: list[str] = []
    for block in blocks:
        match block:
            case Heading(level, text):
                body.append(f"<h{level}>{e(text)}</h{level}>")
            case Paragraph(text):
                body.append(f"<p>{e(text)}</p>")
            case Items(items):
                body.append("<ul>" + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>")
            case Table(header, rows):
                head = "".join(f"<th>{e(h)}</th>" for h in header)
                cells = "".join(
                    "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows
                )
                body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{cells}</tbody></table>")
            case FigureRef(name, caption):
                png = figures.get(name)
                if png is None:
                    body.append(f"<p><em>Figure {e(name)} was not drawn.</em></p>")
                    continue
                data = base64.b64encode(png).decode("ascii")
                body.append(
                    f'<figure><img alt="{e(caption)}" data-figure="{e(name)}" '
                    f'src="data:image/png;base64,{data}"><figcaption>{e(caption)}</figcaption>'
                    "</figure>"
                )
            case Code(text, _):
                body.append(f"<pre><code>{e(text)}</code></pre>")
    return "\n".join(body)
