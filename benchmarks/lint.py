"""``lint`` of a 200-panel dashboard, against promql-parser reading the same expressions.

Data: a generated Grafana dashboard of ``--panels`` panels (200 by default) in
rows of ten, three Prometheus targets each, written with Grafana's variables
(``$model_name``, ``$__rate_interval``) as dashboards write them. The
expressions cycle through the shapes real serving dashboards use, right and
wrong: merged and per-series quantiles, averaged quantiles, request means,
lifetime counters, rates of gauges, removed families, DCGM fields with units.

Timed as medians of ``--repeats`` runs in one process, after a warm-up:

- ours: ``lint_text`` of the dashboard's JSON, end to end (JSON, variables,
  parsing into the expression tree, every check, findings);
- ours: ``parse`` alone of the same expressions (placeholders applied);
- the peer: ``promql_parser.parse`` (Prometheus's parser in Rust, via its
  Python binding) of the same placeholder texts, which only parses.

Goal: the whole lint under one second.

Run from the repository root::

    python -m benchmarks.lint [--panels 200] [--repeats 9]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import promql_parser

from benchmarks.common import median_seconds
from inference_obs.lint import lint_text
from inference_obs.lint.placeholders import substitute
from inference_obs.query import parse

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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--panels", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds of warm-up per side")
    args = parser.parse_args(argv)

    model = dashboard(args.panels)
    text = json.dumps(model, indent=2)
    exprs = [t["expr"] for p in model["panels"] for t in p.get("targets", ())]
    placeholders = [substitute(e).text for e in exprs]
    findings = len(lint_text(text, "dashboard"))
    print(
        f"dashboard: {args.panels} panels, {len(exprs)} queries, {len(text) / 1024:.0f} KiB "
        f"of JSON, {findings} findings"
    )

    whole = median_seconds(lambda: lint_text(text, "dashboard"), args.repeats, args.warmup)
    ours = median_seconds(lambda: [parse(e) for e in placeholders], args.repeats, args.warmup)
    peer = median_seconds(
        lambda: [promql_parser.parse(e) for e in placeholders], args.repeats, args.warmup
    )
    print(f"\n{'':44} {'median ms':>10}")
    print(f"{'ours: lint, end to end':44} {whole * 1000:10.1f}  (goal < 1000 ms)")
    print(f"{'ours: parse into the expression tree':44} {ours * 1000:10.1f}")
    print(
        f"{'peer: promql-parser (Rust) parse':44} {peer * 1000:10.1f}  "
        f"(ours takes {ours / peer:.1f}x its time)"
    )
    print(f"\nlint of {args.panels} panels {'meets' if whole < 1.0 else 'misses'} the goal")


if __name__ == "__main__":
    main()
