"""``--time-budget``: when it starts, when it ends, and what ends the run then.

The budget bounds what a scheduler sees: run as the program, it counts from
the process's start (:func:`process_started`), the interpreter's start and
the library's imports included. Every part of the run checks the one
deadline (:func:`budget_deadline`): the source stops a request in flight,
a dataset stops being read, each analysis checks before it starts; and
:func:`ends_by` ends whatever else is running then (a long analysis,
drawing the figures, staging the files) by raising
:class:`~inference_obs.report.build.ReportTimeout` in the main thread, so
that the run ends within :data:`MARGIN_S` of the deadline with exit 6 and
``--out`` as it was.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

from inference_obs.cli.options import positive_seconds

__all__ = ["MARGIN_S", "budget_deadline", "ends_by", "process_started"]

# Seconds between rings of the alarm after the deadline (module docs of ends_by).
_AGAIN_S = 0.1
#: Seconds past the deadline by which a run that ran out of time has ended: the
#: Python call running at the deadline returning (a figure drawn), threads
#: finishing their request (stopped at the deadline) and the interpreter's exit.
MARGIN_S = 1.5


def process_started() -> float:
    """When this process started, in :func:`time.monotonic` seconds; now where unknown.

    Linux's ``/proc/self/stat`` gives the start in clock ticks after boot
    (field 22), on the clock of ``CLOCK_BOOTTIME``; elsewhere the answer is now.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            # The fields after the command's name, which ends at the last ')'; state is field 3.
            ticks = int(stat.read().rpartition(")")[2].split()[22 - 3])
        since = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic()
    return time.monotonic() - max(0.0, since)


def budget_deadline(args: argparse.Namespace) -> float | None:
    """The :func:`time.monotonic` time at which ``--time-budget`` ends, or None without one.

    Counted from ``args.started`` (set by :func:`~inference_obs.cli.main`: the
    process's start when it runs as the program), else from now.
    """
    budget = getattr(args, "time_budget", None)  # commands without one have no deadline
    if budget is None:
        return None
    seconds = positive_seconds(budget, "--time-budget")
    started = getattr(args, "started", None)
    return (time.monotonic() if started is None else started) + seconds


@contextmanager
def ends_by(deadline: float | None, budget_s: float) -> Iterator[Callable[[], None]]:
    """While running, reaching ``deadline`` raises ReportTimeout wherever the main thread is.

    The alarm (``SIGALRM``) rings at the deadline and every :data:`_AGAIN_S`
    after it: a ring whose exception was swallowed (Python ignores one raised
    in a finaliser or a weakref callback, as an import's are) is followed by
    another. A ring while the run unwinds from a ReportTimeout (a ``finally``,
    an ``__exit__`` removing staged files) leaves that cleanup alone.

    Yields ``commit``: called before the report's files are moved into
    ``--out``, it ends the alarm (a move is never cut in two) and raises
    ReportTimeout itself when the deadline has passed, so that nothing is
    moved then. Off the main thread, or without ``SIGALRM``, only ``commit``'s
    check remains, with the run's own checks.
    """
    from inference_obs.report import ReportTimeout

    message = f"the time budget of {budget_s:g} s ran out; --out is as it was"
    committing = threading.Event()

    def commit() -> None:
        committing.set()
        if armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if deadline is not None and time.monotonic() >= deadline:
            raise ReportTimeout(message)

    def ring(signum: int, frame: FrameType | None) -> None:
        if committing.is_set() or _unwinding(ReportTimeout):
            return
        if frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
            return  # an import's callbacks ignore exceptions: the next ring raises
        raise ReportTimeout(message)

    armed = (
        deadline is not None
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if deadline is not None and time.monotonic() >= deadline:
        raise ReportTimeout(f"{message} (before the work started)")
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


def _unwinding(kind: type[BaseException]) -> bool:
    """Whether the exception being handled here (a ``finally``, an ``except``) is, or
    arose while handling, one of ``kind``."""
    handled = sys.exception()
    for _ in range(100):  # a context chain is short; never follow a cycle for ever
        if handled is None:
            return False
        if isinstance(handled, kind):
            return True
        handled = handled.__context__
    return False
