"""Blocks to one self-contained HTML page: styles inline, figures embedded as PNG data.

The page opens with its title and a table of contents of the sections (the
level-2 headings); every heading has the id GitHub would give it
(:func:`~.document.anchors`), so a note's link to its section works on the
page as in the Markdown. A fold (:class:`~.document.Folded`) is a
``<details>`` element, closed until clicked.
"""

from __future__ import annotations

import base64
import html
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence

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
    anchors,
    separated,
)

__all__ = ["contents", "html_body", "html_parts", "to_html"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f7f7f7; padding: 1rem; overflow-x: auto; font-size: 0.8rem; }
nav.contents { border: 1px solid #ddd; padding: 0.5rem 1rem; margin: 1rem 0; }
details { margin: 0.25rem 0; }
summary { cursor: pointer; }
ol.notes li { margin: 0.4rem 0; }
.caveat { color: #555; }
"""


def to_html(blocks: Sequence[Block], figures: Mapping[str, bytes], title: str) -> str:
    """The report as an HTML page; ``figures`` maps a figure name to its PNG bytes.

    The table of contents follows the first level-1 heading (the title), or
    opens the page when there is none.
    """
    return "".join(html_parts(blocks, figures, title))


def html_parts(blocks: Sequence[Block], figures: Mapping[str, bytes], title: str) -> Iterator[str]:
    """The text of :func:`to_html` in parts, a block's at a time, each made when asked for."""
    at = next((i + 1 for i, b in enumerate(blocks) if isinstance(b, Heading) and b.level == 1), 0)
    ids = _Ids()  # one numbering for the whole page
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
    )
    # Each block's text is made as it is asked for: a fleet's page is megabytes.
    page = itertools.chain(
        (head,),
        _render(blocks[:at], figures, ids),
        (contents(blocks),),
        _render(blocks[at:], figures, ids),
        ("</body></html>\n",),
    )
    return separated(page, "\n")


def _headings(blocks: Sequence[Block]) -> Iterator[Heading]:
    """Every heading in page order, those inside folds included (they take ids too)."""
    for block in blocks:
        if isinstance(block, Heading):
            yield block
        elif isinstance(block, Folded):
            yield Heading(block.level, block.title)
            yield from _headings(block.blocks)


def contents(blocks: Sequence[Block]) -> str:
    """A ``<nav>`` listing the sections (level-2 headings outside folds), each a link."""
    headings = list(_headings(blocks))
    ids = anchors([h.text for h in headings])
    top = {id(b) for b in blocks if isinstance(b, Heading) and b.level == 2}
    links = "".join(
        f'<li><a href="#{i}">{html.escape(h.text)}</a></li>'
        for h, i in zip(headings, ids, strict=True)
        if id(h) in top
    )
    return f'<nav class="contents"><strong>Contents</strong><ol>{links}</ol></nav>'


def _link(section: str) -> str:
    """A link to ``section`` on the same page."""
    return f'<a href="#{anchor(section)}">{html.escape(section)}</a>'


def _note(note: Note, to_section: Callable[[str], str]) -> str:
    e = html.escape
    text = e(note.text)
    if note.caveat:
        text += f' <span class="caveat"><em>Not to conclude:</em> {e(note.caveat)}</span>'
    refs = []
    if note.section:
        refs.append(to_section(note.section))
    if note.keys:
        refs.append(", ".join(f"<code>{e(k)}</code>" for k in note.keys))
    if refs:
        text += f" ({'; '.join(refs)})"
    return f"<li>{text}</li>"


def html_body(
    blocks: Sequence[Block],
    figures: Mapping[str, bytes],
    to_section: Callable[[str], str] = _link,
) -> str:
    """The blocks as HTML elements (no page around them), figures embedded as PNG data.

    A figure without PNG bytes is shown as a note, never as a broken image.
    ``to_section`` gives the HTML by which a note names the section it cites
    (default: a link to its heading on the same page).
    """
    return "\n".join(_render(blocks, figures, _Ids(), to_section))


class _Ids:
    """Heading ids in page order, repeated ones numbered as :func:`anchors` numbers them."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def next(self, text: str) -> str:
        base = anchor(text)
        n = self.seen.get(base, 0)
        self.seen[base] = n + 1
        return base if n == 0 else f"{base}-{n}"


def _render(
    blocks: Sequence[Block],
    figures: Mapping[str, bytes],
    ids: _Ids,
    to_section: Callable[[str], str] = _link,
) -> Iterator[str]:
    e = html.escape
    for block in blocks:
        match block:
            case Heading(level, text):
                yield f'<h{level} id="{ids.next(text)}">{e(text)}</h{level}>'
            case Paragraph(text):
                yield f"<p>{e(text)}</p>"
            case Items(items, lead):
                if lead:
                    yield f"<p>{e(lead)}</p>"
                yield "<ul>" + "".join(f"<li>{e(i)}</li>" for i in items) + "</ul>"
            case Notes(items, lead):
                if lead:
                    yield f"<p>{e(lead)}</p>"
                yield '<ol class="notes">' + "".join(_note(n, to_section) for n in items) + "</ol>"
            case Table(header, rows):
                head = "".join(f"<th>{e(h)}</th>" for h in header)
                cells = (
                    "<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows
                )
                opening = f"<table><thead><tr>{head}</tr></thead><tbody>"
                yield "".join([opening, *cells, "</tbody></table>"])
            case FigureRef(name, caption):
                png = figures.get(name)
                if png is None:
                    yield f"<p><em>Figure {e(name)} was not drawn.</em></p>"
                    continue
                data = base64.b64encode(png).decode("ascii")
                yield (
                    f'<figure><img alt="{e(caption)}" data-figure="{e(name)}" '
                    f'src="data:image/png;base64,{data}"><figcaption>{e(caption)}</figcaption>'
                    "</figure>"
                )
            case Code(text, _):
                yield f"<pre><code>{e(text)}</code></pre>"
            case Folded(title, inner, level):
                yield (
                    f'<details id="{ids.next(title)}" data-level="{level}">'
                    f"<summary>{e(title)}</summary>"
                )
                yield from _render(inner, figures, ids, to_section)
                yield "</details>"
