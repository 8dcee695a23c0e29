"""``lint`` of a 200-panel dashboard, against promql-parser reading the same expressions.

Data: a generated Grafana dashboard of ``--panels`` panels (200 by default) in
rows of ten, three Prometheus targets each, written with Grafana's variables
(``$model_name``, ``$__rate_interval``) as dashboards write them. The
expressions cycle through the shapes real serving dashboards use, right and
wrong: merged and per-series quantiles, averaged quantiles, request means,
lifetime counters, rates of gauges, removed families, DCGM fields with units.

Every side below runs in one process, interleaved
(:func:`benchmarks.common.interleave`: ``--warmup-rounds`` untimed rounds,
then ``--repeats`` rounds, each in rotating order); medians with the spread:

- ours: ``lint_text`` of the dashboard's JSON, end to end (JSON, variables,
  parsing into the expression tree, every check, findings), with the
  lookups a lint keeps per process (catalogue names, regex forms) emptied
  first, as a new command finds them;
- ours: ``parse`` alone of the same expressions (placeholders applied);
- the peer: ``promql_parser.parse`` (Prometheus's parser in Rust, via its
  Python binding) of the same placeholder texts, which only parses;
- what a user pays: ``inference-obs lint FILE`` as a command (a fresh
  process: imports, reading, lint, printing), and the peer as a fresh
  ``python`` that imports promql-parser and parses the texts from a file.

Goal: the whole lint under one second.

Run from the repository root::

    python -m benchmarks.lint [--panels 200] [--repeats 9] [--warmup-rounds 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import promql_parser

from benchmarks.common import interleave, mode_line, timed_table
from inference_obs.lint import lint_text
from inference_obs.lint.names import _names
from inference_obs.lint.placeholders import substitute
from inference_obs.lint.resolve import _resolve
from inference_obs.query import parse
from inference_obs.query.re2 import python_pattern

M = '{model_name=~"$model_name"}'
G = '{pod=~"$model_name.*"}'
W = "[$__rate_interval]"
E2E = "vllm:e2e_request_latency_seconds"
ITL = "vllm:inter_token_latency_seconds"
# (title, unit, expression): shapes of real dashboards' targets, right and wrong.
SHAPES: tuple[tuple[str, str, str], ...] = (
    (
        "TTFT p99",
        "s",
        f"histogram_quantile(0.99, sum by (le) "
        f"(rate(vllm:time_to_first_token_seconds_bucket{M}{W})))",
    ),
    ("E2E p99", "s", f"histogram_quantile(0.99, rate({E2E}_bucket{M}{W}))"),
    (
        "E2E p99 avg",
        "s",
        f"avg(histogram_quantile(0.99, sum by (le, pod) (rate({E2E}_bucket{M}{W}))))",
    ),
    ("E2E mean", "s", f"sum(rate({E2E}_sum{M}{W})) / sum(rate({E2E}_count{M}{W}))"),
    ("ITL mean", "s", f"rate({ITL}_sum{M}{W}) / rate({ITL}_count{M}{W})"),
    ("Queue time", "s", f"rate(vllm:request_queue_time_seconds_sum{M}{W})"),
    ("Average latency", "s", f"avg({E2E}_sum) / avg({E2E}_count)"),
    ("Output tokens/s", "short", f"sum by (model_name) (rate(vllm:generation_tokens_total{M}{W}))"),
    (
        "Finish reasons",
        "reqps",
        f"sum by (finished_reason) (rate(vllm:request_success_total{M}{W}))",
    ),
    ("KV usage", "percentunit", f"max by (model_name) (vllm:kv_cache_usage_perc{M})"),
    ("Cache usage", "percent", f"avg(vllm:gpu_cache_usage_perc{M})"),
    ("Running", "short", f"sum(vllm:num_requests_running{M})"),
    ("Running rate", "short", f"sum(rate(vllm:num_requests_running{M}{W}))"),
    ("GPU utilisation", "percent", f"avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL{G})"),
    ("Framebuffer", "decmbytes", f"sum by (Hostname) (DCGM_FI_DEV_FB_USED{G})"),
    ("PCIe", "Bps", f"sum(rate(DCGM_FI_PROF_PCIE_TX_BYTES{G}{W}))"),
)
TARGETS_PER_PANEL = 3
PANELS_PER_ROW = 10


def dashboard(panels: int) -> dict[str, Any]:
    """A Grafana dashboard model of ``panels`` panels (rows excluded)."""
    out: list[dict[str, Any]] = []
    for index in range(panels):
        if index % PANELS_PER_ROW == 0:
            out.append({"type": "row", "title": f"Row {index // PANELS_PER_ROW}", "panels": []})
        shapes = [SHAPES[(index + k) % len(SHAPES)] for k in range(TARGETS_PER_PANEL)]
        title, unit, _ = shapes[0]
        out.append(
            {
                "id": index + 1,
                "type": "timeseries",
                "title": f"{title} {index}",
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [
                    {"refId": chr(ord("A") + k), "expr": expr, "legendFormat": "{{pod}}"}
                    for k, (_, _, expr) in enumerate(shapes)
                ],
            }
        )
    variables = [
        {"name": "datasource", "type": "datasource", "query": "prometheus"},
        {"name": "model_name", "type": "query", "query": "label_values(model_name)"},
    ]
    return {"title": "benchmark", "panels": out, "templating": {"list": variables}}


def _forget_lookups() -> None:
    """Empty the per-name lookups a lint keeps for the process (catalogue names, regex forms).

    A command pays them once per run; emptied before every timed lint, the
    in-process time is what one run pays, imports aside.
    """
    for remembered in (_names, _resolve, python_pattern):
        remembered.cache_clear()


def _command(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, check=False)
    if done.returncode not in (0, 1):  # 1: error-level findings, which the dashboard has
        raise RuntimeError(f"{argv[:4]} exited with {done.returncode}: {done.stderr[-2000:]!r}")


def sides(text: str, placeholders: list[str], folder: Path) -> dict[str, Callable[[], object]]:
    """Each side's work; the commands each start a fresh process and read the files."""
    dashboard_file, exprs_file = folder / "dashboard.json", folder / "exprs.json"
    dashboard_file.write_text(text, encoding="utf-8")
    exprs_file.write_text(json.dumps(placeholders), encoding="utf-8")

    def lint_once() -> object:
        _forget_lookups()
        return lint_text(text, "dashboard")

    def parse_once() -> object:
        _forget_lookups()
        return [parse(e) for e in placeholders]

    peer_script = (
        "import json, sys, promql_parser\n"
        "[promql_parser.parse(e) for e in json.load(open(sys.argv[1]))]"
    )
    return {
        "lint": lint_once,
        "parse": parse_once,
        "peer": lambda: [promql_parser.parse(e) for e in placeholders],
        "command": lambda: _command(
            [sys.executable, "-m", "inference_obs.cli", "lint", str(dashboard_file)]
        ),
        "peer_command": lambda: _command([sys.executable, "-c", peer_script, str(exprs_file)]),
    }


_LABELS = {
    "lint": "ours: lint, end to end (in process)",
    "parse": "ours: parse into the expression tree",
    "peer": "peer: promql-parser (Rust) parse",
    "command": "ours: inference-obs lint, a fresh process",
    "peer_command": "peer: python + promql-parser, a fresh process",
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--panels", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds")
    parser.add_argument("--warmup-rounds", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--sides", default=",".join(_LABELS), help="of " + ",".join(_LABELS))
    args = parser.parse_args(argv)
    chosen = [name for name in args.sides.split(",") if name]
    if unknown := set(chosen) - set(_LABELS):
        parser.error(f"unknown sides: {sorted(unknown)}")

    model = dashboard(args.panels)
    text = json.dumps(model, indent=2)
    exprs = [t["expr"] for p in model["panels"] for t in p.get("targets", ())]
    placeholders = [substitute(e).text for e in exprs]
    findings = len(lint_text(text, "dashboard"))
    print(
        f"dashboard: {args.panels} panels, {len(exprs)} queries, {len(text) / 1024:.0f} KiB "
        f"of JSON, {findings} findings"
    )
    with tempfile.TemporaryDirectory(prefix="lint-") as tmp:
        work = sides(text, placeholders, Path(tmp))
        found = interleave({k: work[k] for k in chosen}, args.repeats, args.warmup_rounds)
    timed = found.sides
    notes = {"lint": "(goal < 1000 ms)"}
    for ours, peer in (("parse", "peer"), ("command", "peer_command")):
        if ours in timed and peer in timed:
            notes[ours] = f"{found.ratio(ours, peer)} the peer's time"
    print("\n" + timed_table(found, {k: _LABELS[k] for k in chosen}, "ms", notes))
    if "lint" in timed:
        whole = timed["lint"].median
        print(
            f"\nlint of {args.panels} panels {'meets' if whole < 1.0 else 'misses'} the goal "
            "in process"
        )
    if "command" in timed:
        print(f"inference-obs lint as a command: {timed['command'].median:.2f} s (median)")
    print(mode_line(found.mode() + "; lookups kept per process emptied before each lint"))


if __name__ == "__main__":
    main()
