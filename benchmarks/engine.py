"""Local engine vs the real Prometheus on the same queries over the same data.

Data: 1,000 counter series (100 replicas x 10 ``le`` buckets of one
histogram), 24 h at a 15 s scrape interval: 5,760 samples each, 5.76 million
in all, backfilled into Prometheus 2.42 with promtool and held in memory as a
SampleSet by the engine. Queries: ``increase``, ``rate``, ``avg_over_time``
and ``histogram_quantile`` over buckets merged ``by (le)``, each over 1 h and
24 h windows ending at the last sample.

For each query the runner prints the server's own execution time (the
``stats=all`` timings, so HTTP and JSON are excluded), the engine's time, and
their ratio; both are medians of repeated runs in the same process, each after
a warm-up of at least ``--warmup`` seconds of the same query (on the 2-core
test machine a query run right after a pause took up to twice as long for its
first ten or so repetitions, whichever side it was on). It also checks that the
engine's answer matches the server's (to 1e-9 relative), and prints the time to
build the SampleSet from arrays, which the server never pays, and the engine's
first query over it (series selection and time index, paid once per selector).

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.engine [--repeats 15] [--warmup 0.3] [--series 1000] [--hours 24]
"""

from __future__ import annotations

import argparse
import io
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.rules import Rules
from inference_obs.engine.vector import Vector
from inference_obs.query import (
    Expr,
    Selector,
    avg_over_time,
    histogram_quantile,
    increase,
    rate,
    to_promql,
)
from inference_obs.samples import SampleSet, Series
from inference_obs.source.openmetrics import write_openmetrics
from tests.integration import servers

STEP_S = 15.0
LE = ("0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "25.0", "50.0", "+Inf")
END = 1.7e9  # any fixed time; the last sample


def make_series(n_series: int, hours: float, seed: int = 7) -> list[Series]:
    """Histogram bucket counters: cumulative in ``le``, growing in time, seeded."""
    rng = np.random.default_rng(seed)
    n = int(hours * 3600 / STEP_S)
    times = END - STEP_S * np.arange(n)[::-1]
    replicas = max(1, n_series // len(LE))
    out = []
    for r in range(replicas):
        per_step = rng.poisson(3.0, size=(n, len(LE))).astype(np.float64)
        cumulative = np.cumsum(np.cumsum(per_step, axis=1), axis=0)  # over le, then time
        for j, le in enumerate(LE):
            out.append(
                Series("bench_bucket", {"pod": f"p{r:03d}", "le": le}, times, cumulative[:, j])
            )
    return out


def queries() -> list[tuple[str, Expr]]:
    """The benchmarked expressions, labelled."""
    out = []
    for window, label in ((3600, "1h"), (86400, "24h")):
        x = Selector("bench_bucket").over(window)
        out += [
            (f"increase {label}", increase(x)),
            (f"rate {label}", rate(x)),
            (f"avg_over_time {label}", avg_over_time(x)),
            (f"histogram_quantile {label}", histogram_quantile(0.95, rate(x).sum(by=("le",)))),
        ]
    return out


def warm_up(run: Callable[[], object], seconds: float) -> None:
    """Call ``run`` at least twice and for at least ``seconds``."""
    started = time.perf_counter()
    for _ in range(2):
        run()
    while time.perf_counter() - started < seconds:
        run()


def median_seconds(run: Callable[[], object], repeats: int, warmup: float = 0.0) -> float:
    """Median wall time of ``repeats`` calls, after a warm-up."""
    warm_up(run, warmup)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def server_seconds(
    server: servers.PrometheusServer, promql: str, repeats: int, warmup: float = 0.0
) -> float:
    """Median of the server's own execution time (``stats=all``), after a warm-up."""
    warm_up(lambda: server.query_stats(promql, END), warmup)
    return statistics.median(server.query_stats(promql, END) for _ in range(repeats))


def disagreement(server: servers.PrometheusServer, promql: str, local: object) -> str | None:
    """Why the engine's answer differs from the server's (1e-9 relative), or None."""
    result = server.query(promql, END)["result"]
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
        ok = math.isclose(mine[key], value, rel_tol=1e-9) or (
            math.isnan(mine[key]) and math.isnan(value)
        )
        if not ok:
            return f"{dict(key)}: engine {mine[key]!r}, server {value!r}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=float, default=0.3, help="seconds per query and side")
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=24.0)
    args = parser.parse_args()

    series = make_series(args.series, args.hours)
    samples_total = sum(s.values.size for s in series)
    print(f"data: {len(series)} series, {samples_total:,} samples")
    build = median_seconds(lambda: SampleSet.from_series(series), 3)
    samples = SampleSet.from_series(series)
    print(f"engine: SampleSet built from arrays in {build:.3f} s (median of 3)")

    text = io.StringIO()
    write_openmetrics(series, text)
    servers.PROMTOOL_TIMEOUT_S = 900.0
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        server = servers.PrometheusServer(
            Path(tmp),
            text.getvalue(),
            prometheus=servers.require_binary("prometheus"),
            promtool=servers.require_binary("promtool"),
        )
        print(f"prometheus: backfilled and started in {time.perf_counter() - started:.1f} s")
        del text
        with server:
            evaluator = Evaluator(samples, rules=Rules.PROMETHEUS_2)
            started = time.perf_counter()
            evaluator.evaluate(queries()[0][1], END)
            print(f"engine: first query (selection, index) {time.perf_counter() - started:.2f} s")
            print(
                f"\n{'query':26} {'server ms':>10} {'engine ms':>10} {'server/engine':>14}"
                "  same answer"
            )
            for label, expr in queries():
                promql = to_promql(expr)
                remote = server_seconds(server, promql, args.repeats, args.warmup)
                local = median_seconds(
                    partial(evaluator.evaluate, expr, END), args.repeats, args.warmup
                )
                why = disagreement(server, promql, evaluator.evaluate(expr, END))
                print(
                    f"{label:26} {remote * 1e3:10.2f} {local * 1e3:10.3f} "
                    f"{remote / local:13.1f}x  {'yes' if why is None else 'NO: ' + why}"
                )
    print(
        f"\nmedians of {args.repeats} runs after {args.warmup} s of warm-up each; "
        "server time = Prometheus stats execTotalTime"
    )


if __name__ == "__main__":
    main()
