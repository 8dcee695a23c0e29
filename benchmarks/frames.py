"""API JSON -> frame on a fleet range answer: ours, prometheus-api-client, bare ``json.loads``.

Data: one family of the generated fleet (:mod:`benchmarks.fleet`; by default
``DCGM_FI_DEV_GPU_UTIL`` of 32 replicas x 8 GPUs over 6 h at 15 s: 256
series with dcgm-exporter's twelve labels, about 368,000 points) backfilled
into Prometheus 2.42 with promtool. One ``query_range`` of the family over
the whole window at the scrape interval, as the report's GPU heat map asks,
is fetched once and its raw JSON body kept. Then, medians of ``--repeats``
runs in the same process:

- ours: :func:`parse_matrix_body` (the raw body, no ``json.loads`` of the
  points) + :func:`to_frame` (long frame, one categorical column per label);
- peer: ``json.loads`` + prometheus-api-client's ``MetricRangeDataFrame``;
- floor: a bare ``json.loads`` of the body (no frame at all);
- for reference, the ``json.loads`` path: ``json.loads`` + :func:`parse_matrix`.

Goals: ours at least 20x faster than the peer, and at most 1.5x the floor.

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.frames [--repeats 5] [--metric DCGM_FI_DEV_GPU_UTIL]
        [--replicas 32] [--gpus-per-replica 8] [--hours 6] [--interval 15]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import urllib.parse
import urllib.request
import warnings
from pathlib import Path
from typing import Any

from benchmarks.common import BackfilledPrometheus, add_fleet_arguments, median_seconds, shape_of
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--metric", default="DCGM_FI_DEV_GPU_UTIL")
    add_fleet_arguments(parser, FleetShape())
    args = parser.parse_args(argv)
    shape = shape_of(args)
    with tempfile.TemporaryDirectory(prefix="frames-") as tmp:
        body = fetch_body(shape, args.metric, Path(tmp))
    from prometheus_api_client import MetricRangeDataFrame

    def ours() -> Any:
        return to_frame(parse_matrix_body(body)[0])

    def via_json() -> Any:
        return parse_matrix(json.loads(body)["data"]["result"])

    def peer() -> Any:
        with warnings.catch_warnings():  # its pandas deprecation warning (set_index inplace)
            warnings.simplefilter("ignore")
            return MetricRangeDataFrame(json.loads(body)["data"]["result"])

    def floor() -> Any:
        return json.loads(body)

    frame = ours()
    series = len(json.loads(body)["data"]["result"])
    print(
        f"{args.metric} of {shape.replicas} replicas x {shape.gpus_per_replica} GPUs, "
        f"{shape.hours:g} h at {shape.interval_s:g} s: one query_range answer of {series} "
        f"series, {len(frame):,} points, {len(body) / 1e6:.1f} MB of JSON"
    )
    t_floor = median_seconds(floor, args.repeats)
    t_ours = median_seconds(ours, args.repeats)
    t_body = median_seconds(lambda: parse_matrix_body(body), args.repeats)
    t_json = median_seconds(via_json, args.repeats)
    t_peer = median_seconds(peer, max(1, args.repeats // 2 + 1))
    rows = (
        ("bare json.loads (floor)", t_floor, ""),
        ("json.loads + parse_matrix", t_json, f"{t_json / t_floor:.2f}x floor"),
        ("ours: parse_matrix_body", t_body, f"{t_body / t_floor:.2f}x floor"),
        ("ours: parse_matrix_body + to_frame", t_ours, f"{t_ours / t_floor:.2f}x floor"),
        ("peer: json.loads + MetricRangeDataFrame", t_peer, f"{t_peer / t_ours:.1f}x ours"),
    )
    print(f"\n{'path':42} {'median ms':>10}  ratio")
    for label, seconds, ratio in rows:
        print(f"{label:42} {seconds * 1e3:10.1f}  {ratio}")
    print(
        f"\nours vs peer: {t_peer / t_ours:.1f}x faster (goal >= 20x); ours vs floor: "
        f"{t_ours / t_floor:.2f}x (goal <= 1.5x); medians of {args.repeats} runs "
        f"({max(1, args.repeats // 2 + 1)} for the peer)"
    )


if __name__ == "__main__":
    main()
