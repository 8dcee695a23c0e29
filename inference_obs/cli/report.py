"""``report`` and ``compare``: the observation report, and the comparison verdicts alone."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from inference_obs.analyses.resolution import ROWS
from inference_obs.cli.options import (
    EXIT_BUDGET,
    EXIT_INVALID,
    EXIT_NO_DATA,
    EXIT_OK,
    EXIT_SOURCE,
    add_live_options,
    add_window_options,
    open_prometheus,
    positive_seconds,
    prices,
    resolution,
    topologies,
    window,
)
from inference_obs.deployment import Deployment
from inference_obs.errors import InferenceObsError
from inference_obs.samples import Window
from inference_obs.source.base import Source

__all__ = ["DEFAULT_DATASET", "register"]

#: The dataset ``inference-obs report`` reads when given no source.
DEFAULT_DATASET = "pro5000-vs-h20"
Say = Callable[[str], None]


def _bundled(name: str, say: Say) -> Path:
    """The bundled dataset ``name``: ``datasets/<name>`` here, else regenerated from its scenario.

    The bundled datasets are the simulator's output for their scenario's own
    seed, so regenerating one gives the same files.
    """
    here = Path("datasets") / name
    if (here / "manifest.json").is_file():
        return here
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "inference-obs" / name
    if not (cache / "manifest.json").is_file():
        from inference_obs.simulate import simulate

        say(f"no datasets/{name} here: regenerating it from its scenario into {cache}")
        if cache.exists():
            shutil.rmtree(cache)
        simulate(name, cache)
    return cache


@dataclass(frozen=True)
class _Opened:
    """What the source options resolve to."""

    source: Source
    deployments: Sequence[Deployment]
    window: Window
    name: str
    scrape_interval_seconds: float | None = None
    methodology: tuple[str, ...] = ()
    title: str = "Observation report"


def _open(args: argparse.Namespace, say: Say) -> _Opened:
    """The source, deployments and window the options name; the options are checked first."""
    from inference_obs.source.dataset_source import DatasetSource
    from inference_obs.source.deployments_file import load_deployments

    if args.prometheus is not None and args.dataset is not None:
        raise InferenceObsError("give --prometheus or --dataset, not both")
    span = window(args)
    if args.prometheus is not None:
        source = open_prometheus(args)  # checks the live options; sends nothing
        if not args.deployments:
            raise InferenceObsError("a live source needs --deployments FILE (YAML or manifest)")
        if span is None:
            raise InferenceObsError("reading a live source needs --end and --start or --window")
        return _Opened(source, load_deployments(args.deployments), span, source.url)
    # Without --prometheus these would be ignored, and the report read a dataset
    # (by default the bundled one) where the user meant a live source.
    for option, value in (
        ("--token-file", args.token_file),
        ("--token-env", args.token_env),
        ("--ca-file", args.ca_file),
        ("--header", args.header or None),
    ):
        if value is not None:
            raise InferenceObsError(f"{option} is for a live source: give --prometheus URL too")
    if args.dataset == "":
        raise InferenceObsError("--dataset: empty; give a dataset directory")
    path = Path(args.dataset) if args.dataset is not None else _bundled(DEFAULT_DATASET, say)
    dataset = DatasetSource(path)
    manifest = dataset.dataset.manifest
    return _Opened(
        dataset,
        load_deployments(args.deployments) if args.deployments else manifest.deployments,
        span or manifest.window.window(),
        str(path),
        manifest.scrape_interval_seconds,
        tuple(manifest.methodology),
        manifest.title,
    )


def _named(given: Collection[str], deployments: Sequence[Deployment], option: str) -> None:
    """Refuse a name in ``given`` that is no deployment's (it would be ignored)."""
    names = [d.name for d in deployments]
    for name in given:
        if name not in names:
            raise InferenceObsError(
                f"{option}: no deployment is named {name!r} (there are {', '.join(names)})"
            )


def _report(args: argparse.Namespace) -> int:
    from inference_obs.analyses.validity import Verdict
    from inference_obs.errors import SourceError, TimeBudgetExceeded
    from inference_obs.report import ReportTimeout, build_report, write_report
    from inference_obs.report.write import FORMATS

    def say(line: str) -> None:
        if not args.quiet:
            print(f"inference-obs: {line}", file=sys.stderr)

    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    if not formats or set(formats) - set(FORMATS):
        raise InferenceObsError(f"--format {args.format!r}: expected any of {','.join(FORMATS)}")
    budget_s = (
        None if args.time_budget is None else positive_seconds(args.time_budget, "--time-budget")
    )
    read_at = resolution(args.resolution)
    gpu_hour_prices = prices(args.gpu_hour_price)
    topology_texts = topologies(args.topology)
    try:
        opened = _open(args, say)
        _named(gpu_hour_prices, opened.deployments, "--gpu-hour-price")
        _named(topology_texts, opened.deployments, "--topology")
        report = build_report(
            opened.source,
            opened.deployments,
            opened.window,
            title=opened.title,
            source_name=opened.name,
            gpu_hour_prices=gpu_hour_prices,
            topologies=topology_texts,
            scrape_interval_seconds=opened.scrape_interval_seconds,
            methodology=opened.methodology,
            figures=bool({"md", "html"} & set(formats)),
            progress=say,
            budget_s=budget_s,
            resolution=read_at,
        )
        written = write_report(report, Path(args.out), formats)
    except (ReportTimeout, TimeBudgetExceeded) as exc:
        print(f"inference-obs: {exc}", file=sys.stderr)
        return EXIT_BUDGET
    except SourceError as exc:
        print(f"inference-obs: source error: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except ValueError as exc:
        raise InferenceObsError(str(exc)) from exc
    if not args.quiet:
        for fmt in formats:
            print(f"wrote {written[fmt]}")
    empty = [d.deployment.name for d in report.deployments if not d.has_data]
    if empty:
        print(f"inference-obs: no data for {', '.join(empty)}", file=sys.stderr)
        return EXIT_NO_DATA
    invalid = report.validity is not None and any(
        v.verdict is Verdict.INVALID for p in report.validity.pairs for v in p.verdicts.values()
    )
    if args.fail_on == "invalid-comparison" and invalid:
        print("inference-obs: some comparisons are invalid (see the verdicts)", file=sys.stderr)
        return EXIT_INVALID
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from inference_obs.analyses.resolution import step_for
    from inference_obs.analyses.validity import Verdict, validity, windows_by_name
    from inference_obs.errors import SourceError

    read_at = resolution(args.resolution)
    gpu_hour_prices = prices(args.gpu_hour_price)
    topology_texts = topologies(args.topology)
    try:
        opened = _open(args, lambda line: None)
        _named(gpu_hour_prices, opened.deployments, "--gpu-hour-price")
        _named(topology_texts, opened.deployments, "--topology")
        windows = windows_by_name(opened.deployments, opened.window)
        steps = {
            d.name: step_for(opened.source, d, windows[d.name], read_at) for d in opened.deployments
        }
        result = validity(
            opened.source,
            opened.deployments,
            windows,
            gpu_hour_prices=gpu_hour_prices or None,
            topologies=topology_texts,
            steps={name: step for name, step in steps.items() if step is not None},
        )
    except SourceError as exc:
        print(f"inference-obs: source error: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except ValueError as exc:
        raise InferenceObsError(str(exc)) from exc
    print(result.to_frame().to_string(index=False))
    print()
    findings = result.findings_frame()
    print(findings[["a", "b", "code", "severity", "evidence"]].to_string(index=False))
    worst = {v.verdict for p in result.pairs for v in p.verdicts.values()}
    if args.fail_on == "invalid" and Verdict.INVALID in worst:
        return EXIT_INVALID
    if args.fail_on == "caveated" and worst - {Verdict.VALID}:
        return EXIT_INVALID
    return EXIT_OK


def _source_options(command: argparse.ArgumentParser) -> None:
    where = command.add_argument_group("what to read")
    where.add_argument("--dataset", help="an observation dataset directory (offline)")
    where.add_argument(
        "--prometheus", metavar="URL", help="a Prometheus-compatible API, http(s)://... (live)"
    )
    where.add_argument(
        "--deployments",
        metavar="FILE",
        help="deployments YAML/JSON (a dataset manifest works too)",
    )
    add_window_options(command)
    add_live_options(command)
    command.add_argument(
        "--topology",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="`nvidia-smi topo -m` output of a deployment's boxes (repeatable)",
    )
    command.add_argument(
        "--resolution",
        default="auto",
        metavar="auto|scrape|SECONDS",
        help="how queueing, stage boundaries and the sampled shares read app scrapes: auto "
        f"(each scrape up to {ROWS:,} series x scrapes per deployment, else the narrowest "
        "tiles that fit), scrape, or a tile width such as 60 or 1m (default: auto)",
    )
    command.add_argument(
        "--gpu-hour-price",
        action="append",
        default=[],
        metavar="NAME=PRICE",
        help="GPU-hour rent for a deployment, for cost per token (repeatable)",
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report`` and ``compare`` to the top-level subparsers."""
    report = commands.add_parser(
        "report",
        help=f"write an observation report (default: on the bundled {DEFAULT_DATASET} dataset)",
    )
    _source_options(report)
    report.add_argument("--out", default="report", help="output directory (default: report)")
    report.add_argument("--format", default="md,html,json", help="any of md,html,json")
    report.add_argument("--quiet", action="store_true", help="no progress, no list of files")
    report.add_argument(
        "--fail-on",
        choices=("invalid-comparison",),
        default=None,
        help=f"exit {EXIT_INVALID} when a comparison is invalid",
    )
    report.add_argument(
        "--time-budget",
        default=None,
        metavar="SECONDS",
        help=f"give up (exit {EXIT_BUDGET}) after this long",
    )
    report.set_defaults(run=_report)

    compare = commands.add_parser(
        "compare", help="say which comparisons between deployments mean something"
    )
    _source_options(compare)
    compare.add_argument(
        "--fail-on",
        choices=("invalid", "caveated"),
        default=None,
        help=f"exit {EXIT_INVALID} when a comparison is at least this bad",
    )
    compare.set_defaults(run=_compare)
