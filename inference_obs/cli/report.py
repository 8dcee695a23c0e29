"""``report`` and ``compare``: the observation report, and the comparison verdicts alone.

``report`` checks every option and input file first (:func:`_checked`), then
reads, computes, and writes the new report whole
(:func:`~inference_obs.report.write.write_report`), replacing the previous
one only then. A run that fails or is interrupted leaves ``--out`` exactly as
it was, the last good report included; its exit status says it failed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from inference_obs.cli.budget import MARGIN_S, ends_by
from inference_obs.cli.memory import hand_back_freed, share_heaps
from inference_obs.cli.options import (
    EXIT_BUDGET,
    EXIT_INVALID,
    EXIT_NO_DATA,
    EXIT_OK,
    EXIT_REGRESSION,
    analysis_settings,
    budget_deadline,
    positive_seconds,
    prices,
    resolution,
    topologies,
    unwritable,
)
from inference_obs.cli.sources import DEFAULT_DATASET, Opened, add_source_options, note, plan
from inference_obs.cli.times import started
from inference_obs.errors import (
    ConfigurationError,
    DatasetError,
    SourceError,
)
from inference_obs.reading.resolution import ROWS, Resolution

if TYPE_CHECKING:
    from inference_obs.analyses.run import DeploymentResults
    from inference_obs.analyses.validity.verdicts import ValidityResult
    from inference_obs.report import Report
    from inference_obs.report.report_json_model import ReportDocument
    from inference_obs.topology import Topology

__all__ = ["DEFAULT_DATASET", "register"]

#: What ``report --fail-on`` accepts (comma-separated), and the status each gives.
FAIL_ON = {"invalid-comparison": EXIT_INVALID, "regression": EXIT_REGRESSION}


@dataclass(frozen=True)
class _Checked:
    """``report``'s options, each checked, and its input files read; no work done yet."""

    formats: tuple[str, ...]
    budget_s: float
    deadline: float | None
    read_at: Resolution
    prices: dict[str, float]
    topologies: dict[str, Topology]
    fail_on: frozenset[str]
    out: Path
    baseline: ReportDocument | None
    settings: dict[str, dict[str, str]]


def _fail_on(text: str | None) -> frozenset[str]:
    given = frozenset(f.strip() for f in (text or "").split(",") if f.strip())
    if text is not None and (not given or given - set(FAIL_ON)):
        raise ConfigurationError(f"--fail-on {text!r}: expected any of {','.join(FAIL_ON)}")
    return given


def _checked(args: argparse.Namespace) -> _Checked:
    """Every option of ``report`` that needs no source, checked; files read but not written."""
    from inference_obs.report.write import FORMATS, check_output

    formats = tuple(dict.fromkeys(f.strip() for f in args.format.split(",") if f.strip()))
    if not formats or set(formats) - set(FORMATS):
        raise ConfigurationError(f"--format {args.format!r}: expected any of {','.join(FORMATS)}")
    deadline = budget_deadline(args)  # checks --time-budget
    read_at = resolution(args.resolution)
    settings = analysis_settings(args.settings, args.slo, args.currency)
    gpu_hour_prices = prices(args.gpu_hour_price)
    boxes = topologies(args.topology)
    fail_on = _fail_on(args.fail_on)
    if "regression" in fail_on and args.baseline is None:
        raise ConfigurationError("--fail-on regression needs --baseline PREVIOUS/report.json")
    previous = None
    if args.baseline is not None:
        from inference_obs.report.baseline import read_report_json

        if not args.baseline:
            raise ConfigurationError("--baseline: empty; give an earlier report.json")
        try:  # read now: --out may hold it, and it is removed before the work
            previous = read_report_json(Path(args.baseline))
        except DatasetError as exc:
            raise ConfigurationError(f"--baseline {exc}") from None
    if not args.out:
        raise ConfigurationError("--out: empty; give a directory")
    out = Path(args.out)
    try:
        check_output(out)
    except ConfigurationError as exc:
        raise ConfigurationError(f"--out {exc}") from None
    return _Checked(
        formats,
        0.0 if args.time_budget is None else positive_seconds(args.time_budget, "--time-budget"),
        deadline,
        read_at,
        gpu_hour_prices,
        boxes,
        fail_on,
        out,
        previous,
        settings,
    )


def _remaining(deadline: float | None) -> float | None:
    """Seconds of the budget left (None: no budget); a spent budget ends the run here."""
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        from inference_obs.report import ReportTimeout

        raise ReportTimeout("the time budget ran out before the analyses started")
    return left


def _matched(d: DeploymentResults) -> bool:
    """Whether both the deployment's app series and its GPU series were found."""
    from inference_obs.analyses import gpu, throughput

    return d.of(throughput).replicas_seen.ok and bool(d.of(gpu).gpus_with_samples.value)


def _unmatched(opened: Opened, names: Collection[str]) -> None:
    """Say, naming each, which selectors of the deployments ``names`` match nothing.

    Asked only of deployments where something read no data, so a report of a
    healthy fleet sends no extra request. The check is advice: a source that
    fails it is said, not fatal (the report is already written).
    """
    from inference_obs.discover import unmatched_selectors

    if not names:
        return
    suspects = [d for d in opened.deployments if d.name in names]
    try:
        lines = unmatched_selectors(opened.source, suspects, opened.window)
    except SourceError as exc:
        lines = [f"could not check the selectors of {', '.join(names)}: {exc}"]
    for line in lines:
        note(line)


def _built(
    args: argparse.Namespace, checked: _Checked, say: Callable[[str], None], now: datetime
) -> tuple[Opened, Report]:
    """The source opened and the report built from it (with its baseline), not yet written.

    The prices and topologies given are set on the deployments once, by :func:`plan`.
    """
    planned = plan(
        args,
        say,
        now,
        gpu_hour_prices=checked.prices,
        topologies=checked.topologies,
        resolution=checked.read_at,
    )
    if checked.baseline is not None:  # a baseline of other deployments would compare nothing
        from inference_obs.report.baseline import check_in_common

        try:
            check_in_common(checked.baseline, [d.name for d in planned.deployments], args.baseline)
        except DatasetError as exc:
            raise ConfigurationError(f"--baseline {exc}") from None
    # Every option and input is checked: the work starts here.
    from inference_obs.report import from_source

    # The previous report in --out stays until this one is written whole (write_report
    # stages and swaps): a run that fails leaves a scheduled job its last good report.
    opened = planned.open(checked.deadline)
    # As obs.report builds it: title, methodology and scrape interval from a dataset.
    report = from_source.report(
        opened.source,
        opened.deployments,
        window=opened.window,
        settings=checked.settings,
        progress=say,
        budget_s=_remaining(checked.deadline),
        resolution=checked.read_at,
    )
    if checked.baseline is not None:
        from inference_obs.report.with_baseline import with_baseline

        report = with_baseline(report, checked.baseline, args.baseline)
    return opened, report


def _report(args: argparse.Namespace) -> int:
    def say(line: str) -> None:
        if not args.quiet:
            print(f"inference-obs: {line}", file=sys.stderr)

    now = started()
    checked = _checked(args)
    from inference_obs.analyses.facts import has_data
    from inference_obs.analyses.validity.verdicts import Verdict
    from inference_obs.report import write_report

    share_heaps()  # before the analyses' threads start
    # The whole run ends by the deadline: reading, analyses, figures, staging the files.
    with ends_by(checked.deadline, checked.budget_s) as commit:
        opened, report = _built(args, checked, say, now)
        hand_back_freed()  # the analyses' answers are garbage: the writing need not add to them
        try:
            written = write_report(report, checked.out, checked.formats, before_moving=commit)
        except OSError as exc:
            raise unwritable(checked.out, "the report", exc) from None
    if not args.quiet:
        for key in (*checked.formats, *sorted(k for k in written if k.startswith("figure:"))):
            print(f"wrote {written[key]}")
    _unmatched(opened, [d.deployment.name for d in report.deployments if not _matched(d)])
    empty = [d.deployment for d in report.deployments if not has_data(d)]
    if empty:
        print(f"inference-obs: no data for {', '.join(d.name for d in empty)}", file=sys.stderr)
        return EXIT_NO_DATA
    invalid = report.validity is not None and any(
        v.verdict is Verdict.INVALID for p in report.validity.pairs for v in p.verdicts.values()
    )
    if "invalid-comparison" in checked.fail_on and invalid:
        print("inference-obs: some comparisons are invalid (see the verdicts)", file=sys.stderr)
        return EXIT_INVALID
    if report.baseline is not None:
        regressions = report.baseline.regressions
        for r in regressions:
            caveat = f" (caveated: {', '.join(r.findings)})" if r.findings else ""
            note(f"regression: {r.deployment} {r.statistic}: {r.reason}{caveat}")
        if regressions and "regression" in checked.fail_on:
            return EXIT_REGRESSION
    return EXIT_OK


def _compare(args: argparse.Namespace) -> int:
    from inference_obs.analyses.validity.verdicts import Verdict, validity

    read_at = resolution(args.resolution)
    gpu_hour_prices = prices(args.gpu_hour_price)
    boxes = topologies(args.topology)
    settings = analysis_settings(args.settings, args.slo, args.currency)
    planned = plan(
        args,
        lambda line: None,
        started(),
        gpu_hour_prices=gpu_hour_prices,
        topologies=boxes,
        resolution=read_at,
    )
    opened = planned.open()
    result = validity(
        opened.source,
        opened.deployments,
        opened.window,
        resolution=read_at,
        settings=settings,
    )
    _print_verdicts(result)
    missing = {
        name
        for pair in result.pairs
        if any(f.code == "missing_data" for f in pair.findings)
        for name in (pair.a, pair.b)
    }
    _unmatched(opened, sorted(missing))
    worst = {v.verdict for p in result.pairs for v in p.verdicts.values()}
    if args.fail_on == "invalid" and Verdict.INVALID in worst:
        return EXIT_INVALID
    if args.fail_on == "caveated" and worst - {Verdict.VALID}:
        return EXIT_INVALID
    return EXIT_OK


def _print_verdicts(result: ValidityResult) -> None:
    """Each pair's verdicts and findings, summarised, fitted to the terminal's width."""
    from inference_obs.report.compare_text import verdicts_text

    print(verdicts_text(result, shutil.get_terminal_size().columns))


def _analysis_options(command: argparse.ArgumentParser) -> None:
    add_source_options(command)
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
    command.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC<=DURATION[@OBJECTIVE]",
        help="a latency target whose attainment is reported, such as ttft<=2s@99%% or "
        "itl<=50ms (repeatable; replaces the defaults ttft<=2s@99%%, itl<=50ms@99%%, "
        "e2e<=30s@99%%); metrics ttft, itl, tpot, e2e, queue, prefill, decode",
    )
    command.add_argument(
        "--currency",
        default=None,
        metavar="CODE",
        help="the currency of --gpu-hour-price and token prices, named in every cost "
        "(default: none, costs are per unit of the price you gave)",
    )
    command.add_argument(
        "--set",
        action="append",
        default=[],
        dest="settings",
        metavar="ANALYSIS.SETTING=VALUE",
        help="an analysis setting, such as queueing.busy_threshold=60 (repeatable; "
        "`inference-obs analyses` lists them with their units and defaults)",
    )


_EXITS = """\
Exit status: 0 written; 2 a bad option or input file (nothing read, nothing
written), or a --prometheus URL that does not serve the Prometheus HTTP API;
3 a deployment had no series in the window (the report is written); 4 the
source failed (worth retrying); 5 --fail-on invalid-comparison matched;
6 --time-budget ran out; 7 --fail-on regression matched; 130/143 interrupted
(SIGINT/SIGTERM). See docs/report-json.md."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``report`` and ``compare`` to the top-level subparsers."""
    report = commands.add_parser(
        "report",
        help=f"write an observation report (default: on the bundled {DEFAULT_DATASET} dataset)",
        epilog=_EXITS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _analysis_options(report)
    report.add_argument(
        "--out",
        default="report",
        help="output directory (default: report); its previous report is replaced, whole, "
        "only when the new one is complete",
    )
    report.add_argument("--format", default="md,html,json", help="any of md,html,json")
    report.add_argument("--quiet", action="store_true", help="no progress, no list of files")
    report.add_argument(
        "--fail-on",
        default=None,
        metavar=",".join(FAIL_ON),
        help=f"exit {EXIT_INVALID} when a comparison is invalid (invalid-comparison), "
        f"{EXIT_REGRESSION} when --baseline found a regression (regression); comma-separated",
    )
    report.add_argument(
        "--time-budget",
        default=None,
        metavar="SECONDS",
        help=f"give up (exit {EXIT_BUDGET}) this long after the program started, ending "
        f"within {MARGIN_S:g} s of it, --out as it was",
    )
    report.add_argument(
        "--baseline",
        default=None,
        metavar="PREVIOUS/report.json",
        help="compare every headline number with this earlier report.json",
    )
    report.set_defaults(run=_report)

    compare = commands.add_parser(
        "compare", help="say which comparisons between deployments mean something"
    )
    _analysis_options(compare)
    compare.add_argument(
        "--fail-on",
        choices=("invalid", "caveated"),
        default=None,
        help=f"exit {EXIT_INVALID} when a comparison is at least this bad",
    )
    compare.set_defaults(run=_compare)
