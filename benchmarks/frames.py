"""API JSON -> frame on a fleet range answer: ours, prometheus-api-client, bare ``json.loads``.

Data: one family of the generated fleet (:mod:`benchmarks.fleet`; by default
``DCGM_FI_DEV_GPU_UTIL`` of 32 replicas x 8 GPUs over 6 h at 15 s: 256
series with dcgm-exporter's twelve labels, about 368,000 points) backfilled
into Prometheus 2.42 with promtool. One ``query_range`` of the family over
the whole window at the scrape interval, as the report's GPU heat map asks,
is fetched once and its raw JSON body kept. Then every side below runs in
the same process, interleaved (:func:`benchmarks.common.interleave`): each
is warmed by ``--warmup-rounds`` untimed calls in rotating order before any
is timed, then ``--repeats`` rounds call every side once, each round
starting one side later. Ours is timed only once the peer has run (which
leaves pandas and the allocator in the state a notebook that uses both has).
Medians, with the spread of the runs; the peer's ratio is the median of the
rounds' ratios:

- ours: :func:`parse_matrix_body` (the raw body, no ``json.loads`` of the
  points) + :func:`to_frame` (long frame, one categorical column per label);
- peer: ``json.loads`` + prometheus-api-client's ``MetricRangeDataFrame``;
- floor: a bare ``json.loads`` of the body (no frame at all);
- for reference, the ``json.loads`` path: ``json.loads`` + :func:`parse_matrix`.

Goals: ours at least 20x faster than the peer, and at most 1.5x the floor.

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.frames [--repeats 9] [--warmup-rounds 2] [--metric DCGM_FI_DEV_GPU_UTIL]
        [--replicas 32] [--gpus-per-replica 8] [--hours 6] [--interval 15]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.parse
import urllib.request
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import (
    BackfilledPrometheus,
    Interleaved,
    add_fleet_arguments,
    interleave,
    mode_line,
    shape_of,
    timed_table,
)
from benchmarks.fleet import START, FleetShape, fleet_series
from inference_obs.source.frames import parse_matrix, parse_matrix_body, to_frame
from inference_obs.source.openmetrics.writer import write_openmetrics


def fetch_body(shape: FleetShape, metric: str, tmp: Path) -> bytes:
    """The raw body of one range query of ``metric`` over the fleet's window."""
    samples = tmp / "samples.om"
    with samples.open("w", encoding="utf-8", newline="") as out:
        write_openmetrics((s for s in fleet_series(shape) if s.name == metric), out)
    with BackfilledPrometheus(tmp / "prometheus", samples) as prom:
        start = START.timestamp()
        fields = {
            "query": metric,
            "start": f"{start:.3f}",
            "end": f"{start + shape.hours * 3600:.3f}",
            "step": f"{shape.interval_s:.3f}",
        }
        request = urllib.request.Request(
            prom.base_url + "/api/v1/query_range", urllib.parse.urlencode(fields).encode()
        )
        with urllib.request.urlopen(request, timeout=300) as resp:
            body: bytes = resp.read()
    return body


#: The sides, in the order of the first round (each later round starts one side later).
SIDES = ("floor", "json", "body", "ours", "peer")
_LABELS = {
    "floor": "bare json.loads (floor)",
    "json": "json.loads + parse_matrix",
    "body": "ours: parse_matrix_body",
    "ours": "ours: parse_matrix_body + to_frame",
    "peer": "peer: json.loads + MetricRangeDataFrame",
}


def sides(body: bytes) -> dict[str, Callable[[], object]]:
    """Each side's work on ``body``, from the bytes to its result (nothing kept between calls)."""
    from prometheus_api_client import MetricRangeDataFrame

    def peer() -> Any:
        with warnings.catch_warnings():  # its pandas deprecation warning (set_index inplace)
            warnings.simplefilter("ignore")
            return MetricRangeDataFrame(json.loads(body)["data"]["result"])

    work: dict[str, Callable[[], object]] = {
        "floor": lambda: json.loads(body),
        "json": lambda: parse_matrix(json.loads(body)["data"]["result"]),
        "body": lambda: parse_matrix_body(body),
        "ours": lambda: to_frame(parse_matrix_body(body)[0]),
        "peer": peer,
    }
    return {name: work[name] for name in SIDES}


def measure(body: bytes, rounds: int, warmup_rounds: int = 1) -> Interleaved:
    """Every side on ``body``, interleaved in rotating order after the same warm-up."""
    return interleave(sides(body), rounds, warmup_rounds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds")
    parser.add_argument("--warmup-rounds", type=int, default=2, help="untimed rounds first")
    parser.add_argument("--metric", default="DCGM_FI_DEV_GPU_UTIL")
    add_fleet_arguments(parser, FleetShape())
    args = parser.parse_args(argv)
    shape = shape_of(args)
    with tempfile.TemporaryDirectory(prefix="frames-") as tmp:
        body = fetch_body(shape, args.metric, Path(tmp))
    answer = json.loads(body)["data"]["result"]
    points = sum(len(one["values"]) for one in answer)
    print(
        f"{args.metric} of {shape.replicas} replicas x {shape.gpus_per_replica} GPUs, "
        f"{shape.hours:g} h at {shape.interval_s:g} s: one query_range answer of {len(answer)} "
        f"series, {points:,} points, {len(body) / 1e6:.1f} MB of JSON"
    )
    del answer
    found = measure(body, args.repeats, args.warmup_rounds)
    timed = found.sides
    floor = timed["floor"].median
    notes = {name: f"{timed[name].median / floor:.2f}x floor" for name in ("json", "body", "ours")}
    notes["peer"] = f"{found.ratio('peer', 'ours')} ours"
    print("\n" + timed_table(found, _LABELS, "ms", notes))
    print(
        f"\nours vs peer: {found.ratio('peer', 'ours')} faster in wall time, "
        f"{found.ratio('peer', 'ours', 'cpu')} in CPU time (goal >= 20x; the median of the "
        f"rounds' ratios, their spread); ours vs floor: {timed['ours'].median / floor:.2f}x "
        "(goal <= 1.5x)"
    )
    print(mode_line(found.mode()))


if __name__ == "__main__":
    main()
