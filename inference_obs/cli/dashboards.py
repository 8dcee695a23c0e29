"""``dashboards export``: Grafana dashboards built from the standard queries."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inference_obs.cli.options import unwritable

__all__ = ["register"]


def _export(args: argparse.Namespace) -> int:
    from inference_obs.dashboards import dashboard_files
    from inference_obs.outputs import write_file

    out = Path(args.out)
    files = dashboard_files()
    # A link is stale whatever it points at: it is replaced, never written through.
    stale = sorted(
        name
        for name, text in files.items()
        if (out / name).is_symlink()
        or not (out / name).is_file()
        or (out / name).read_text(encoding="utf-8") != text
    )
    if args.check:
        for name in stale:
            print(f"stale: {out / name}", file=sys.stderr)
        if stale:
            print("run `inference-obs dashboards export` to regenerate", file=sys.stderr)
            return 1
        print(f"{len(files)} dashboards in {out} are current")
        return 0
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in stale:  # each whole or not at all: the previous file stays on a failure
            write_file(out / name, files[name].encode("utf-8"))
    except OSError as exc:
        raise unwritable(out, "the dashboards", exc) from None
    print(f"wrote {len(stale)} of {len(files)} dashboards to {out}")
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dashboards`` to the top-level subparsers."""
    dashboards = commands.add_parser(
        "dashboards", help="Grafana dashboards built from the standard queries"
    )
    actions = dashboards.add_subparsers(dest="action", required=True)
    export = actions.add_parser(
        "export",
        help="write vllm.json, sglang.json and dcgm.json",
        description="Write Grafana dashboards for vLLM, SGLang and dcgm-exporter: quantiles "
        "from merged buckets (panel descriptions say what their buckets resolve), "
        "request-weighted means, throughput, queue against engine activity, caches, and GPU "
        "activity sample-weighted over every allocated GPU. Each has a data source variable "
        "and a deployment variable ($model_name, or $pod for GPUs) that every query filters "
        "on. Import them in Grafana (Dashboards > New > Import).",
    )
    export.add_argument("--out", required=True, help="folder to write the dashboards to")
    export.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the folder is not current"
    )
    export.set_defaults(run=_export)
