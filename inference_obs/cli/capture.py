"""``capture`` and ``dataset from-scrapes``: observe engines and GPUs without a Prometheus.

``inference-obs capture --url URL [--url URL ...] --interval 15s --duration 1h --out DIR``
scrapes each ``/metrics`` endpoint read-only (GET only, bounded) and writes an
observation dataset; Ctrl-C or SIGTERM (a CronJob's deadline) ends it early and
still writes one. What it accepts is bounded (:mod:`inference_obs.source.limits`).
``inference-obs dataset from-scrapes DIR_OR_FILE ... --out DIR`` converts
saved answers instead (the forms are in :mod:`inference_obs.source.scrape_files`).
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from inference_obs.cli.options import (
    add_live_options,
    dataset_out,
    duration_seconds,
    live_access,
)
from inference_obs.errors import ConfigurationError, QueryError
from inference_obs.source.limits import MAX_SCRAPE_ANSWER_BYTES, MIN_INTERVAL_S

__all__ = ["register", "register_from_scrapes"]

# A scrape attempt may take at most this long by default (Prometheus's scrape_timeout).
_DEFAULT_TIMEOUT_S = 10.0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``capture`` to the top-level subparsers."""
    command = commands.add_parser(
        "capture",
        help="scrape vLLM/SGLang/dcgm-exporter /metrics read-only into a dataset (no Prometheus)",
        description=(
            "Scrape each --url every --interval for --duration, as a Prometheus scrape job "
            "would (GET only; job and instance labels added; a failed scrape recorded as up 0), "
            "and write an observation dataset that `inference-obs report --dataset DIR` reads. "
            "Ctrl-C or SIGTERM ends the capture early and still writes the dataset; --duration "
            "is kept even while a large answer is read. Without --deployments one deployment "
            "is proposed per model_name served."
        ),
    )
    command.add_argument(
        "--url",
        action="append",
        required=True,
        metavar="[JOB=]URL",
        help="a /metrics endpoint, e.g. vllm=http://10.0.0.1:8000/metrics (repeatable; "
        "job defaults to 'capture', the path to /metrics)",
    )
    command.add_argument(
        "--interval",
        default="15s",
        help=f"time between scrapes: 15s, 500ms, or seconds (default 15s, at least "
        f"{MIN_INTERVAL_S * 1000:g}ms)",
    )
    command.add_argument("--duration", default="1h", help="how long to scrape (default 1h)")
    command.add_argument("--out", required=True, help="new dataset directory")
    command.add_argument(
        "--deployments", metavar="FILE", help="deployments YAML/JSON (default: proposed)"
    )
    command.add_argument("--title", help="one line saying what was observed")
    command.add_argument(
        "--timeout",
        metavar="SECONDS",
        help=f"limit of one scrape attempt (default {_DEFAULT_TIMEOUT_S:g} s or the interval)",
    )
    command.add_argument(
        "--retries",
        type=int,
        default=1,
        metavar="N",
        help="further attempts of a failed scrape within its interval (default 1)",
    )
    add_live_options(command, max_answer_bytes=MAX_SCRAPE_ANSWER_BYTES)
    command.set_defaults(run=_capture)


def register_from_scrapes(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``from-scrapes`` to the ``dataset`` subcommands."""
    command = actions.add_parser(
        "from-scrapes",
        help="convert saved /metrics answers into a dataset",
        description=(
            "Read saved scrapes and write a dataset as `inference-obs capture` writes it. A file "
            "holds several scrapes, each starting with a line '# SCRAPE TIME [JOB=]URL' (TIME in "
            "unix seconds or ISO 8601 with an offset), or one scrape named "
            "[JOB=]HOST[:PORT]@TIME.EXT (TIME also compact UTC, 20260501T120015Z)."
        ),
    )
    command.add_argument("paths", nargs="+", metavar="DIR_OR_FILE", help="scrape files or folders")
    command.add_argument("--out", required=True, help="new dataset directory")
    command.add_argument(
        "--deployments", metavar="FILE", help="deployments YAML/JSON (default: proposed)"
    )
    command.add_argument(
        "--interval", help="nominal scrape interval (default: the median gap between scrapes)"
    )
    command.add_argument("--title", help="one line saying what was observed")
    command.set_defaults(run=_from_scrapes)


def _seconds(text: str, option: str) -> float:
    """``text`` as seconds above 0: a number (``15``) or a duration (``15s``, ``1h``)."""
    try:
        seconds = duration_seconds(text)
    except QueryError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ConfigurationError(f"{option} {text!r}: expected a duration such as 15s or 1h")
    return seconds


def _clients(args: argparse.Namespace, timeout: float) -> list[Any]:
    """One read-only scrape client per --url; every option is checked first."""
    from inference_obs.source.http import Limits
    from inference_obs.source.scrape import ScrapeClient, parse_target
    from inference_obs.source.transport import PooledTransport

    targets = []
    for i, text in enumerate(args.url, 1):
        try:
            targets.append(parse_target(text))
        except ConfigurationError as exc:  # the URL is shown redacted
            raise ConfigurationError(f"--url number {i}: {exc}") from None
    keys = [(t.job, t.instance) for t, _ in targets]
    if len(set(keys)) != len(keys):
        raise ConfigurationError("two --url give the same job and instance; name their jobs apart")
    access = live_access(args)
    headers, token, tls = access.headers, access.token, access.tls
    if args.retries < 0:
        raise ConfigurationError(f"--retries {args.retries}: expected a whole number >= 0")
    limits = Limits(
        timeout=timeout,
        retries=args.retries,
        backoff=min(0.5, timeout / 4),
        max_answer_bytes=round(args.max_answer_mb * 2**20),
    )
    clients = []
    for i, (target, userinfo) in enumerate(targets, 1):
        if userinfo is not None and token is not None:
            raise ConfigurationError(f"--url number {i}: give one credential, not two")
        transport = PooledTransport(target.endpoint, tls=tls, size=1)
        try:
            clients.append(
                ScrapeClient(
                    target, transport, auth=userinfo or token, headers=headers, limits=limits
                )
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"--header: {exc}") from None
    return clients


def _capture(args: argparse.Namespace) -> int:
    from inference_obs.source.capture import Progress, capture
    from inference_obs.source.deployments_file import load_deployments

    interval = _seconds(args.interval, "--interval")
    duration = _seconds(args.duration, "--duration")
    if interval < MIN_INTERVAL_S:
        raise ConfigurationError(
            f"--interval {args.interval!r}: at least {MIN_INTERVAL_S * 1000:g}ms between scrapes"
        )
    timeout = min(interval, _DEFAULT_TIMEOUT_S)
    if args.timeout is not None:
        timeout = _seconds(args.timeout, "--timeout")
        if timeout > interval:
            raise ConfigurationError(f"--timeout {args.timeout!r} is longer than --interval")
    if args.parallel < 1:
        raise ConfigurationError(f"--parallel {args.parallel}: expected a whole number >= 1")
    deployments = load_deployments(args.deployments) if args.deployments else None
    out = dataset_out(args.out)
    clients = _clients(args, timeout)
    tty = sys.stderr.isatty()

    def report(now: Progress) -> None:
        line = (
            f"inference-obs: capture: {now.scrapes} scrapes, {now.failures} failed, "
            f"{now.elapsed_s:.0f} s of {duration:g} s"
        )
        if tty:
            # The return alone, a write of its own: the terminal filter passes it
            # (inference_obs.cli.terminal).
            sys.stderr.write("\r")
        print(line, end="" if tty else "\n", file=sys.stderr, flush=True)

    def told(line: str) -> None:
        print(
            ("\n" if tty else "") + f"inference-obs: capture: {line}", file=sys.stderr, flush=True
        )

    stop = threading.Event()
    # SIGTERM is how a CronJob's deadline or a pod's deletion ends a capture: kept like Ctrl-C.
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}

    def interrupted(signum: int, frame: object) -> None:
        stop.set()
        # A second signal stops at once, without a dataset.
        for again, handler in previous.items():
            signal.signal(again, handler)

    for signum in previous:
        signal.signal(signum, interrupted)
    try:
        dataset = capture(
            clients,
            out,
            interval_s=interval,
            duration_s=duration,
            deployments=deployments,
            title=args.title,
            stop=stop,
            progress=report,
            parallel=args.parallel,
            proposal=told,
        )
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for client in clients:
            client.close()
        if tty:
            print(file=sys.stderr)
    _wrote(dataset)
    return 0


def _from_scrapes(args: argparse.Namespace) -> int:
    from inference_obs.source.deployments_file import load_deployments
    from inference_obs.source.scrape_files import dataset_from_scrapes

    interval = None if args.interval is None else _seconds(args.interval, "--interval")
    deployments = load_deployments(args.deployments) if args.deployments else None
    dataset = dataset_from_scrapes(
        [Path(p) for p in args.paths],
        dataset_out(args.out),
        deployments=deployments,
        interval_s=interval,
        title=args.title,
    )
    _wrote(dataset)
    return 0


def _wrote(dataset: Any) -> None:
    samples = dataset.samples
    names = ", ".join(d.name for d in dataset.manifest.deployments)
    print(
        f"wrote {dataset.path}: {len(samples)} series, {int(samples.offsets[-1]):,} samples; "
        f"deployments {names}"
    )
