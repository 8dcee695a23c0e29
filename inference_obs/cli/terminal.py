"""What the command line prints reaches a terminal as text, never as a control sequence.

Text from data reaches what a command prints: a dataset's title and
methodology, deployment names, label values, file names, in progress lines,
warnings, errors and summaries. A terminal obeys the control characters in
it: ESC starts sequences that recolour, retitle the window, move the cursor
or rewrite the screen; C1 controls (U+0080-U+009F, CSI among them) do the
same without ESC; a carriage return redraws a line over a warning; U+2028
and U+2029 break lines where a reader sees none; bidi controls (U+202A-U+202E,
U+2066-U+2069) reorder what is shown.

:func:`printable` writes each such character as a ``\\uXXXX`` escape (the
form a JSON or YAML string reads back as that character, so piped output
stays parseable), newline and tab excepted. :func:`printable_streams` puts
it under ``sys.stdout`` and ``sys.stderr`` for the length of a command;
:func:`~inference_obs.cli.main` runs every command inside it, so no print
site can forget. A progress line returns to the start of its line with a
write of ``"\\r"`` alone, which passes: alone it can only redraw the line
the program itself drew.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

__all__ = ["printable", "printable_streams"]

#: C0 controls but tab and newline, DEL, C1 controls, the line and paragraph
#: separators, and the bidi embeddings, overrides and isolates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")

#: The one write that passes whole: a progress line's return to the start of its line.
_RETURN = "\r"


def printable(text: str) -> str:
    r"""``text`` with every control character but newline and tab as a ``\uXXXX`` escape.

    Examples
    --------
    >>> printable("PRO\x1b[31m red\u202e\tok\n")
    'PRO\\u001b[31m red\\u202e\tok\n'
    """
    return _CONTROL.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


class _Printable:
    """A text stream that writes :func:`printable` text to the stream under it.

    What it does not define (``encoding``, ``errors``, ``closed``, ...) is the
    stream's own.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text if text == _RETURN else printable(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def printable_streams() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` write :func:`printable` text until the block ends."""
    out, err = sys.stdout, sys.stderr
    # Not a typing.TextIO to type checkers, though print() and the warnings module
    # use no more of a stream than this class has and passes on.
    sys.stdout, sys.stderr = cast(TextIO, _Printable(out)), cast(TextIO, _Printable(err))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
