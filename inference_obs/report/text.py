"""A table as plain text fitted to a terminal's width: long cells wrap inside their column.

:func:`fitted` lays out a :class:`~.document.Table` in columns separated by
two spaces. When the natural widths exceed ``width``, the widest column is
narrowed first, one character at a time, never below the longest word of
its cells or :data:`NARROWEST` (a word longer than its column is cut);
cells then wrap at spaces, and after the underscores of a long code
(``traffic_volume_`` / ``differs``), which count as word ends. Numbers
are the caller's: format them with :func:`~.document.number` first.
"""

from __future__ import annotations

import re
import textwrap

from inference_obs.report.document import Table

__all__ = ["NARROWEST", "fitted"]

#: Narrowest a column is made (characters): narrower, a word per line reads worse than a
#: table wider than the terminal.
NARROWEST = 8
_GAP = "  "


# Marks a break opportunity after an underscore; removed once a cell is wrapped.
_MARK = "\x00"


def _breakable(text: str) -> str:
    return text.replace("_", f"_{_MARK} ")


def _unmark(line: str) -> str:
    return line.replace(f"{_MARK} ", "").replace(_MARK, "")


def _wrap(text: str, width: int) -> list[str]:
    lines = textwrap.wrap(_breakable(text), width, break_long_words=True, break_on_hyphens=False)
    return [_unmark(line) for line in lines] or [""]


def _longest_word(texts: list[str]) -> int:
    return max((len(w) for t in texts for w in re.split(r"\s+|(?<=_)", t)), default=0)


def _widths(table: Table, width: int) -> list[int]:
    columns = [[h, *(row[i] for row in table.rows)] for i, h in enumerate(table.header)]
    natural = [max(len(c) for c in column) for column in columns]
    floor = [
        min(n, max(NARROWEST, _longest_word(c))) for n, c in zip(natural, columns, strict=True)
    ]
    widths = list(natural)
    budget = width - len(_GAP) * (len(widths) - 1)
    while sum(widths) > budget:
        shrinkable = [i for i, w in enumerate(widths) if w > floor[i]]
        if not shrinkable:
            # Words too long for the terminal: cut the widest column down to NARROWEST.
            shrinkable = [i for i, w in enumerate(widths) if w > min(NARROWEST, natural[i])]
            if not shrinkable:
                break
        widest = max(shrinkable, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def fitted(table: Table, width: int) -> str:
    """``table`` as text at most ``width`` characters wide where that fits, wrapping cells.

    Parameters
    ----------
    table
        Header and rows of strings (each row as long as the header).
    width
        Characters per line, e.g. ``shutil.get_terminal_size().columns``.

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
    widths = _widths(table, width)
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
