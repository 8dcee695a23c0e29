"""``catalogue``, ``queries`` and ``simulate``: the catalogue, its standard queries, datasets."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from inference_obs.cli.options import unwritable
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import FAMILIES
from inference_obs.metrics.burn_rate import burn_rate_rules
from inference_obs.metrics.export import export_files
from inference_obs.metrics.slo import SloTarget, parse_target
from inference_obs.metrics.standard import STANDARD_QUERIES, standard_query
from inference_obs.outputs import real_directory, write_file
from inference_obs.query import Matcher, MatchOp, parse_duration, to_promql

__all__ = ["parse_matcher", "register"]

_OPS = ("!=", "=~", "!~", "=")  # longest first, so "=~" is not read as "="


def parse_matcher(text: str) -> Matcher:
    """Parse ``label=value``, ``label!=value``, ``label=~regex`` or ``label!~regex``."""
    for op in _OPS:
        label, sep, value = text.partition(op)
        if sep and label and "=" not in label and "!" not in label:
            return Matcher(label, MatchOp(op), value)
    raise ConfigurationError(
        f"--match {text!r}: expected LABEL=VALUE, LABEL!=VALUE, LABEL=~REGEX or LABEL!~REGEX"
    )


def _catalogue(args: argparse.Namespace) -> int:
    for family in FAMILIES:
        if args.exporter and family.exporter != args.exporter:
            continue
        print(f"{family.name}\t{family.type.value}\t{family.unit}\t{family.help}")
    return 0


def _queries_list(args: argparse.Namespace) -> int:
    for query in STANDARD_QUERIES:
        print(f"{query.key}\t{query.unit}\t{query.title}")
    return 0


def _queries_show(args: argparse.Namespace) -> int:
    query = standard_query(args.key)
    matchers = [parse_matcher(m) for m in args.match]
    by = tuple(label for label in args.by.split(",") if label) if args.by is not None else None
    print(to_promql(query.expr(matchers, parse_duration(args.window), by)))
    return 0


def _shown(default: object) -> str:
    """A setting's default as ``--set`` takes it: a sequence comma-separated."""
    if isinstance(default, tuple | list):
        return ",".join(str(item) for item in default)
    return str(default)


def _slo_targets(texts: list[str]) -> tuple[SloTarget, ...]:
    """``--slo`` texts as targets with objectives (burn-rate rules need a budget)."""
    try:
        targets = tuple(parse_target(t) for t in texts)
        burn_rate_rules(targets)  # refuses a target without an objective or bucket
    except ConfigurationError as exc:
        raise ConfigurationError(f"--slo: {exc}") from None
    return targets


def _queries_export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    files = export_files(slos=_slo_targets(args.slo)) if args.slo else export_files()
    # A link is stale whatever it points at, a linked folder too: each is replaced,
    # never written or deleted through.
    linked = {p for p in files if (out / p).is_symlink() or (out / p).parent.is_symlink()}
    stale = sorted(
        p
        for p, text in files.items()
        if p in linked or not (out / p).is_file() or (out / p).read_text(encoding="utf-8") != text
    )
    extra = sorted(
        str(p.relative_to(out))
        for p in out.glob("promql/*.promql")
        if str(p.relative_to(out)) not in files and not p.parent.is_symlink()
    )
    if args.check:
        for path in stale:
            print(f"stale: {out / path}", file=sys.stderr)
        for path in extra:
            print(f"not in the catalogue: {out / path}", file=sys.stderr)
        if stale or extra:
            print("run `inference-obs queries export` to regenerate", file=sys.stderr)
            return 1
        print(f"{len(files)} files in {out} are current")
        return 0
    try:
        for folder in sorted({(out / path).parent for path in stale}):
            if folder != out and folder.is_symlink():  # --out itself is the user's to name
                real_directory(folder)
            folder.mkdir(parents=True, exist_ok=True)
        for path in stale:  # each whole or not at all: the previous file stays on a failure
            write_file(out / path, files[path].encode("utf-8"))
        for path in extra:
            (out / path).unlink()
    except OSError as exc:
        raise unwritable(out, "the queries", exc) from None
    print(f"wrote {len(stale)} of {len(files)} files to {out}, removed {len(extra)}")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    from inference_obs.simulate import load_scenario, simulate, with_load

    if args.seed is not None and args.seed < 0:  # numpy seeds from non-negative integers
        raise ConfigurationError(f"--seed {args.seed}: expected a whole number >= 0")
    if args.load is not None and not (math.isfinite(args.load) and args.load > 0):
        raise ConfigurationError(f"--load {args.load}: expected a factor above 0, e.g. 1.5")
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigurationError(f"--out {out}: not an empty directory; give a new one")
    scenario = load_scenario(args.scenario)
    if args.load is not None:
        scenario = with_load(scenario, args.load)
    dataset = simulate(scenario, out, seed=args.seed)
    total = int(dataset.samples.offsets[-1])
    print(f"wrote {dataset.path}: {len(dataset.samples)} series, {total:,} samples (synthetic)")
    return 0


def _analyses(args: argparse.Namespace) -> int:
    """Every registered analysis, what it answers, and its settings with their defaults."""
    from inference_obs.analyses.registry import ANALYSES

    for analysis in ANALYSES:
        print(f"{analysis.name}: {analysis.summary}")
        for name, field in analysis.settings.model_fields.items():
            print(
                f"  --set {analysis.name}.{name}={_shown(field.default)}  {field.description or ''}"
            )
    return 0


def _scenarios() -> str:
    """The bundled scenarios, one line each, for ``simulate --help``."""
    from inference_obs.simulate import load_scenario, scenario_names

    lines = ["bundled scenarios:"]
    for name in scenario_names():
        lines.append(f"  {name:<24} {load_scenario(name).title}")
    return "\n".join(lines)


class _HelpWithScenarios(argparse.Action):
    """``simulate --help``: argparse's help, with the bundled scenarios read only then.

    Reading them loads the simulator's models; building the parser for every other
    command (``--version``, ``lint``) must not pay for it.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser.epilog = _scenarios()
        parser.print_help()
        parser.exit()


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``simulate``, ``analyses``, ``catalogue`` and ``queries`` to the top-level
    subparsers."""
    simulate = commands.add_parser(
        "simulate",
        help="write a synthetic dataset from a scenario",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    simulate.add_argument(
        "-h", "--help", action=_HelpWithScenarios, help="show this help message and exit"
    )
    simulate.add_argument(
        "scenario", help="a bundled scenario name (below) or a scenario YAML file"
    )
    simulate.add_argument("--out", required=True, help="new dataset directory")
    simulate.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    simulate.add_argument(
        "--load",
        type=float,
        default=None,
        metavar="FACTOR",
        help="multiply every arrival rate by FACTOR (e.g. 1.5 for a heavier week)",
    )
    simulate.set_defaults(run=_simulate)

    analyses = commands.add_parser(
        "analyses", help="list the analyses a report runs, and their settings (for --set)"
    )
    analyses.set_defaults(run=_analyses)

    catalogue = commands.add_parser("catalogue", help="list the metric families known")
    catalogue.add_argument("--exporter", choices=sorted({family.exporter for family in FAMILIES}))
    catalogue.set_defaults(run=_catalogue)

    queries = commands.add_parser("queries", help="the standard queries")
    actions = queries.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="list them").set_defaults(run=_queries_list)
    show = actions.add_parser("show", help="print one as PromQL")
    show.add_argument("key")
    show.add_argument(
        "--match",
        action="append",
        default=[],
        metavar="LABEL=VALUE",
        help="a label matcher for every selector (repeatable)",
    )
    show.add_argument("--window", default="1h", help="PromQL duration (default 1h)")
    show.add_argument("--by", default=None, help="comma-separated grouping labels")
    show.set_defaults(run=_queries_show)
    export = actions.add_parser("export", help="write .promql files and recording rules")
    export.add_argument("--out", default="queries", help="folder (default: queries)")
    export.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the folder is not current"
    )
    export.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC<=DURATION@OBJECTIVE",
        help="a latency SLO for slo-rules.yml's burn-rate alerts, e.g. ttft<=1s@99%% "
        "(repeatable; default ttft<=2s@99%%, itl<=50ms@99%%, e2e<=30s@99%%)",
    )
    export.set_defaults(run=_queries_export)
