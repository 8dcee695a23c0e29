"""Times on the command line: ``--start``, ``--end`` and ``--window``.

A time is one of:

- ``now``: the moment the command started, to the whole second (UTC). Every
  ``now`` of one run is the same moment, so ``--start now-2h --end now`` is
  exactly two hours;
- ``now-DURATION``: that long before, with a PromQL duration (``now-1h``,
  ``now-90m``, ``now-1d12h``);
- an ISO 8601 time with a timezone (``2026-10-19T18:40:00+08:00``, ``...Z``);
- unix seconds (``1792402800``, as ``date +%s`` prints them).

``--window`` is a PromQL duration (``1h``, ``24h``, ``7d``) ending at ``--end``.
"""

from __future__ import annotations

import argparse
import math
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from inference_obs.errors import ConfigurationError, QueryError
from inference_obs.query import parse_duration

if TYPE_CHECKING:
    from inference_obs.samples import Window

__all__ = ["FORMS", "moment", "started", "window"]

#: The forms a time may take, as the help texts and errors say them.
FORMS = "ISO 8601 with a timezone, now, now-DURATION (now-1h) or unix seconds"
_UNIX = re.compile(r"[0-9]+(\.[0-9]+)?")


def started() -> datetime:
    """``now`` for this run: the current time in UTC, to the whole second.

    Whole seconds, so a scheduled report's window edges read cleanly and two
    runs in the same second ask for the same window.
    """
    return datetime.now(UTC).replace(microsecond=0)


def _in_range(moment: datetime, what: str) -> datetime:
    """``moment`` if it also exists in UTC, where the sources and the report read it."""
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise ConfigurationError(f"{what} is outside the years 1 to 9999 in UTC") from None
    return moment


def moment(text: str, option: str, now: datetime) -> datetime:
    """The time ``text`` names (see the module docstring), timezone-aware.

    Parameters
    ----------
    text
        What was given.
    option
        The option's name, for the error (``--end``).
    now
        What ``now`` means in this run (timezone-aware).

    Raises
    ------
    ConfigurationError
        Naming the option and the text, and the forms accepted.
    """
    if text == "now" or text.startswith(("now-", "now+")):
        if text.startswith("now+"):
            raise ConfigurationError(
                f"{option} {text!r}: a time after now holds no samples; use now or now-DURATION"
            )
        if text == "now":
            return now
        try:
            before = parse_duration(text[4:])
        except QueryError:
            raise ConfigurationError(
                f"{option} {text!r}: expected now-DURATION with a duration such as 1h or 90m"
            ) from None
        try:
            return _in_range(now - timedelta(seconds=before), f"{option} {text!r}")
        except OverflowError:
            raise ConfigurationError(f"{option} {text!r} is before the year 1") from None
    if _UNIX.fullmatch(text):
        seconds = float(text)
        try:
            if not math.isfinite(seconds):
                raise OverflowError
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            raise ConfigurationError(
                f"{option} {text!r}: unix seconds outside the years 1 to 9999"
            ) from None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigurationError(f"{option} {text!r}: not a time; give {FORMS}") from None
    if when.tzinfo is None:
        raise ConfigurationError(
            f"{option} {text!r} has no timezone: add one, e.g. {text}+00:00 or {text}Z"
        )
    return _in_range(when, f"{option} {text!r}")


def window(args: argparse.Namespace, now: datetime | None = None) -> Window | None:
    """The window of ``--start``/``--end``/``--window``; None when none of them is given.

    ``now`` is what ``now`` means (default: :func:`started`).
    """
    # Here, not at the top: the commands that read no window (lint, --version) load no numpy.
    from inference_obs.samples import Window

    if args.start is None and args.end is None and args.window is None:
        return None
    if args.start is not None and args.window is not None:
        raise ConfigurationError("give --start or --window with --end, not both")
    if args.end is None:
        raise ConfigurationError("--start and --window need --end (e.g. --end now)")
    now = started() if now is None else now
    end = moment(args.end, "--end", now)
    if args.window is not None:
        try:  # as obs.report reads window="1h" with end=
            return Window.ending(end, args.window)
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"--window {args.window!r} from --end {args.end!r}: {exc}"
            ) from None
    if args.start is None:
        raise ConfigurationError("--end needs --start or --window")
    start = moment(args.start, "--start", now)
    if start >= end:
        raise ConfigurationError(f"--start {args.start!r} is not before --end {args.end!r}")
    return Window(start, end)
