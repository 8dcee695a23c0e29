"""The report as a list of blocks, so Markdown and HTML render the same content.

A block is a heading, a paragraph, a list, a ranked list of notes that
point to their sections, a table, a figure reference, a code listing or a
fold of other blocks; :mod:`~.sections` builds them from a report and the
renderers only lay them out. Headings are linked by :func:`anchor`, the id
GitHub gives them, which the HTML page gives them too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

__all__ = [
    "Block",
    "Code",
    "FigureRef",
    "Folded",
    "Heading",
    "Items",
    "Note",
    "Notes",
    "Paragraph",
    "Table",
    "anchor",
    "anchors",
    "separated",
]


def separated(parts: Iterable[str], separator: str) -> Iterator[str]:
    """``parts`` with ``separator`` between each two: ``separator.join(parts)`` in pieces.

    A fleet's report is megabytes of text: written piece by piece, it is never
    held whole, nor copied into bytes whole.

    >>> "".join(separated(["a", "b", "c"], ", "))
    'a, b, c'
    """
    for i, part in enumerate(parts):
        if i:
            yield separator
        yield part


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True, slots=True)
class Paragraph:
    text: str


@dataclass(frozen=True, slots=True)
class Items:
    """A bulleted list, with the sentence that introduces it (``lead``) where it has one."""

    items: tuple[str, ...]
    lead: str = ""


@dataclass(frozen=True, slots=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True, slots=True)
class FigureRef:
    """A figure by name (``figures/<name>.png``) and its caption."""

    name: str
    caption: str


@dataclass(frozen=True, slots=True)
class Code:
    text: str
    language: str = ""


@dataclass(frozen=True, slots=True)
class Note:
    """One ranked item: a sentence, what not to conclude from it, and where its numbers are.

    ``section`` is the text of the heading that shows the numbers (linked by
    :func:`anchor`); ``keys`` are the Measurement keys the sentence rests on.
    """

    text: str
    caveat: str | None = None
    section: str | None = None
    keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Notes:
    """A ranked (numbered) list of :class:`Note`."""

    items: tuple[Note, ...]
    lead: str = ""


@dataclass(frozen=True, slots=True)
class Folded:
    """Blocks folded away in HTML (``<details>``), under a heading of ``level`` in Markdown."""

    title: str
    blocks: tuple[Block, ...]
    level: int = 3


Block = Heading | Paragraph | Items | Notes | Table | FigureRef | Code | Folded


def anchor(text: str) -> str:
    """The id of a heading, as GitHub makes it: lower case, punctuation dropped, spaces to hyphens.

    A second heading with the same id gets ``-1`` appended, a third ``-2``
    (:func:`anchors`); a link to a section uses the first.

    Examples
    --------
    >>> anchor("Stage boundaries: what the GPUs wait on"), anchor("PRO vs H20")
    ('stage-boundaries-what-the-gpus-wait-on', 'pro-vs-h20')
    """
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(texts: list[str]) -> list[str]:
    """The ids of headings in page order, repeated ones numbered as GitHub numbers them.

    Examples
    --------
    >>> anchors(["PRO", "H20", "PRO"])
    ['pro', 'h20', 'pro-1']
    """
    seen: dict[str, int] = {}
    out = []
    for text in texts:
        base = anchor(text)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(base if n == 0 else f"{base}-{n}")
    return out
