"""``dataset export``, ``verify``, ``from-scrapes``: publish, recheck, convert saved scrapes."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from inference_obs.cli.capture import register_from_scrapes
from inference_obs.cli.options import add_live_options, add_window_options, open_prometheus, window
from inference_obs.errors import InferenceObsError

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
        "verify", help="recompute a dataset's published numbers; exit 1 if one differs"
    )
    verify.add_argument("dir", help="dataset directory")
    verify.add_argument(
        "--rel-tol", type=float, default=1e-9, help="relative tolerance (default 1e-9)"
    )
    verify.set_defaults(run=_dataset_verify)
    register_from_scrapes(actions)


def _dataset_export(args: argparse.Namespace) -> int:
    from inference_obs.analyses.published import published_aggregates
    from inference_obs.metrics import family
    from inference_obs.source.dataset.export import export_dataset
    from inference_obs.source.deployments_file import load_deployments, load_rules

    span = window(args) if args.end is not None else None
    if span is None:
        raise InferenceObsError("dataset export needs --end, and --start or --window")
    source = open_prometheus(args)
    deployments = load_deployments(args.deployments)
    names = ", ".join(d.name for d in deployments)
    done = export_dataset(
        source,
        deployments,
        span,
        Path(args.out),
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
    from inference_obs.analyses.verify import RowStatus, verify_dataset

    def number(value: float | None, sign: str = "") -> str:
        return "null" if value is None else f"{value:{sign}.10g}"

    if not math.isfinite(args.rel_tol) or args.rel_tol < 0:
        # A NaN tolerance fails every number; an infinite one passes any but 0 (0 x inf is NaN).
        raise InferenceObsError(f"--rel-tol {args.rel_tol!r}: expected a finite number >= 0")
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
        problem = "differ or are missing" if result.failures else "none could be recomputed"
        print(f"inference-obs: {result.path}: published numbers {problem}", file=sys.stderr)
        return 1
    return 0
