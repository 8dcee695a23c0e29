"""``--time-budget``: what ends the run when the budget does.

The budget bounds what a scheduler sees: run as the program, it counts from
the process's start (:func:`~inference_obs.cli.options.process_started`), the
interpreter's start and the library's imports included. Every part of the run
checks the one deadline (:func:`~inference_obs.cli.options.budget_deadline`):
the source stops a request in flight, a dataset stops being read, each
analysis checks before it starts; and :func:`ends_by` ends whatever else is
running then (a long analysis, drawing the figures, staging the files) by
raising :class:`OutOfTime` in the main thread, so that the run ends within
:data:`MARGIN_S` of the deadline with exit 6 and ``--out`` as it was.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["MARGIN_S", "OutOfTime", "ends_by"]

# Seconds between rings of the alarm after the deadline (module docs of ends_by).
_AGAIN_S = 0.1
#: Seconds past the deadline by which a run that ran out of time has ended: the
#: Python call running at the deadline returning (a figure drawn), threads
#: finishing their request (stopped at the deadline) and the interpreter's exit.
MARGIN_S = 1.5


class OutOfTime(BaseException):
    """The time budget ran out: raised wherever the main thread is (exit 6).

    Not an :class:`Exception`, as :class:`KeyboardInterrupt` is not: no
    ``except OSError`` or ``except Exception`` on the way (a file read cut
    short, a font looked up) takes it for a failure of its own and goes on,
    or turns it into another exit status (``TimeoutError`` is an ``OSError``);
    ``finally`` blocks, which remove staged files, still run.
    """


@contextmanager
def ends_by(deadline: float | None, budget_s: float) -> Iterator[Callable[[], None]]:
    """While running, reaching ``deadline`` raises :class:`OutOfTime` where the main thread is.

    The alarm (``SIGALRM``) rings at the deadline and every :data:`_AGAIN_S`
    after it: a ring whose exception was swallowed (Python ignores one raised
    in a finaliser or a weakref callback, as an import's are) is followed by
    another. A ring while the run unwinds from running out of time (a
    ``finally``, an ``__exit__`` removing staged files) leaves that cleanup alone.

    Yields ``commit``: called before the report's files are moved into
    ``--out``, it ends the alarm (a move is never cut in two) and raises
    OutOfTime itself when the deadline has passed, so that nothing is
    moved then. Off the main thread, or without ``SIGALRM``, only ``commit``'s
    check remains, with the run's own checks.
    """
    message = f"the time budget of {budget_s:g} s ran out; --out is as it was"
    committing = threading.Event()

    def commit() -> None:
        committing.set()
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if deadline is not None and time.monotonic() >= deadline:
            raise OutOfTime(message)

    def ring(signum: int, frame: FrameType | None) -> None:
        # TimeoutError: a request's deadline or an analysis's check said it first.
        if committing.is_set() or _unwinding((OutOfTime, TimeoutError)):
            return
        if frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            return  # an import's callbacks ignore exceptions: the next ring raises
        raise OutOfTime(message)

    armed = (
        deadline is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if deadline is not None and time.monotonic() >= deadline:
        raise OutOfTime(f"{message} (before the work started)")
    if not armed or deadline is None:
        yield commit
        return
    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 1e-6), _AGAIN_S)
    try:
        yield commit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _unwinding(kind: tuple[type[BaseException], ...]) -> bool:
    """Whether the exception being handled here (a ``finally``, an ``except``) is, or
    arose while handling, one of the ``kind``."""
    handled = sys.exception()
    for _ in range(100):  # a context chain is short; never follow a cycle for ever
        if handled is None:
            return False
        if isinstance(handled, kind):
            return True
        handled = handled.__context__
    return False
