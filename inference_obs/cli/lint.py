"""``lint``: dashboards, rule files and ``.promql`` files checked against the catalogue."""

from __future__ import annotations

import argparse
import sys

from inference_obs.cli.options import EXIT_OK

__all__ = ["EXIT_FINDINGS", "register"]

#: Exit status when an error-level finding is present (2 stays "unreadable input").
EXIT_FINDINGS = 1

_DESCRIPTION = """\
Read Grafana dashboards (JSON), Prometheus or VictoriaMetrics rule files (YAML,
PrometheusRule too) and .promql files, parse every expression, and check it
against the metric catalogue: quantiles of unmerged or averaged buckets,
counters without rate(), _sum without _count, per-replica means, averages of
unequal pools, rate() of gauges, families removed or renamed in the engine
version in use, units that do not match the values, variables no query uses.
Folders are searched for .json, .yml, .yaml and .promql files.

Each finding has a stable code (docs/lint.md explains every one), a severity
(error: the number is wrong; warning: it misleads in common set-ups; info),
the file, the panel or rule, the expression, and the corrected expression
where one exists.

Exit status: 0 no error-level finding, 1 at least one, 2 a file that cannot
be read (not JSON, not YAML; the message names file, line and column) or is
past a limit (16 MiB, 100 levels of nesting, YAML aliases expanding past
100,000 nodes, 50,000 queries; docs/lint.md lists them; the message names it)."""


def _lint(args: argparse.Namespace) -> int:
    # Here, not at the top: every other command builds this parser and need not load the checks.
    from inference_obs.lint import Options, lint_paths, to_json, to_sarif, to_text
    from inference_obs.lint.codes import Severity

    options = Options(vllm_version=args.vllm_version, sglang_version=args.sglang_version)
    result = lint_paths(args.paths, options)
    if args.format == "json":
        sys.stdout.write(to_json(result))
    elif args.format == "sarif":
        sys.stdout.write(to_sarif(result))
    else:
        sys.stdout.write(to_text(result, result.files))
    for path in result.skipped:
        print(
            f"inference-obs lint: skipped {path}: neither a dashboard nor a rule file",
            file=sys.stderr,
        )
    errors = any(f.severity is Severity.ERROR for f in result)
    return EXIT_FINDINGS if errors else EXIT_OK


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``lint`` to the top-level subparsers."""
    lint = commands.add_parser(
        "lint",
        help="check dashboards and rule files against the catalogue's statistics",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lint.add_argument("paths", nargs="+", metavar="PATH", help="files or folders to check")
    lint.add_argument(
        "--format",
        choices=("text", "json", "sarif"),
        default="text",
        help="text (one line per finding), json (a list of findings) or sarif (SARIF 2.1.0)",
    )
    lint.add_argument(
        "--vllm-version",
        metavar="X.Y.Z",
        help="the vLLM version the dashboards read (default: the newest the catalogue knows)",
    )
    lint.add_argument(
        "--sglang-version",
        metavar="X.Y.Z",
        help="the SGLang version the dashboards read (default: the newest the catalogue knows)",
    )
    lint.set_defaults(run=_lint)
