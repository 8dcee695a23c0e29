"""Local engine vs the real Prometheus: the report's queries over the same backfilled fleet.

Data: the generated fleet (:mod:`benchmarks.fleet`), by default 8 replicas
x 8 GPUs over 6 h at 15 s (about 4,400 series, 6.3 million samples; the
report's own families among them), backfilled into Prometheus 2.42 with
promtool and read by the engine with ``read_dataset``. Queries: standard
queries of the catalogue for the first deployment (the H100 half, selected
by pod prefix as its manifest says), over the last hour and over the whole
window, evaluated at the window's end: merged-bucket quantiles, request
means, rates, sampled maxima and means, and GPU utilisation sample-weighted
over every GPU.

For each query the runner prints the server's own execution time (the
``stats=all`` timings, so HTTP and JSON are excluded), the engine's time
(``Evaluator.evaluate`` on the same expression), and their ratio: both
medians of ``--repeats`` runs in the same process, each side after a warm-up
of at least ``--warmup`` seconds of the same query (on the 2-core test
machine a query run right after a pause took up to twice as long for its
first ten or so repetitions, whichever side it was on). It checks that the
engine's answer matches the server's (1e-9 relative) and prints the one-off
costs the server does not pay per query: loading the dataset and the
engine's first query over a selector (series selection and time index).

Goal: the engine at least 10x faster on every query.

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.engine [--repeats 9] [--warmup 0.3]
        [--dataset DIR | --replicas 8 --gpus-per-replica 8 --hours 6 --interval 15]
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from benchmarks.common import (
    BackfilledPrometheus,
    add_fleet_arguments,
    fleet_dataset,
    median_seconds,
    patient_http,
    warm_up,
)
from benchmarks.fleet import FleetShape
from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.rules import Rules
from inference_obs.metrics import standard_query
from inference_obs.query import Expr, to_promql
from inference_obs.samples import Vector
from inference_obs.source.dataset.reader import SAMPLES, read_dataset

#: Standard queries timed, as the report asks them (no grouping).
QUERIES = (
    "vllm_ttft_p95_seconds",
    "vllm_e2e_mean_seconds",
    "vllm_generation_tokens_per_second",
    "vllm_finished_requests_by_reason",
    "vllm_waiting_requests_max",
    "vllm_running_requests_mean",
    "dcgm_gpu_utilisation_percent",
    "dcgm_power_watts",
)


def queries(deployment_matchers: tuple[object, ...], hours: float) -> list[tuple[str, Expr]]:
    """The timed expressions, labelled with their key and window."""
    out = []
    for seconds, label in ((3600.0, "1h"), (hours * 3600.0, f"{hours:g}h")):
        for key in QUERIES:
            expr = standard_query(key).expr(deployment_matchers, seconds, by=())  # type: ignore[arg-type]
            out.append((f"{key} {label}", expr))
    return out


def server_seconds(
    server: BackfilledPrometheus, promql: str, at: float, repeats: int, warmup: float
) -> float:
    """Median of the server's own execution time (``stats=all``), after a warm-up."""
    warm_up(lambda: server.query_stats(promql, at), warmup)
    return statistics.median(server.query_stats(promql, at) for _ in range(repeats))


def disagreement(server: BackfilledPrometheus, promql: str, at: float, local: object) -> str | None:
    """Why the engine's answer differs from the server's (1e-9 relative), or None."""
    result = server.query(promql, at)["result"]
    remote = {
        frozenset((k, v) for k, v in one["metric"].items() if k != "__name__"): float(
            one["value"][1]
        )
        for one in result
    }
    if not isinstance(local, Vector):
        return f"engine gave {local!r}, not a vector"
    mine = {frozenset(labels.items()): value for labels, value in local.as_dict().items()}
    if mine.keys() != remote.keys():
        return f"{len(mine)} series vs the server's {len(remote)}"
    for key, value in remote.items():
        same = math.isclose(mine[key], value, rel_tol=1e-9) or (
            math.isnan(mine[key]) and math.isnan(value)
        )
        if not same:
            return f"{dict(key)}: engine {mine[key]!r}, server {value!r}"
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--warmup", type=float, default=0.3, help="seconds per query and side")
    add_fleet_arguments(parser, FleetShape(replicas=8))
    args = parser.parse_args(argv)
    slowest = 0.0
    with (
        patient_http(),
        fleet_dataset(args) as path,
        tempfile.TemporaryDirectory(prefix="engine-") as tmp,
    ):
        started = time.perf_counter()
        dataset = read_dataset(path, cache=None)
        loaded = time.perf_counter() - started
        samples = dataset.samples
        manifest = dataset.manifest
        deployment = manifest.deployments[0]
        window = manifest.window.window()
        at = window.end_s
        print(
            f"data: {len(samples):,} series, {int(samples.offsets[-1]):,} samples; deployment "
            f"{deployment.name} ({deployment.selector}); evaluated at the window's end"
        )
        print(f"engine: read_dataset (no cache) {loaded:.2f} s, once")
        with BackfilledPrometheus(Path(tmp) / "prometheus", path / SAMPLES) as server:
            print(f"prometheus: promtool backfill {server.backfill_seconds:.1f} s, once")
            evaluator = Evaluator(samples, rules=Rules.PROMETHEUS_2)
            hours = window.seconds / 3600
            timed = queries(deployment.matchers, hours)
            started = time.perf_counter()
            for _, expr in timed:
                evaluator.evaluate(expr, at)
            first = time.perf_counter() - started
            print(
                f"engine: first pass over the {len(timed)} queries (selection, index) {first:.2f} s"
            )
            print(f"\n{'query':44} {'server ms':>10} {'engine ms':>10} {'server/engine':>14}  same")
            ratios = []
            server_total = engine_total = 0.0
            for label, expr in timed:
                promql = to_promql(expr)
                remote = server_seconds(server, promql, at, args.repeats, args.warmup)
                local = median_seconds(
                    partial(evaluator.evaluate, expr, at), args.repeats, args.warmup
                )
                why = disagreement(server, promql, at, evaluator.evaluate(expr, at))
                ratios.append(remote / local)
                server_total, engine_total = server_total + remote, engine_total + local
                slowest = max(slowest, local)
                print(
                    f"{label:44} {remote * 1e3:10.2f} {local * 1e3:10.3f} "
                    f"{remote / local:13.1f}x  {'yes' if why is None else 'NO: ' + why}"
                )
    print(
        f"\nall queries together (sums of the medians): server {server_total * 1e3:.2f} ms, "
        f"engine {engine_total * 1e3:.2f} ms, {server_total / engine_total:.1f}x"
    )
    print(
        f"server / engine: median {statistics.median(ratios):.1f}x, lowest {min(ratios):.1f}x "
        f"(goal >= 10x); medians of {args.repeats} runs after {args.warmup} s of warm-up each; "
        "server time = Prometheus stats execTotalTime"
    )


if __name__ == "__main__":
    main()
