"""Options shared by the commands that read a source: the window, live access, prices.

Errors name the option and never echo a header's value (it may hold a
credential).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from inference_obs.analyses.resolution import Resolution
from inference_obs.errors import ConfigurationError, InferenceObsError, QueryError
from inference_obs.query import parse_duration
from inference_obs.samples import Window
from inference_obs.source.http import MAX_ANSWER_BYTES

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
    auth.add_argument(
        "--parallel",
        type=int,
        default=8,
        metavar="N",
        help="requests in flight at once, at most (default: 8)",
    )
    auth.add_argument(
        "--max-answer-mb",
        type=float,
        default=MAX_ANSWER_BYTES / 2**20,
        metavar="MB",
        help="largest answer accepted, in MiB, on the wire and decompressed "
        f"(default: {MAX_ANSWER_BYTES // 2**20})",
    )


def open_prometheus(args: argparse.Namespace) -> Any:
    """A :class:`~inference_obs.source.prometheus.PrometheusSource` from the live options.

    A ``--time-budget`` (when the command has one) becomes the source's
    deadline, so a request still running when the budget ends stops then.
    """
    from inference_obs.source.auth import BearerToken
    from inference_obs.source.prometheus import PrometheusSource
    from inference_obs.source.tls import TLS

    headers = {}
    for i, text in enumerate(args.header, 1):
        name, sep, value = text.partition(":")
        if not sep or not name.strip():
            # The text is not echoed: a mistyped header may hold a credential.
            raise InferenceObsError(f"--header number {i}: expected 'Name: value'")
        headers[name.strip()] = value.strip()
    if args.token_file and args.token_env:
        raise InferenceObsError("give --token-file or --token-env, not both")
    budget = getattr(args, "time_budget", None)
    try:
        token = (
            BearerToken(file=args.token_file)
            if args.token_file
            else BearerToken(env=args.token_env)
            if args.token_env
            else None
        )
        return PrometheusSource(
            args.prometheus,
            auth=token,
            headers=headers or None,
            tls=TLS(ca_file=args.ca_file) if args.ca_file else None,
            parallel=args.parallel,
            max_answer_bytes=round(args.max_answer_mb * 2**20),
            deadline=time.monotonic() + budget if budget is not None else None,
        )
    except ConfigurationError as exc:  # the messages name the fault, never a secret
        raise InferenceObsError(f"--prometheus: {exc}") from None


def _when(text: str, option: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InferenceObsError(f"{option} {text!r}: not an ISO 8601 time") from exc
    if moment.tzinfo is None:
        raise InferenceObsError(
            f"{option} {text!r} has no timezone: add one, e.g. {text}+00:00 or {text}Z"
        )
    return moment


def window(args: argparse.Namespace, default: Window | None) -> Window:
    """The window of ``--start``/``--end``/``--window``, or ``default`` when none is given."""
    if args.start and args.window:
        raise InferenceObsError("give --start or --window with --end, not both")
    if args.end is None:
        if args.start or args.window:
            raise InferenceObsError("--start and --window need --end")
        if default is None:
            raise InferenceObsError("reading a live source needs --end and --start or --window")
        return default
    end = _when(args.end, "--end")
    if args.window:
        return Window(end - timedelta(seconds=parse_duration(args.window)), end)
    if not args.start:
        raise InferenceObsError("--end needs --start or --window")
    return Window(_when(args.start, "--start"), end)


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
