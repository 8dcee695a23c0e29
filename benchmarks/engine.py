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

Each query is timed on three sides, in one process, round by round, each
round's order rotated by one from the last (so no side always runs first,
right after the other's work), after ``--warmup`` untimed rounds of the
same kind:

- ``prometheus``: the server's own execution time (``stats=all``
  ``execTotalTime``, so HTTP and JSON are excluded);
- ``cold``: one ``Evaluator``, its kept answers emptied before each timed
  call (:meth:`~inference_obs.engine.evaluate.Evaluator.forget`). What stays
  is what a TSDB keeps as its index and does not depend on a query's times
  or functions: each selector's series (selected by their matchers once),
  their samples without staleness markers, the time index over them and its
  per-sample facts, and label groupings. No value of any node, and no
  window, survives from one call to the next: the runner counts the parts
  answered from an earlier call's kept values (``Evaluator.kept_hits``) and
  fails unless that count is 0;
- ``new evaluator``: ``Evaluator(samples)`` built inside each timed call, so
  nothing is kept but the loaded sample set: series are selected and
  indexed again every time.

It prints medians and the spread (the least and greatest of the per-round
ratios), the runs, the load average at start and end (the machine may be
shared), checks that every answer of both engine modes matches the
server's (1e-9 relative), and prints the one-off costs the server does not
pay per query: loading the dataset and the engine's first pass over each
selector.

Goals: with no kept answers (cold), a median of at least 5x and all the
queries together at least 10x Prometheus; with a new evaluator, at least 2x.

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.engine [--repeats 15] [--warmup 3] [--no-peer]
        [--dataset DIR | --replicas 8 --gpus-per-replica 8 --hours 6 --interval 15]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from benchmarks.common import BackfilledPrometheus, add_fleet_arguments, fleet_dataset, patient_http
from benchmarks.fleet import FleetShape
from benchmarks.fleet_scale import rounds
from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.rules import Rules
from inference_obs.metrics import standard_query
from inference_obs.query import Expr, to_promql
from inference_obs.samples import SampleSet, Vector
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
SERVER, COLD, NEW = "prometheus", "cold", "new evaluator"
#: Goals: (median, all together) of server / engine per engine mode.
GOALS = {COLD: (5.0, 10.0), NEW: (2.0, 2.0)}
#: What each engine mode keeps between timed calls, as the output states it.
KEPT = {
    COLD: (
        "one Evaluator, kept answers emptied before each call (Evaluator.forget); kept, as a "
        "TSDB keeps its index: each selector's series, their samples without staleness "
        "markers, the time index and its per-sample facts, label groupings"
    ),
    NEW: "Evaluator(samples) built in each call: nothing kept but the loaded samples",
}

#: One timed call: (seconds, parts answered from an earlier call's kept values).
Call = Callable[[], tuple[float, int]]


def queries(deployment_matchers: tuple[object, ...], hours: float) -> list[tuple[str, Expr]]:
    """The timed expressions, labelled with their key and window."""
    out = []
    for seconds, label in ((3600.0, "1h"), (hours * 3600.0, f"{hours:g}h")):
        for key in QUERIES:
            expr = standard_query(key).expr(deployment_matchers, seconds, by=())  # type: ignore[arg-type]
            out.append((f"{key} {label}", expr))
    return out


def server_call(server: BackfilledPrometheus, promql: str, at: float) -> tuple[float, int]:
    """The server's own execution time of one query (it keeps no answers)."""
    return server.query_stats(promql, at), 0


def cold_call(evaluator: Evaluator, expr: Expr, at: float) -> tuple[float, int]:
    """One cold evaluation: kept answers emptied, then timed; and the kept answers it used."""
    evaluator.forget()
    before = evaluator.kept_hits
    started = time.perf_counter()
    evaluator.evaluate(expr, at)
    seconds = time.perf_counter() - started
    return seconds, evaluator.kept_hits - before


def new_evaluator_call(
    samples: SampleSet, rules: Rules, expr: Expr, at: float
) -> tuple[float, int]:
    """One evaluation by an evaluator built inside the timed call."""
    started = time.perf_counter()
    evaluator = Evaluator(samples, rules=rules)
    evaluator.evaluate(expr, at)
    seconds = time.perf_counter() - started
    return seconds, evaluator.kept_hits


@dataclass
class Runs:
    """Each side's timed seconds (one per round, in round order) and kept answers used."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    kept_hits: dict[str, int] = field(default_factory=dict)

    def median(self, side: str) -> float:
        return statistics.median(self.seconds[side])


def interleaved(calls: dict[str, Call], repeats: int, warmup: int) -> Runs:
    """``warmup`` untimed, then ``repeats`` timed rounds of every side, order rotated each round."""
    sides = list(calls)
    for side in rounds(sides, warmup):
        calls[side]()
    runs = Runs({side: [] for side in sides}, dict.fromkeys(sides, 0))
    for side in rounds(sides, repeats):
        seconds, hits = calls[side]()
        runs.seconds[side].append(seconds)
        runs.kept_hits[side] += hits
    return runs


def spread(server: Sequence[float], engine: Sequence[float]) -> tuple[float, float]:
    """The least and greatest per-round ratio server / engine."""
    ratios = [a / b for a, b in zip(server, engine, strict=True)]
    return min(ratios), max(ratios)


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


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def _server(peer: bool, workdir: Path, samples: Path) -> Iterator[BackfilledPrometheus | None]:
    if not peer:
        yield None
        return
    with BackfilledPrometheus(workdir, samples) as server:
        print(f"prometheus: promtool backfill {server.backfill_seconds:.1f} s, once")
        yield server


def _row(label: str, runs: Runs, server: BackfilledPrometheus | None, why: str) -> str:
    cells = [f"{label:40}"]
    if server is not None:
        cells.append(f"{runs.median(SERVER) * 1e3:8.3f}")
    cells += [f"{runs.median(COLD) * 1e3:8.3f}", f"{runs.median(NEW) * 1e3:8.3f}"]
    if server is not None:
        for mode in (COLD, NEW):
            low, high = spread(runs.seconds[SERVER], runs.seconds[mode])
            ratio = runs.median(SERVER) / runs.median(mode)
            cells.append(f"{ratio:6.1f}x {f'{low:.1f}-{high:.1f}':>11}")
        cells.append(why)
    return " ".join(cells)


def _summary(table: list[Runs], repeats: int, warmup: int) -> None:
    """Per engine mode: median, lowest and all-together ratios with their spread, and goals."""
    for mode in (COLD, NEW):
        ratios = [runs.median(SERVER) / runs.median(mode) for runs in table]
        together = sum(r.median(SERVER) for r in table) / sum(r.median(mode) for r in table)
        # All queries together in each round: the spread of the sum.
        per_round = [
            sum(r.seconds[SERVER][k] for r in table) / sum(r.seconds[mode][k] for r in table)
            for k in range(repeats)
        ]
        want_median, want_together = GOALS[mode]
        print(
            f"{mode}: prometheus / engine median {statistics.median(ratios):.2f}x "
            f"(goal >= {want_median:g}x), lowest {min(ratios):.2f}x; all {len(table)} together "
            f"{together:.2f}x (goal >= {want_together:g}x), per round {min(per_round):.2f}-"
            f"{max(per_round):.2f}x; {repeats} timed rounds after {warmup} warm-up rounds"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed rounds per query")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds per query first")
    parser.add_argument("--no-peer", action="store_true", help="time the engine alone")
    add_fleet_arguments(parser, FleetShape(replicas=8))
    args = parser.parse_args(argv)
    print(f"load average at start: {_load()} ({os.cpu_count()} CPUs, maybe shared)")
    table: list[Runs] = []
    with (
        patient_http(),
        fleet_dataset(args) as path,
        tempfile.TemporaryDirectory(prefix="engine-") as tmp,
    ):
        started = time.perf_counter()
        dataset = read_dataset(path, cache=None)
        loaded = time.perf_counter() - started
        samples, manifest = dataset.samples, dataset.manifest
        deployment = manifest.deployments[0]
        window = manifest.window.window()
        at = window.end_s
        print(
            f"data: {len(samples):,} series, {int(samples.offsets[-1]):,} samples; deployment "
            f"{deployment.name} ({deployment.selector}); evaluated at the window's end"
        )
        print(f"engine: read_dataset (no cache) {loaded:.2f} s, once")
        with _server(not args.no_peer, Path(tmp) / "prometheus", path / SAMPLES) as server:
            rules = Rules.PROMETHEUS_2
            evaluator = Evaluator(samples, rules=rules)
            timed = queries(deployment.matchers, window.seconds / 3600)
            started = time.perf_counter()
            for _, expr in timed:
                evaluator.evaluate(expr, at)
            first = time.perf_counter() - started
            print(
                f"engine: first pass over the {len(timed)} queries (selection, index) {first:.2f} s"
            )
            for mode in (COLD, NEW):
                print(f"mode {mode}: {KEPT[mode]}")
            head = f"\n{'query':40}" + (f" {'prom ms':>8}" if server else "")
            head += f" {'cold ms':>8} {'new ms':>8}"
            if server:
                head += f" {'prom/cold (spread)':>19} {'prom/new (spread)':>19}  same"
            print(head)
            for label, expr in timed:
                promql = to_promql(expr)
                calls: dict[str, Call] = {}
                if server is not None:
                    calls[SERVER] = partial(server_call, server, promql, at)
                calls[COLD] = partial(cold_call, evaluator, expr, at)
                calls[NEW] = partial(new_evaluator_call, samples, rules, expr, at)
                runs = interleaved(calls, args.repeats, args.warmup)
                why = ""
                if server is not None:
                    evaluator.forget()
                    wrong = [
                        disagreement(server, promql, at, one.evaluate(expr, at))
                        for one in (evaluator, Evaluator(samples, rules=rules))
                    ]
                    why = "yes" if wrong == [None, None] else f"NO: {wrong}"
                table.append(runs)
                print(_row(label, runs, server, why))
    print()
    if not args.no_peer:
        _summary(table, args.repeats, args.warmup)
    for mode in (COLD, NEW):
        total = sum(runs.median(mode) for runs in table)
        print(f"{mode}: all {len(table)} queries together (sum of medians) {total * 1e3:.2f} ms")
    hits = {mode: sum(runs.kept_hits[mode] for runs in table) for mode in (COLD, NEW)}
    print(
        f"kept answers used by timed calls: cold {hits[COLD]}, new evaluator {hits[NEW]} "
        "(must be 0)"
    )
    print(f"load average at end: {_load()}; server time = Prometheus stats execTotalTime")
    if any(hits.values()):
        raise SystemExit("timed calls used kept answers: the cold timings are not cold")


if __name__ == "__main__":
    main()
