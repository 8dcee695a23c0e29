"""Options shared by the commands that read a source: the window, live access, prices.

Errors name the option and never echo a header's value (it may hold a
credential).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from inference_obs.analyses.resolution import Resolution
from inference_obs.errors import InferenceObsError, QueryError
from inference_obs.query import parse_duration
from inference_obs.samples import Window

__all__ = [
    "EXIT_BUDGET",
    "EXIT_INVALID",
    "EXIT_NO_DATA",
    "EXIT_OK",
    "EXIT_SOURCE",
    "EXIT_USAGE",
    "add_live_options",
    "add_window_options",
    "open_prometheus",
    "prices",
    "resolution",
    "topologies",
    "window",
]

#: Exit statuses (documented in docs/report-json.md).
EXIT_OK, EXIT_USAGE, EXIT_NO_DATA, EXIT_SOURCE, EXIT_INVALID, EXIT_BUDGET = 0, 2, 3, 4, 5, 6


def add_window_options(command: argparse.ArgumentParser) -> None:
    """``--start``, ``--end`` and ``--window``."""
    command.add_argument("--start", help="window start, ISO 8601 with a timezone")
    command.add_argument("--end", help="window end, ISO 8601 with a timezone")
    command.add_argument("--window", help="window length ending at --end, e.g. 1h")


def add_live_options(command: argparse.ArgumentParser) -> None:
    """Read-only access to a Prometheus-compatible API: token, headers, CA."""
    auth = command.add_argument_group("live access (read-only)")
    auth.add_argument("--token-file", help="file holding a bearer token")
    auth.add_argument("--token-env", help="environment variable holding a bearer token")
    auth.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an extra request header, e.g. 'X-Scope-OrgID: team' (repeatable)",
    )
    auth.add_argument("--ca-file", help="CA bundle for TLS")


def open_prometheus(args: argparse.Namespace) -> Any:
    """A :class:`~inference_obs.source.prometheus.PrometheusSource` from the live options."""
    from inference_obs.source.prometheus import PrometheusSource

    headers = {}
    for i, text in enumerate(args.header, 1):
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            # The text is not echoed: a mistyped header may hold a credential.
            raise InferenceObsError(f"--header number {i}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
    try:
        return PrometheusSource(
            args.prometheus,
            token_file=args.token_file,
            token_env=args.token_env,
            headers=headers or None,
            ca_file=args.ca_file,
        )
    except (ValueError, OSError) as exc:  # two credentials, or a bad CA file; no secret in it
        raise InferenceObsError(f"--prometheus: {exc}") from None


def _in_range(moment: datetime, what: str) -> datetime:
    """``moment`` if it also exists in UTC, where the sources and the report read it."""
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise InferenceObsError(f"{what} is outside the years 1 to 9999 in UTC") from None
    return moment


def _when(text: str, option: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InferenceObsError(f"{option} {text!r}: not an ISO 8601 time") from exc
    if moment.tzinfo is None:
        raise InferenceObsError(
            f"{option} {text!r} has no timezone: add one, e.g. {text}+00:00 or {text}Z"
        )
    return _in_range(moment, f"{option} {text!r}")


def window(args: argparse.Namespace) -> Window | None:
    """The window of ``--start``/``--end``/``--window``; None when none of them is given."""
    if args.start is None and args.end is None and args.window is None:
        return None
    if args.start is not None and args.window is not None:
        raise InferenceObsError("give --start or --window with --end, not both")
    if args.end is None:
        raise InferenceObsError("--start and --window need --end")
    end = _when(args.end, "--end")
    if args.window is not None:
        try:
            length = parse_duration(args.window)
        except QueryError:
            raise InferenceObsError(
                f"--window {args.window!r}: expected a duration such as 1h or 90m"
            ) from None
        try:
            start = end - timedelta(seconds=length)
        except OverflowError:  # past timedelta's or datetime's range
            raise InferenceObsError(
                f"--window {args.window!r} from --end {args.end!r} starts before the year 1"
            ) from None
        return Window(_in_range(start, f"--window {args.window!r} from --end {args.end!r}"), end)
    if args.start is None:
        raise InferenceObsError("--end needs --start or --window")
    start = _when(args.start, "--start")
    if start >= end:
        raise InferenceObsError(f"--start {args.start!r} is not before --end {args.end!r}")
    return Window(start, end)


def prices(items: Sequence[str]) -> dict[str, float]:
    """``NAME=PRICE`` pairs (GPU-hour rent per deployment)."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            price = float(value)
        except ValueError:
            price = -1.0
        if not sep or not name or price < 0:
            raise InferenceObsError(f"--gpu-hour-price {item!r}: expected NAME=PRICE, e.g. H20=2.5")
        out[name] = price
    return out


def topologies(items: Sequence[str]) -> dict[str, str]:
    """``NAME=FILE`` pairs, each file the ``nvidia-smi topo -m`` output of a deployment."""
    texts = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InferenceObsError(f"--topology {item!r}: expected NAME=FILE, e.g. H100=topo.txt")
        try:
            texts[name] = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InferenceObsError(f"--topology {item!r}: cannot read {path}: {exc}") from exc
    return texts


def resolution(text: str) -> Resolution:
    """``--resolution``: ``auto``, ``scrape``, or a tile width (seconds, or a duration: ``1m``)."""
    if text in ("auto", "scrape"):
        return "auto" if text == "auto" else "scrape"
    try:
        return float(text) if text.replace(".", "", 1).isdigit() else parse_duration(text)
    except QueryError:
        raise InferenceObsError(
            f"--resolution {text!r}: expected auto, scrape, or a tile width such as 60 or 1m"
        ) from None
