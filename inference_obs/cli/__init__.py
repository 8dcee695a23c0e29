"""``inference-obs``: the command line. Wiring only; the work lives in the layers below.

One module per group of commands: :mod:`~.report` (``report``, ``compare``),
:mod:`~.discover` (``discover``), :mod:`~.dataset` (``dataset export|verify|from-scrapes``),
:mod:`~.capture` (``capture``, and ``from-scrapes``'s wiring), :mod:`~.catalogue`
(``catalogue``, ``queries``, ``simulate``); :mod:`~.options` holds the options
they share and the exit statuses, :mod:`~.sources` what they read, :mod:`~.times`
the time forms.

Errors become exit statuses here, in one place (:func:`exit_status`), and a
one-line message: never a traceback for a bad option, path or input. Every
command prints through :func:`~.terminal.printable_streams`: text from data
reaches the terminal as text, never as a control sequence.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType

from inference_obs.cli import capture, catalogue, dashboards, dataset, discover, lint, report
from inference_obs.cli.budget import OutOfTime
from inference_obs.cli.catalogue import parse_matcher
from inference_obs.cli.options import (
    EXIT_BUDGET,
    EXIT_INVALID,
    EXIT_NO_DATA,
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_SOURCE,
    EXIT_USAGE,
    process_started,
)
from inference_obs.cli.terminal import printable_streams
from inference_obs.errors import (
    AccessDenied,
    DatasetError,
    InferenceObsError,
    NotPrometheusAPI,
    SourceError,
)
from inference_obs.version import __version__

__all__ = [
    "EXIT_BUDGET",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_NO_DATA",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_SOURCE",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "exit_status",
    "main",
    "parse_matcher",
]

#: Interrupted by SIGINT (Ctrl-C) or SIGTERM (a scheduler's stop): 128 + the signal number.
EXIT_INTERRUPTED, EXIT_TERMINATED = 128 + signal.SIGINT, 128 + signal.SIGTERM


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="inference-obs",
        description="Defensible numbers about LLM serving fleets from Prometheus data.",
    )
    parser.add_argument("--version", action="version", version=f"inference-obs {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    report.register(commands)
    discover.register(commands)
    catalogue.register(commands)
    dataset.register(commands)
    lint.register(commands)
    dashboards.register(commands)
    capture.register(commands)
    return parser


def exit_status(error: InferenceObsError) -> tuple[int, str]:
    """The exit status and the message line for an error that ended a command.

    A time budget that ran out is 6, whichever layer noticed; a dataset or
    deployments file that is missing or invalid is input (2), not a source
    failure, and so is a URL that does not serve the Prometheus HTTP API (an
    HTML page, a 404 on an API path): retrying will not help; any other
    source error is 4; anything else is a bad option (2).
    """
    if isinstance(error, TimeoutError):
        return EXIT_BUDGET, str(error)
    if isinstance(error, DatasetError | NotPrometheusAPI | AccessDenied):
        return EXIT_USAGE, str(error)
    if isinstance(error, SourceError):
        return EXIT_SOURCE, f"source error: {error}"
    return EXIT_USAGE, str(error)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that cleanup (``finally``) runs."""


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """While running, SIGTERM raises :class:`_Terminated` (in the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _leave_now(status: int) -> None:
    """End the program with ``status`` at once: its time budget is spent.

    The interpreter's teardown (freeing every module and object: a second or
    more on a busy machine) is skipped; nothing is left to clean up, since a
    run that fails removes its staged files itself, and the threads that
    asked the source have ended at the same deadline.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Run as the program (``argv`` None), a ``--time-budget`` counts from the
    process's start, the interpreter's and the imports' time included; called
    with ``argv``, from this call.
    """
    started = process_started() if argv is None else time.monotonic()
    with printable_streams():
        return _run(argv, started)


def _run(argv: Sequence[str] | None, started: float) -> int:
    args = _parser().parse_args(argv)
    args.started = started
    try:
        with _sigterm_unwinds():
            status: int = args.run(args)
    except InferenceObsError as exc:
        status, message = exit_status(exc)
        print(f"inference-obs: {message}", file=sys.stderr)
        if status == EXIT_BUDGET and argv is None:
            _leave_now(status)
        return status
    except OutOfTime as exc:
        print(f"inference-obs: {exc}", file=sys.stderr)
        if argv is None:
            _leave_now(EXIT_BUDGET)
        return EXIT_BUDGET
    except KeyboardInterrupt as exc:
        print("inference-obs: interrupted; nothing was left half-written", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(exc, _Terminated) else EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`inference-obs queries list | head`): not an
        # error. Point stdout at devnull so the interpreter's final flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return status
