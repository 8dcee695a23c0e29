"""A live report's load on Prometheus: requests and bytes through a counting proxy, at two sizes.

Data: the generated fleet (:mod:`benchmarks.fleet`) at each of ``--sizes``
replicas (8 GPUs each, 6 h at 15 s), backfilled into Prometheus 2.42 with
promtool, with :class:`~benchmarks.proxy.CountingProxy` in front. At each
size the runner measures, by what the proxy forwarded (uncompressed JSON):

- the report as it is: ``inference-obs report --prometheus PROXY
  --deployments manifest.json --start ... --end ...`` (in process);
- the same report built with :func:`~inference_obs.report.build_report`,
  one question at a time (``workers=1``), through a source that tags each
  request with the analysis that made it (the outermost
  ``inference_obs.analyses`` function on the call stack): the breakdown by
  analysis and by kind of request;
- the peer: a raw fetch of every series of the deployments (each metric name
  the dataset holds, ``raw()`` over the window, once per deployment).

Goals: the number of requests does not grow with the number of replicas,
and the report receives less than 1 % of the raw fetch's bytes. The runner
prints how the bytes split by analysis and by kind of request; below 32
replicas it extrapolates to 32 on the line through the two sizes (``--sizes
8,32`` measures the full fleet in about 3 minutes).

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.live_report [--sizes 8,32] [--hours 6] [--interval 15]
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import re
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import BackfilledPrometheus, mode_line, patient_http
from benchmarks.fleet import FleetShape, write_fleet
from benchmarks.proxy import CountingProxy, Exchange, on_the_wire, totals
from inference_obs.cli import main as cli
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import MetricType, family
from inference_obs.query import Selector
from inference_obs.report import build_report
from inference_obs.source.dataset.reader import SAMPLES
from inference_obs.source.prometheus import PrometheusSource

# A raw fetch: an instant query of a bare range selector, as PrometheusSource.raw sends it.
_RAW = re.compile(r"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{.*\})?\[[0-9a-z]+\]", re.S)
_COUNTER_SUFFIXES = ("_total", "_sum", "_count", "_bucket")
#: The full fleet's replicas, for the extrapolation.
FULL_REPLICAS = 32
_SOURCE_METHODS = ("info", "instant", "range", "raw", "series", "label_names", "label_values")


class TaggingSource:
    """Delegates to a source; each request is tagged with the analysis that asked for it."""

    def __init__(self, source: PrometheusSource, proxy: CountingProxy) -> None:
        self._source = source
        self._proxy = proxy

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._source, name)
        if name not in (*_SOURCE_METHODS, "metadata"):
            return method

        def tagged(*args: Any, **kwargs: Any) -> Any:
            self._proxy.tag = _caller()
            try:
                return method(*args, **kwargs)
            finally:
                self._proxy.tag = ""

        return tagged


def _counter(name: str) -> bool:
    try:
        kind = family(name).type
    except ConfigurationError:  # a metric the catalogue does not know
        return name.endswith(_COUNTER_SUFFIXES)
    return kind in (MetricType.COUNTER, MetricType.HISTOGRAM)


def kind_of(exchange: Exchange) -> str:
    """What kind of request an exchange was."""
    if exchange.path == "/api/v1/query_range":
        return "range queries"
    if exchange.path == "/api/v1/query":
        raw = _RAW.fullmatch(exchange.query)
        if raw is None:
            return "instant queries"
        return "raw samples, counters" if _counter(raw["name"]) else "raw samples, gauges"
    return "discovery (series, labels, metadata, buildinfo)"


def _caller() -> str:
    """The outermost analysis function on the stack (``report`` if none)."""
    found = "report"
    for frame in inspect.stack(context=0):
        module = str(frame.frame.f_globals.get("__name__", ""))
        if module.startswith("inference_obs.analyses."):
            found = f"{module.rsplit('.', 1)[-1]}.{frame.function}"
    return found


@dataclass
class Measured:
    """What one fleet size cost."""

    replicas: int
    series: int
    samples: int
    report: list[Exchange]
    tagged: list[Exchange]
    raw: list[Exchange]
    steps: dict[str, float | None]  # per deployment: tile width read at (None: per scrape)


def measure(shape: FleetShape, tmp: Path) -> Measured:
    """Generate, backfill and measure one fleet size."""
    dataset = write_fleet(tmp / f"fleet-{shape.replicas}", shape)
    names = sorted(set(dataset.samples.names))
    series, samples = len(dataset.samples), int(dataset.samples.offsets[-1])
    manifest, path = dataset.manifest, dataset.path
    del dataset
    window = manifest.window.window()
    with (
        BackfilledPrometheus(tmp / f"prometheus-{shape.replicas}", path / SAMPLES) as prom,
        contextlib.closing(CountingProxy(prom.base_url)) as proxy,
    ):
        argv = ["report", "--prometheus", proxy.url, "--deployments", str(path / "manifest.json")]
        argv += ["--start", window.start.isoformat(), "--end", window.end.isoformat()]
        code = cli([*argv, "--out", str(tmp / f"report-{shape.replicas}"), "--quiet"])
        if code not in (0, 5):  # 5: a comparison is invalid, which is a finding, not a failure
            raise RuntimeError(f"inference-obs report exited with {code}")
        report = proxy.take()
        source = PrometheusSource(proxy.url, timeout=600.0)
        built = build_report(
            TaggingSource(source, proxy),
            manifest.deployments,
            window,
            title=manifest.title,
            source_name=proxy.url,
            scrape_interval_seconds=manifest.scrape_interval_seconds,
            # One question at a time, so that the proxy's tag names the analysis asking.
            workers=1,
        )
        tagged = proxy.take()
        proxy.tag = "raw fetch"
        for deployment in manifest.deployments:
            for name in names:
                source.raw(Selector(name, deployment.matchers), window)
        raw = proxy.take()
    steps = {d.deployment.name: d.step_seconds for d in built.deployments}
    return Measured(shape.replicas, series, samples, report, tagged, raw, steps)


def _mb(n: float) -> str:
    return f"{n / 1e6:,.2f} MB"


def _table(title: str, rows: Iterable[tuple[str, list[Exchange]]], whole: int) -> None:
    print(f"\n{title:46} {'requests':>9} {'received':>12} {'share':>7}")
    for label, exchanges in rows:
        count, received = totals(exchanges)
        print(f"{label:46} {count:9,} {_mb(received):>12} {received / whole:6.1%}")


def report_size(m: Measured) -> None:
    """Print one size's numbers."""
    count, received = totals(m.report)
    raw_count, raw_bytes = totals(m.raw)
    wire, raw_wire = on_the_wire(m.report), on_the_wire(m.raw)
    print(
        f"\n=== {m.replicas} replicas: {m.series:,} series, {m.samples:,} samples ===\n"
        f"report as it is: {count:,} requests, {_mb(received)}; raw fetch of every series: "
        f"{raw_count:,} requests, {_mb(raw_bytes)}; report / raw = {received / raw_bytes:.2%}\n"
        f"on the wire (gzip, as the client asks): report {_mb(wire)}, raw fetch "
        f"{_mb(raw_wire)}; report / raw = {wire / raw_wire:.2%}\n"
        "queueing, boundaries and sampled shares read "
        + ", ".join(
            f"{name}: {'per scrape' if step is None else f'{step:g} s tiles'}"
            for name, step in m.steps.items()
        )
    )
    by_tag: dict[str, list[Exchange]] = defaultdict(list)
    by_kind: dict[str, list[Exchange]] = defaultdict(list)
    for one in m.tagged:
        by_tag[one.tag].append(one)
        by_kind[kind_of(one)].append(one)
    tagged_bytes = totals(m.tagged)[1]

    def order(item: tuple[str, list[Exchange]]) -> int:
        return -totals(item[1])[1]

    _table("by analysis (build_report, tagged)", sorted(by_tag.items(), key=order), tagged_bytes)
    _table("by kind of request", sorted(by_kind.items(), key=order), tagged_bytes)
    print(f"  goal: < 1% of the raw fetch ({_mb(raw_bytes / 100)} here)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="8,32", help="replica counts, comma-separated")
    parser.add_argument("--gpus-per-replica", type=int, default=8)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--interval", type=float, default=15.0, help="scrape, s")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.sizes.split(",")]
    results = []
    with patient_http(), tempfile.TemporaryDirectory(prefix="live-") as tmp:
        for n in sizes:
            shape = FleetShape(n, args.gpus_per_replica, args.hours, args.interval)
            results.append(measure(shape, Path(tmp)))
            report_size(results[-1])
    print("\nacross sizes (medians are not needed: request counts and bytes are exact):")
    print(f"{'replicas':>9} {'requests':>9} {'received':>12} {'raw fetch':>12} {'share':>7}")
    for m in results:
        count, received = totals(m.report)
        raw_bytes = totals(m.raw)[1]
        print(
            f"{m.replicas:9} {count:9,} {_mb(received):>12} {_mb(raw_bytes):>12} "
            f"{received / raw_bytes:6.2%}"
        )
    first, last = results[0], results[-1]
    grow = totals(last.report)[0] - totals(first.report)[0]
    print(f"requests grew by {grow} from {first.replicas} to {last.replicas} replicas (goal: 0)")
    if first.replicas < last.replicas < FULL_REPLICAS:
        # Straight lines through the two sizes: what grows with the fleet, and what does not.
        def at_full(exchanges: tuple[list[Exchange], list[Exchange]]) -> float:
            a, b = (totals(e)[1] for e in exchanges)
            slope = (b - a) / (last.replicas - first.replicas)
            return b + slope * (FULL_REPLICAS - last.replicas)

        report = at_full((first.report, last.report))
        raw = at_full((first.raw, last.raw))
        print(
            f"at {FULL_REPLICAS} replicas (extrapolated on the line through both sizes): report "
            f"{_mb(report)}, raw fetch {_mb(raw)}, {report / raw:.2%} of the raw fetch"
        )
    print(
        mode_line(
            "exact counts of requests and bytes, not timed; the report, the tagged build and "
            "the raw fetch each with a client of its own, one after another on one server "
            "(which keeps no answers)"
        )
    )


if __name__ == "__main__":
    main()
