"""A table as plain text fitted to a terminal's width: long cells wrap inside their column.

:func:`fitted` lays out a :class:`~.document.Table` in columns separated by
two spaces. When the natural widths exceed ``width``, the widest column is
narrowed first, one character at a time, never below the longest word of
its cells or :data:`NARROWEST` (a word longer than its column is cut);
cells then wrap at spaces, and after the underscores of a long code
(``traffic_volume_`` / ``differs``), which count as word ends. Numbers
are the caller's: format them with :func:`~inference_obs.reading.wording.number` first.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from inference_obs.report.document import Table

__all__ = ["NARROWEST", "fitted"]

#: Narrowest a column is made (characters): narrower, a word per line reads worse than a
#: table wider than the terminal.
NARROWEST = 8
_GAP = "  "


#: What a line may break after: a bracketed interval whole (``[20, 40]``, a bucket), a word
#: and its spaces, or an underscore inside a code.
_PIECE = re.compile(r"\[[^\]]*\] *|[^ _\[]*_|[^ _\[]+ *| +|\[")


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces and after
    underscores, never inside a bracketed interval that fits a line; a piece longer than
    a line is cut; breaks cost no characters.

    Examples
    --------
    >>> _wrap("request_throughput", 18), _wrap("traffic_volume_differs, queueing", 16)
    (['request_throughput'], ['traffic_volume_', 'differs,', 'queueing'])
    >>> _wrap("22.44 s [20, 40]", 12)
    ['22.44 s', '[20, 40]']
    """
    pieces = _PIECE.findall(text)
    lines: list[str] = []
    line = ""
    for piece in pieces:
        if len(line + piece.rstrip()) <= width:
            line += piece
            continue
        if line.strip():
            lines.append(line.rstrip())
        line = piece.lstrip()
        while len(line.rstrip()) > width:
            lines.append(line[:width])
            line = line[width:]
    if line.strip():
        lines.append(line.rstrip())
    return lines or [""]


def _longest_word(texts: list[str]) -> int:
    return max((len(w.rstrip()) for t in texts for w in _PIECE.findall(t)), default=0)


def _widths(table: Table, width: int, keep: Collection[int]) -> list[int]:
    columns = [[h, *(row[i] for row in table.rows)] for i, h in enumerate(table.header)]
    natural = [max(len(c) for c in column) for column in columns]
    floor = [
        min(n, max(NARROWEST, _longest_word(c))) for n, c in zip(natural, columns, strict=True)
    ]
    widths = list(natural)
    budget = width - len(_GAP) * (len(widths) - 1)
    while sum(widths) > budget:
        shrinkable = [i for i, w in enumerate(widths) if w > floor[i] and i not in keep]
        if not shrinkable:
            shrinkable = [i for i, w in enumerate(widths) if w > floor[i]]
        if not shrinkable:
            # Words too long for the terminal: cut the widest column down to NARROWEST.
            shrinkable = [i for i, w in enumerate(widths) if w > min(NARROWEST, natural[i])]
            if not shrinkable:
                break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def fitted(table: Table, width: int, keep: Collection[int] = ()) -> str:
    """``table`` as text at most ``width`` characters wide where that fits, wrapping cells.

    Parameters
    ----------
    table
        Header and rows of strings (each row as long as the header).
    width
        Characters per line, e.g. ``shutil.get_terminal_size().columns``.
    keep
        Indices of columns narrowed only once the others can narrow no
        further, such as a first column of keys a reader looks rows up by.

    Returns
    -------
    str
        The header, a rule, and each row on as many lines as its tallest cell
        needs; lines end without trailing spaces.

    Examples
    --------
    >>> t = Table(("name", "why"), (("PRO", "output length differs, prompt length differs"),))
    >>> print(fitted(t, 30))
    name  why
    ----  ------------------------
    PRO   output length differs,
          prompt length differs
    """
    widths = _widths(table, width, keep)
    lines = []
    for n, row in enumerate((table.header, *table.rows)):
        cells = [_wrap(text, w) for text, w in zip(row, widths, strict=True)]
        for k in range(max(len(c) for c in cells)):
            parts = [
                (c[k] if k < len(c) else "").ljust(w) for c, w in zip(cells, widths, strict=True)
            ]
            lines.append(_GAP.join(parts).rstrip())
        if n == 0:
            lines.append(_GAP.join("-" * w for w in widths))
    return "\n".join(lines)
