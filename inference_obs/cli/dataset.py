"""``dataset export``, ``verify``, ``from-scrapes``, ``load``: publish, recheck, convert, load."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from inference_obs.cli.capture import register_from_scrapes
from inference_obs.cli.options import (
    add_live_options,
    add_window_options,
    dataset_out,
    open_prometheus,
    window,
)
from inference_obs.errors import ConfigurationError

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``dataset export`` and ``dataset verify`` on the top-level subparsers."""
    dataset = commands.add_parser("dataset", help="export a sanitised dataset, or verify one")
    actions = dataset.add_subparsers(dest="action", required=True)
    export = actions.add_parser(
        "export", help="read a Prometheus read-only and write a sanitised observation dataset"
    )
    export.add_argument(
        "--prometheus",
        required=True,
        metavar="URL",
        help="Prometheus-compatible API, http(s)://...",
    )
    export.add_argument(
        "--deployments",
        required=True,
        metavar="FILE",
        help="deployments YAML/JSON (a dataset manifest or directory works too)",
    )
    export.add_argument("--out", required=True, help="new dataset directory")
    add_window_options(export)
    export.add_argument("--title", help="one line saying what was observed")
    export.add_argument(
        "--methodology", action="append", default=[], help="a methodology note (repeatable)"
    )
    export.add_argument(
        "--family",
        action="append",
        default=[],
        help="export only this catalogue family (repeatable; default: every selected series)",
    )
    export.add_argument("--rules", metavar="FILE", help="redaction rules YAML/JSON")
    add_live_options(export)
    export.set_defaults(run=_dataset_export)
    verify = actions.add_parser(
        "verify",
        help="recompute a dataset's published numbers and check the report against its "
        "ground truth; exit 1 if one differs, is missing or a bound excludes the truth",
        description="Recompute every published number of a dataset (aggregates.json) and, "
        "where it ships requests.csv, check every latency mean and quantile bound against it. "
        "Exit status: 0 when something was checked and nothing differs, is missing or is "
        "outside its bound; 1 otherwise, also when nothing could be checked; 2 when the "
        "dataset does not read.",
    )
    verify.add_argument("dir", help="dataset directory")
    verify.add_argument(
        "--rel-tol", type=float, default=1e-9, help="relative tolerance (default 1e-9)"
    )
    verify.set_defaults(run=_dataset_verify)
    register_from_scrapes(actions)
    _register_load(actions)


_LOAD_HELP = """\
Write a dataset into a Prometheus-compatible store run for the purpose, then read it
there with `report --prometheus URL --deployments DATASET/manifest.json`: the route for
a dataset larger than this machine's memory. samples.om is streamed in blocks and sent
in batches of --batch-samples; progress is printed.

The protocol follows the URL's path, or --protocol, or else the store's build info:
  vm-import     VictoriaMetrics /api/v1/import: http://vm:8428, or a vminsert path
                http://vminsert:8480/insert/0/prometheus/api/v1/import (give
                --query-url http://vmselect:8481/select/0/prometheus)
  remote-write  Prometheus (started with --web.enable-remote-write-receiver, scraping
                nothing) http://prom:9090/api/v1/write; Mimir or Cortex .../api/v1/push;
                Thanos Receive .../api/v1/receive. Sent in time order (a spool on disk,
                24 bytes a sample): a TSDB head refuses samples an hour older than its newest.

Before writing, one read-only query asks whether the store already holds the dataset's
first series in its window; if so the load is refused unless --existing write. Sending
again is harmless to Prometheus (it refuses what it holds, counted as already held) but
doubles samples in VictoriaMetrics unless it runs with -dedup.minScrapeInterval=1ms.
"""


def _register_load(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from inference_obs.source.limits import BATCH_SAMPLES

    load = actions.add_parser(
        "load",
        help="write a dataset into VictoriaMetrics or a remote-write store, to report on live",
        description=_LOAD_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    load.add_argument("dir", metavar="DATASET", help="dataset directory")
    load.add_argument(
        "--into",
        required=True,
        metavar="URL",
        help="the store: a base URL or its write URL (see above)",
    )
    load.add_argument(
        "--protocol",
        choices=["vm-import", "remote-write"],
        help="how to write (default: from the URL's path, else from the store's build info)",
    )
    load.add_argument(
        "--query-url",
        metavar="URL",
        help="the store's query API when it is not at --into's base URL "
        "(VictoriaMetrics cluster: vmselect's /select/<tenant>/prometheus; Mimir: /prometheus)",
    )
    load.add_argument(
        "--existing",
        choices=["refuse", "write"],
        default="refuse",
        help="when the store already holds the dataset's series: refuse (default), or write "
        "every sample again (resumes a load that stopped; see above)",
    )
    load.add_argument(
        "--batch-samples",
        type=int,
        default=BATCH_SAMPLES,
        metavar="N",
        help=f"most samples in one request; bounds the memory held (default: {BATCH_SAMPLES:,})",
    )
    load.add_argument(
        "--spool",
        metavar="DIR",
        help="where remote-write's time-ordered spool goes (default: TMPDIR)",
    )
    access = load.add_argument_group("access (the same credentials for writing and the check)")
    access.add_argument("--token-file", help="file holding a bearer token")
    access.add_argument("--token-env", help="environment variable holding a bearer token")
    access.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="an extra request header, e.g. 'X-Scope-OrgID: team' (repeatable)",
    )
    access.add_argument("--ca-file", help="CA bundle for TLS")
    load.set_defaults(run=_dataset_load, max_answer_mb=16.0, parallel=1)


def _dataset_load(args: argparse.Namespace) -> int:
    from inference_obs.cli.options import live_access
    from inference_obs.load import Existing, Progress, WireProtocol, WriteClient, load_dataset
    from inference_obs.load.loader import check_not_loaded
    from inference_obs.source.dataset.reader import read_manifest
    from inference_obs.source.prometheus import PrometheusSource

    if args.batch_samples < 1:
        raise ConfigurationError(
            f"--batch-samples {args.batch_samples}: expected a whole number >= 1"
        )
    path = Path(args.dir)
    manifest = read_manifest(path)  # a missing or invalid dataset is said before any request
    target = _write_target(args.into, args.query_url)
    access = live_access(args)
    auth = access.token if access.token is not None else target.auth
    if access.token is not None and target.auth is not None:
        raise ConfigurationError("give one credential, not a token option and user:password@")
    query_url = args.query_url or target.endpoint.url
    with PrometheusSource(
        query_url,
        auth=auth if args.query_url is None or access.token is not None else None,
        headers=access.headers,
        tls=access.tls,
        parallel=1,
    ) as store:
        protocol = _protocol(args.protocol, target.protocol, store, query_url)
        client = WriteClient(
            target.endpoint,
            protocol,
            path=target.path,
            auth=auth,
            headers=access.headers,
            tls=access.tls,
        )
        shown = _Shown()

        def check(name: str, labels: object) -> None:
            from inference_obs.errors import SourceError, SourceUnavailable

            try:
                check_not_loaded(store, path, name, labels, client.url)  # type: ignore[arg-type]
            except SourceError as exc:
                raise SourceUnavailable(
                    f"{store.url}: cannot ask whether it already holds this dataset ({exc}); "
                    "nothing was written (is its query API elsewhere? give --query-url)"
                ) from None

        try:
            done = load_dataset(
                path,
                client,
                existing=Existing(args.existing),
                batch_samples=args.batch_samples,
                before_writing=check if args.existing == "refuse" else None,
                progress=shown,
                spool=Path(args.spool) if args.spool else None,
            )
        finally:
            client.close()
        shown(Progress(done.samples, done.series, 1.0, done.held), final=True)
    held = f", {done.held:,} already held" if done.held else ""
    window = manifest.window.window()
    print(
        f"loaded {path} into {client.url} ({protocol.value}): {done.samples:,} samples of "
        f"{done.series:,} series in {done.requests:,} requests{held}"
    )
    print(
        f"read it with: inference-obs report --prometheus {query_url} --deployments "
        f"{path / 'manifest.json'} --end {window.end.isoformat()} --window {window.seconds:g}s"
    )
    if protocol is WireProtocol.VM_IMPORT:
        print("  (VictoriaMetrics makes imported samples searchable within a few seconds)")
    return 0


class _Shown:
    """Prints progress at most every 2 s, and always the last line."""

    def __init__(self) -> None:
        self.last = 0.0
        self.shown: object = None

    def __call__(self, progress: object, final: bool = False) -> None:
        import time

        from inference_obs.load import Progress

        assert isinstance(progress, Progress)
        now = time.monotonic()
        if (not final and now - self.last < 2.0) or progress == self.shown:
            return
        self.last, self.shown = now, progress
        if progress.stage == "spooling":
            print(f"  {progress.fraction:4.0%} read into time order", flush=True)
            return
        held = f", {progress.held:,} already held" if progress.held else ""
        print(
            f"  {progress.fraction:4.0%} sent {progress.samples:,} samples of "
            f"{progress.series:,} series{held}",
            flush=True,
        )


def _write_target(into: str, query_url: str | None) -> Any:
    from inference_obs.errors import ConfigurationError
    from inference_obs.load import parse_write_url

    try:
        target = parse_write_url(into)
    except ConfigurationError as exc:
        raise ConfigurationError(f"--into: {exc}") from None
    elsewhere = target.path not in (None, "/api/v1/write")  # Mimir, Thanos Receive
    if query_url is None and (elsewhere or "/insert/" in target.endpoint.prefix + "/"):
        raise ConfigurationError(
            f"--into {target.endpoint.url}{target.path or ''}: the query API of this store is "
            "elsewhere; give --query-url (VictoriaMetrics cluster: "
            "http://vmselect:8481/select/<tenant>/prometheus; Mimir: http://mimir/prometheus)"
        )
    return target


def _protocol(given: str | None, from_url: Any, store: Any, query_url: str) -> Any:
    from inference_obs.load import WireProtocol

    if given is not None:
        protocol = WireProtocol(given)
        if from_url is not None and from_url is not protocol:
            raise ConfigurationError(
                f"--protocol {given}: the --into URL's path is a {from_url.value} path"
            )
        return protocol
    if from_url is not None:
        return from_url
    kind = store.info().kind
    if kind == "victoriametrics":
        return WireProtocol.VM_IMPORT
    if kind in ("prometheus", "mimir", "thanos"):
        return WireProtocol.REMOTE_WRITE
    raise ConfigurationError(f"{query_url}: cannot tell how to write to it; give --protocol")


def _dataset_export(args: argparse.Namespace) -> int:
    from inference_obs.analyses.published import published_aggregates
    from inference_obs.metrics import family
    from inference_obs.source.dataset.export import export_dataset
    from inference_obs.source.deployments_file import load_deployments, load_rules

    span = window(args) if args.end is not None else None
    if span is None:
        raise ConfigurationError("dataset export needs --end, and --start or --window")
    out = dataset_out(args.out)  # refused before any query
    source = open_prometheus(args)
    deployments = load_deployments(args.deployments)
    names = ", ".join(d.name for d in deployments)
    done = export_dataset(
        source,
        deployments,
        span,
        out,
        title=args.title or f"Observation of {names}, {span.start.isoformat()}, {span.seconds:g} s",
        rules=load_rules(args.rules) if args.rules else None,
        families=[family(name) for name in args.family] or None,
        methodology=args.methodology,
        aggregates=published_aggregates,
    )
    samples, aggregates = done.dataset.samples, done.dataset.aggregates or {}
    print(
        f"wrote {done.dataset.path}: {len(samples)} series, {int(samples.offsets[-1]):,} "
        f"samples, {len(aggregates.get('measurements', {}))} published measurements"
    )
    for line in done.dataset.manifest.sanitisation:
        print(f"  {line}")
    return 0


def _dataset_verify(args: argparse.Namespace) -> int:
    from inference_obs.analyses.verify import RowStatus
    from inference_obs.report.verify import verify_dataset

    def number(value: float | None, sign: str = "") -> str:
        return "null" if value is None else f"{value:{sign}.10g}"

    if not math.isfinite(args.rel_tol) or args.rel_tol < 0:
        # A NaN tolerance fails every number; an infinite one passes any but 0 (0 x inf is NaN).
        raise ConfigurationError(f"--rel-tol {args.rel_tol!r}: expected a finite number >= 0")
    result = verify_dataset(Path(args.dir), rel_tol=args.rel_tol)
    for row in result.rows:
        line = f"{row.status.value:<16} {row.key}  published {number(row.published)}"
        if row.status is not RowStatus.NOT_RECOMPUTABLE:
            line += (
                f"  recomputed {number(row.recomputed)}  difference {number(row.difference, '+')}"
            )
        print(line + (f"  ({row.reason})" if row.reason else ""))
    counts = {s: sum(r.status is s for r in result.rows) for s in RowStatus}
    print(", ".join(f"{n} {s.value}" for s, n in counts.items()) + f" ({result.layout} layout)")
    if not result.passed:
        problem = (
            "differ, are missing or fall outside their bounds"
            if result.failures
            else "none could be recomputed"
        )
        print(f"inference-obs: {result.path}: published numbers {problem}", file=sys.stderr)
        return 1
    return 0
