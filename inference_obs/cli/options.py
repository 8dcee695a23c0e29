"""Options shared by the commands that read a source: the window, live access, prices.

Every option is checked here before any work starts (no query sent, no dataset
read), and a bad one ends in a :class:`~inference_obs.errors.ConfigurationError`
naming it. Errors never echo a header's value, a token, or the ``--prometheus``
URL (its userinfo or query string may hold a credential).
"""

from __future__ import annotations

import argparse
import math
import os
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_obs.cli.times import FORMS, window
from inference_obs.deployment import MAX_GPU_HOUR_PRICE
from inference_obs.errors import ConfigurationError, InferenceObsError, QueryError, TopologyError
from inference_obs.query import parse_duration
from inference_obs.query.names import check_duration
from inference_obs.source.limits import MAX_ANSWER_BYTES
from inference_obs.topology import MAX_TEXT_CHARS, Topology, parse_topology

if TYPE_CHECKING:
    from inference_obs.reading.resolution import Resolution

__all__ = [
    "EXIT_BUDGET",
    "EXIT_INVALID",
    "EXIT_NO_DATA",
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_SOURCE",
    "EXIT_USAGE",
    "LiveAccess",
    "add_live_options",
    "add_window_options",
    "budget_deadline",
    "dataset_out",
    "duration_seconds",
    "live_access",
    "number",
    "open_prometheus",
    "positive_seconds",
    "prices",
    "process_started",
    "resolution",
    "topologies",
    "unwritable",
    "window",
]

#: Exit statuses (documented in docs/report-json.md).
EXIT_OK, EXIT_USAGE, EXIT_NO_DATA, EXIT_SOURCE, EXIT_INVALID, EXIT_BUDGET = 0, 2, 3, 4, 5, 6
#: ``report --fail-on regression`` matched: a headline number is worse than its baseline.
EXIT_REGRESSION = 7


def unwritable(out: Path, what: str, exc: OSError) -> ConfigurationError:
    """The one-line error of an output that could not be written (exit status 2).

    Names ``--out``, the reason (``No space left on device``, ``Read-only
    file system``) and the file, and says that nothing half-written was
    left: every writer writes whole files or none.
    """
    where = f": {exc.filename}" if exc.filename else ""
    reason = exc.strerror or str(exc)
    return ConfigurationError(
        f"--out {out}: {what} could not be written ({reason}{where}); "
        "nothing half-written was left there"
    )


def add_window_options(command: argparse.ArgumentParser) -> None:
    """``--start``, ``--end`` and ``--window``."""
    command.add_argument("--start", metavar="TIME", help=f"window start: {FORMS}")
    command.add_argument("--end", metavar="TIME", help=f"window end: {FORMS}")
    command.add_argument(
        "--window", metavar="DURATION", help="window length ending at --end, e.g. 1h or 24h"
    )


def add_live_options(
    command: argparse.ArgumentParser, *, max_answer_bytes: int = MAX_ANSWER_BYTES
) -> None:
    """Read-only access to a Prometheus-compatible API: token, headers, CA.

    ``max_answer_bytes`` is ``--max-answer-mb``'s default, in bytes.
    """
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
        default=max_answer_bytes / 2**20,
        metavar="MB",
        help="largest answer accepted, in MiB, on the wire and decompressed "
        f"(default: {max_answer_bytes / 2**20:g})",
    )


def dataset_out(text: str) -> Path:
    """``--out`` as a directory a dataset can be written in, checked before any work.

    Raises
    ------
    ConfigurationError
        One line: not empty, read-only, full
        (:func:`~inference_obs.source.dataset.writer.check_dataset_out`).
    """
    from inference_obs.source.dataset.writer import check_dataset_out

    out = Path(text)
    try:
        check_dataset_out(out)
    except InferenceObsError as exc:
        raise ConfigurationError(f"--out {exc}") from None
    return out


def _readable(path: str, option: str) -> Path:
    """``path`` (``~`` expanded) if it can be opened for reading; it is opened, never read.

    Opened non-blocking so a named pipe does not wait for a writer here.
    """
    if not path:
        raise ConfigurationError(f"{option}: empty; give a file")
    file = Path(path).expanduser()
    if file.is_dir():  # open(2) would succeed on one
        raise ConfigurationError(f"{option} {path}: is a directory, not a file")
    try:
        os.close(os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)))
    except OSError as exc:
        raise ConfigurationError(f"{option} {path}: {exc.strerror}") from None
    return file


def _headers(items: Sequence[str]) -> dict[str, str]:
    """``--header 'Name: value'`` texts as a mapping; the text is never echoed."""
    from inference_obs.source.http import check_header  # the HTTP stack loads numpy

    headers = {}
    for i, text in enumerate(items, 1):
        name, sep, value = text.partition(":")
        name, value = name.strip(), value.strip()
        # The text is not echoed: a mistyped header may hold a credential.
        if not sep or not name:
            raise ConfigurationError(f"--header number {i}: expected 'Name: value'")
        try:
            check_header(name, value)
        except ConfigurationError as exc:
            raise ConfigurationError(f"--header number {i}: {exc}") from None
        headers[name] = value
    return headers


@dataclass(frozen=True)
class LiveAccess:
    """What the live options resolve to: extra headers, a bearer token, a TLS context."""

    headers: dict[str, str]
    token: Any  # BearerToken | None (imported lazily)
    tls: ssl.SSLContext | None


def live_access(args: argparse.Namespace) -> LiveAccess:
    """``--header``, ``--token-file``/``--token-env`` and ``--ca-file``, each checked.

    Errors name the option (and the file), never a header value or a token.
    """
    from inference_obs.source.auth import BearerToken, read_token_file
    from inference_obs.source.tls import TLS

    headers = _headers(args.header)
    token_file = None if args.token_file is None else _readable(args.token_file, "--token-file")
    if token_file is not None:
        try:  # read once now, so that a pipe or a huge file is refused before any request
            read_token_file(token_file)
        except ConfigurationError as exc:
            raise ConfigurationError(f"--token-file: {exc}") from None
    ca_file = None if args.ca_file is None else _readable(args.ca_file, "--ca-file")
    if args.token_env is not None and not os.environ.get(args.token_env):
        raise ConfigurationError(
            f"--token-env {args.token_env!r}: that variable is not set or empty"
        )
    if args.token_file is not None and args.token_env is not None:
        raise ConfigurationError("give one credential, not --token-file and --token-env")
    try:
        tls = None if ca_file is None else TLS(ca_file=ca_file).context()
    except ConfigurationError as exc:  # readable, but holds no certificate
        raise ConfigurationError(f"--ca-file {args.ca_file}: not a CA bundle ({exc})") from None
    if not (math.isfinite(args.max_answer_mb) and args.max_answer_mb * 2**20 >= 1):
        raise ConfigurationError(f"--max-answer-mb {args.max_answer_mb}: expected a size above 0")
    token = (
        BearerToken(file=token_file)
        if token_file is not None
        else BearerToken(env=args.token_env)
        if args.token_env is not None
        else None
    )
    return LiveAccess(headers, token, tls)


def open_prometheus(args: argparse.Namespace) -> Any:
    """A :class:`~inference_obs.source.prometheus.PrometheusSource` from the live options.

    Every option is checked first, naming itself; building the source sends
    nothing. A ``--time-budget`` (when the command has one) becomes the
    source's deadline (:func:`budget_deadline`), so a request still running
    when the budget ends stops then.
    """
    from inference_obs.source.endpoint import parse_base_url
    from inference_obs.source.prometheus import PrometheusSource

    try:
        _, userinfo = parse_base_url(args.prometheus)
    except ConfigurationError as exc:  # the URL is shown redacted, if at all
        raise ConfigurationError(f"--prometheus: {exc}") from None
    access = live_access(args)
    if userinfo is not None and access.token is not None:
        given = "--token-file" if args.token_file is not None else "--token-env"
        raise ConfigurationError(
            f"give one credential, not {given} and a user:password@ in --prometheus"
        )
    if args.parallel < 1:
        raise ConfigurationError(f"--parallel {args.parallel}: expected a whole number >= 1")
    deadline = budget_deadline(args)
    try:
        return PrometheusSource(
            args.prometheus,
            auth=access.token,
            headers=access.headers,
            tls=access.tls,
            parallel=args.parallel,
            max_answer_bytes=round(args.max_answer_mb * 2**20),
            deadline=deadline,
        )
    except ConfigurationError as exc:  # the source's own checks; no secret in them
        raise ConfigurationError(f"--prometheus: {exc}") from None


def prices(items: Sequence[str]) -> dict[str, float]:
    """``NAME=PRICE`` pairs (GPU-hour rent per deployment), each price finite and > 0.

    The bounds are the deployment's own (``hardware.gpu_hour_price``), checked
    here so a bad price stops the run before the deployments are read.
    """
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        price = number(value)
        if not sep or not name or price is None or not 0 < price <= MAX_GPU_HOUR_PRICE:
            raise ConfigurationError(
                f"--gpu-hour-price {item!r}: expected NAME=PRICE with a price > 0 and at most "
                f"{MAX_GPU_HOUR_PRICE:g}, e.g. H20=2.5"
            )
        if name in out:
            raise ConfigurationError(f"--gpu-hour-price {item!r}: {name} has a price already")
        out[name] = price
    return out


def topologies(items: Sequence[str]) -> dict[str, Topology]:
    """``NAME=FILE`` pairs, each file the ``nvidia-smi topo -m`` output of a deployment.

    Each file is read and parsed here, so an empty or unreadable one is refused
    naming its line before any query; the deployment named is given it.
    """
    files: dict[str, tuple[str, str]] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigurationError(f"--topology {item!r}: expected NAME=FILE, e.g. H100=topo.txt")
        if name in files:
            raise ConfigurationError(f"--topology {item!r}: {name} has a topology already")
        files[name] = (item, path)
    parsed = {}
    for name, (item, path) in files.items():
        try:
            with Path(path).open(encoding="utf-8") as file:
                text = file.read(MAX_TEXT_CHARS + 1)  # one more: parse_topology names the limit
        except (OSError, UnicodeDecodeError) as exc:
            problem = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigurationError(
                f"--topology {item!r}: cannot read {path}: {problem}"
            ) from None
        try:  # read now, so a bad file stops the run before any work, not after the analyses
            parsed[name] = parse_topology(text)
        except TopologyError as exc:
            raise ConfigurationError(f"--topology {item!r}: {path}: {exc}") from None
    return parsed


def resolution(text: str) -> Resolution:
    """``--resolution``: ``auto``, ``scrape``, or a tile width (seconds, or a duration: ``1m``).

    A width must be a positive whole number of milliseconds; whether it cuts
    the window into equal tiles is checked once the window is known.
    """
    if text in ("auto", "scrape"):
        return "auto" if text == "auto" else "scrape"
    try:
        return check_duration(duration_seconds(text), where="--resolution")
    except QueryError:
        raise ConfigurationError(
            f"--resolution {text!r}: expected auto, scrape, or a tile width such as 60 or 1m"
        ) from None


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


def number(text: str) -> float | None:
    """``text`` as Python's ``float`` reads it (``15``, ``1.5``, ``1e3``, ``nan``), or None.

    The one place an option's number is parsed: ``float`` says "not a number"
    only by ValueError, and nothing but ``float`` runs inside the ``try``.

    >>> number("1.5"), number("1m")
    (1.5, None)
    """
    try:
        return float(text)
    except ValueError:
        return None


def duration_seconds(text: str) -> float:
    """``text`` as seconds: a number (``60``, ``1.5``), else a PromQL duration (``1m``).

    >>> duration_seconds("90"), duration_seconds("1m30s")
    (90.0, 90.0)

    Raises
    ------
    QueryError
        When ``text`` is neither (from :func:`~inference_obs.query.names.parse_duration`).
    """
    seconds = number(text)
    return parse_duration(text) if seconds is None else seconds


def positive_seconds(text: str, option: str) -> float:
    """``text`` as a finite number of seconds above 0, e.g. ``--time-budget 600``."""
    seconds = number(text)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(f"{option} {text!r}: expected seconds above 0, e.g. 600")
    return seconds


def analysis_settings(
    assignments: Sequence[str], slos: Sequence[str] = (), currency: str | None = None
) -> dict[str, dict[str, str]]:
    """``--set analysis.setting=value`` options, checked against each analysis's settings.

    ``slos`` (``--slo ttft<=2s@99%``, repeatable) replace the SLO analysis's targets
    (``slo.targets``); ``currency`` (``--currency EUR``) is the cost analysis's
    ``cost.currency``. Each is checked by its analysis's settings and named in its error.

    Raises
    ------
    ConfigurationError
        Naming the option when an analysis or setting is unknown or its value invalid.
    """
    from inference_obs.analyses.registry import parse_settings, settings_for

    try:
        overrides = parse_settings(assignments)
        settings_for(overrides)
    except ConfigurationError as exc:
        raise ConfigurationError(f"--set: {exc}") from None
    for option, name, field, value in (
        ("--slo", "slo", "targets", ",".join(slos) if slos else None),
        ("--currency", "cost", "currency", currency),
    ):
        if value is None:
            continue
        chosen = {**overrides, name: {**overrides.get(name, {}), field: value}}
        try:
            settings_for(chosen)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{option}: {exc}") from None
        overrides = chosen
    return overrides
