"""API JSON -> frame: our parser vs prometheus-api-client vs bare ``json.loads``.

Data: ``--series`` gauge series of ``--points`` samples at 15 s (default 50 x
10,000 = 500,000 points), backfilled into Prometheus 2.42 with promtool; one
``query_range`` over all of them at the sample step is fetched once and its
raw JSON body kept. Then, medians of ``--repeats`` runs in the same process:

- ours: :func:`parse_matrix_body` (the raw body, no ``json.loads`` of the
  points) + :func:`to_frame` (long frame);
- for reference, the ``json.loads`` path: ``json.loads`` + :func:`parse_matrix`;
- peer: ``json.loads`` + prometheus-api-client's ``MetricRangeDataFrame``;
- floor: a bare ``json.loads`` of the body.

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.frames [--series 50] [--points 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inference_obs.source.frames import parse_matrix, parse_matrix_body, to_frame
from tests.integration.servers import PrometheusServer

T0 = 1_700_000_000
STEP = 15


def median_seconds(run: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--series", type=int, default=50)
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    lines = [
        f'bench_gauge{{replica="r{s}",model="m"}} {(s * 7 + i) % 1000 / 7} {T0 + STEP * i}'
        for s in range(args.series)
        for i in range(args.points)
    ]
    with (
        tempfile.TemporaryDirectory() as tmp,
        PrometheusServer(Path(tmp), "\n".join([*lines, "# EOF", ""])) as prom,
    ):
        fields = {
            "query": "bench_gauge",
            "start": str(T0),
            "end": str(T0 + STEP * (args.points - 1)),
            "step": str(STEP),
        }
        request = urllib.request.Request(
            prom.base_url + "/api/v1/query_range", urllib.parse.urlencode(fields).encode()
        )
        with urllib.request.urlopen(request, timeout=120) as resp:
            body: bytes = resp.read()
    from prometheus_api_client import MetricRangeDataFrame

    def ours() -> Any:
        return to_frame(parse_matrix_body(body)[0])

    def via_json() -> Any:
        return parse_matrix(json.loads(body)["data"]["result"])

    def peer() -> Any:
        return MetricRangeDataFrame(json.loads(body)["data"]["result"])

    def bare() -> Any:
        return json.loads(body)

    points = len(ours())
    print(f"{points:,} points, {len(body) / 1e6:.1f} MB of JSON")
    t_bare = median_seconds(bare, args.repeats)
    t_ours = median_seconds(ours, args.repeats)
    t_body = median_seconds(lambda: parse_matrix_body(body), args.repeats)
    t_json = median_seconds(via_json, args.repeats)
    t_peer = median_seconds(peer, max(1, args.repeats // 2))
    print(f"json.loads                         {t_bare * 1e3:9.1f} ms")
    print(
        f"json.loads + parse_matrix          {t_json * 1e3:9.1f} ms  ({t_json / t_bare:.2f}x json)"
    )
    print(
        f"ours: parse_matrix_body            {t_body * 1e3:9.1f} ms  ({t_body / t_bare:.2f}x json)"
    )
    print(
        f"ours: parse_matrix_body + to_frame {t_ours * 1e3:9.1f} ms  ({t_ours / t_bare:.2f}x json)"
    )
    print(
        f"MetricRangeDataFrame               {t_peer * 1e3:9.1f} ms  ({t_peer / t_ours:.1f}x ours)"
    )


if __name__ == "__main__":
    main()
