"""A live report over a slow link: wall time with and without latency, requests per phase,
and the critical path.

Data: a bundled dataset (``--dataset``, by default ``datasets/pro5000-vs-h20``)
backfilled into Prometheus 2.42 by promtool, with a
:class:`~benchmarks.relay.LatencyRelay` in front that holds every chunk
``--delay-ms`` (50) in each direction, and one more round trip for each new
connection (TCP's handshake; ``--no-handshake`` leaves it out). The runner
measures:

- the report the way users run it: ``inference-obs report --prometheus URL
  --deployments manifest.json --start ... --end ...`` in process (all
  formats and figures, into a temporary directory), directly against
  Prometheus and through the relay; medians of ``--repeats`` runs each, and
  their ratio (goal: at most 3x);
- the requests and connections the relay saw (exact, the same each run);
- one more run through the relay, built with
  :func:`~inference_obs.report.build_report` as the command line builds it
  but through a source that records each request: which phase of the
  report asked (the analysis whose progress line started the work that
  asked, in whichever thread, or where the report asks one question at a
  time the outermost ``inference_obs.analyses`` module on the stack; a
  question two phases ask counts for the first), what kind of request, and
  when it was sent and answered. From those times, per phase and for the whole report, the
  critical path: the longest chain of requests in which each was sent only
  after the one before it had been answered. In a report that asks one
  question at a time that is every request; however the report overlaps its
  questions, its wall time over the link is at least the chain's length in
  round trips.

Run from the repository root (needs Debian's ``prometheus`` package)::

    python -m benchmarks.live_link [--dataset datasets/pro5000-vs-h20] [--delay-ms 50]
        [--repeats 3] [--no-handshake] [--parallel 8]

A request is timed from its call, waits for a free connection included, so
requests that only queued behind the ``--parallel`` bound do not lengthen the
chain; work the report's threads had no thread free for runs where its result
is needed, one after another, and does. The runner prints the path link by
link (phase, times, what was asked).
"""

from __future__ import annotations

import argparse
import bisect
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks.common import BackfilledPrometheus, patient_http
from benchmarks.relay import LatencyRelay
from inference_obs.cli import main as cli
from inference_obs.query import Expr, to_promql
from inference_obs.report import build_report
from inference_obs.source.dataset.reader import SAMPLES, read_dataset
from inference_obs.source.prometheus import PrometheusSource

DATASET = Path("datasets") / "pro5000-vs-h20"
#: Goal: the report over the slow link takes at most this many times its direct time.
GOAL_RATIO = 3.0
_SOURCE_METHODS = ("info", "instant", "range", "raw", "series", "label_names", "label_values")
_KINDS = {
    "info": "discovery (buildinfo, series, labels, metadata)",
    "series": "discovery (buildinfo, series, labels, metadata)",
    "label_names": "discovery (buildinfo, series, labels, metadata)",
    "label_values": "discovery (buildinfo, series, labels, metadata)",
    "metadata": "discovery (buildinfo, series, labels, metadata)",
    "instant": "instant queries",
    "range": "range queries",
    "raw": "raw samples (instant query of a range selector)",
}
# The report's phases, by the analyses module that asks (the outermost on the stack).
_PHASES = {
    "latency": "latency",
    "shapes": "shapes",
    "throughput": "throughput",
    "cache": "cache",
    "gpu": "GPU",
    "queueing": "queueing",
    "bottleneck": "bottleneck",
    "configuration": "configuration",
    "boundaries": "boundaries",
    "cost": "cost",
    "rolling": "figures",
    "figures": "figures",
    "validity": "comparison checks",
    "resolution": "resolution (tile width)",
}
_REPORT = "report (engine info)"
# The report's progress lines ("PRO: latency", "PRO: figures (GPU heat map)", ...) by phase.
_PROGRESS = {
    "latency": "latency",
    "shapes": "shapes",
    "throughput": "throughput",
    "cache": "cache",
    "GPU": "GPU",
    "queueing": "queueing",
    "bottleneck": "bottleneck",
    "configuration": "configuration",
    "stage boundaries": "boundaries",
    "cost": "cost",
    "figures": "figures",
    "comparison checks": "comparison checks",
    "resolution": "resolution (tile width)",
    "first questions": "first questions (asked ahead)",
}
#: The phase of the analysis running in this context, from its progress line.
PHASE: ContextVar[str | None] = ContextVar("PHASE", default=None)


@dataclass(frozen=True, slots=True)
class Call:
    """One request a source sent: who asked, what kind, when (``time.perf_counter`` s), and
    what it asked (PromQL, a label, or empty)."""

    phase: str
    kind: str
    sent: float
    answered: float
    what: str = ""


def _asked(name: str, args: tuple[Any, ...]) -> str:
    """What a source method called with ``args`` asked, in one short line."""
    if not args:
        return name
    first = args[0]
    text = to_promql(first) if isinstance(first, Expr) else str(first)
    return f"{name} {text}"


def progress(line: str) -> None:
    """``build_report``'s progress callback: the phase a progress line starts, for its requests.

    The report calls it in the context its analysis runs in, and work the
    analysis starts runs in copies of that context, so every request the
    analysis causes, in whichever thread, sees the phase. A line naming
    several analyses at once names no phase (their requests are told apart
    by the stack).
    """
    what = line.split(": ", 1)[-1].split(" (", 1)[0]
    # Another analysis's line names its phase by its title; "analyses" starts them all.
    PHASE.set(_PROGRESS.get(what, None if what == "analyses" else what))


def phase_of(frame: FrameType | None) -> str:
    """The phase set by :func:`progress`, else that of the outermost ``inference_obs.analyses``
    function on the stack (right where the report asks one question at a time)."""
    if (phase := PHASE.get()) is not None:
        return phase
    found = _REPORT
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module.startswith("inference_obs.analyses."):
            name = module.rsplit(".", 1)[-1]
            found = _PHASES.get(name, name)
        frame = frame.f_back
    return found


class RecordingSource:
    """Delegates to a source; records each request's phase, kind and times (thread-safe)."""

    def __init__(self, source: PrometheusSource) -> None:
        self._source = source
        self._lock = threading.Lock()
        self.calls: list[Call] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._source, name)
        if name not in (*_SOURCE_METHODS, "metadata"):
            return method

        def recorded(*args: Any, **kwargs: Any) -> Any:
            phase = phase_of(sys._getframe(1))
            sent = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                call = Call(phase, _KINDS[name], sent, time.perf_counter(), _asked(name, args))
                with self._lock:
                    self.calls.append(call)

        return recorded


def longest_chain(calls: Sequence[Call]) -> int:
    """The most requests in a chain where each was sent after the one before was answered.

    >>> longest_chain([Call("a", "k", 0, 1), Call("a", "k", 0.5, 2), Call("a", "k", 2, 3)])
    2
    """
    return len(critical_path(calls))


def critical_path(calls: Sequence[Call]) -> list[Call]:
    """One longest chain of ``calls`` in which each was sent after the one before was
    answered, in order.

    >>> [c.sent for c in critical_path([Call("a", "k", 0, 1), Call("b", "k", 0.5, 2),
    ...                                  Call("c", "k", 2, 3)])]
    [0.5, 2]
    """
    ordered = sorted(calls, key=lambda c: c.answered)
    ends: list[float] = []  # answer times, in order
    best: list[tuple[int, int]] = []  # best[i]: (length, end) of the longest chain among 0..i
    before_of: list[int | None] = []  # the call each one's longest chain follows
    for i, call in enumerate(ordered):
        # Every request answered by the time this one was sent is already in ``ends``.
        before = bisect.bisect_right(ends, call.sent)
        length, previous = (best[before - 1][0] + 1, best[before - 1][1]) if before else (1, None)
        ends.append(call.answered)
        before_of.append(previous)
        best.append(max((length, i), best[-1]) if best else (length, i))
    chain: list[Call] = []
    at: int | None = best[-1][1] if best else None
    while at is not None:
        chain.append(ordered[at])
        at = before_of[at]
    return chain[::-1]


def in_flight_seconds(calls: Sequence[Call]) -> float:
    """Seconds during which at least one of ``calls`` was waiting for its answer.

    >>> in_flight_seconds([Call("a", "k", 0, 1), Call("a", "k", 0.5, 2), Call("a", "k", 3, 4)])
    3.0
    """
    total, end = 0.0, float("-inf")
    for call in sorted(calls, key=lambda c: c.sent):
        if call.answered > end:
            total += call.answered - max(call.sent, end)
            end = call.answered
    return total


@dataclass
class Measured:
    """What the runs measured."""

    direct_s: list[float]
    delayed_s: list[float]
    requests: int
    connections: int
    calls: list[Call]
    recorded_s: float


def _timed(run: Callable[[], int]) -> float:
    started = time.perf_counter()
    code = run()
    if code not in (0, 5):  # 5: a comparison is invalid, which is a finding, not a failure
        raise RuntimeError(f"inference-obs report exited with {code}")
    return time.perf_counter() - started


def measure(
    dataset: Path, delay_s: float, repeats: int, handshake: bool, tmp: Path, parallel: int = 8
) -> Measured:
    """Backfill ``dataset``, then run the report directly and over the relay, with at most
    ``parallel`` requests in flight (the command line's ``--parallel``)."""
    manifest = read_dataset(dataset, cache=None).manifest
    window = manifest.window.window()
    with (
        BackfilledPrometheus(tmp / "prometheus", dataset / SAMPLES) as prom,
        LatencyRelay(prom.base_url, delay_s, handshake=handshake) as relay,
    ):
        runs = 0

        def report(url: str) -> int:
            nonlocal runs
            runs += 1
            argv = ["report", "--prometheus", url, "--deployments", str(dataset / "manifest.json")]
            argv += ["--start", window.start.isoformat(), "--end", window.end.isoformat()]
            argv += ["--parallel", str(parallel)]
            return cli([*argv, "--out", str(tmp / f"report-{runs}"), "--quiet"])

        direct, delayed, counts = [], [], set()
        for _ in range(repeats):
            direct.append(_timed(lambda: report(prom.base_url)))
            relay.reset()
            delayed.append(_timed(lambda: report(relay.url)))
            counts.add((relay.requests, relay.connections))
            print(f"  run: direct {direct[-1]:.2f} s, over the link {delayed[-1]:.2f} s")
        if len(counts) > 1:
            print(f"  requests, connections differed between runs: {sorted(counts)}")
        requests, connections = max(counts)
        recording = RecordingSource(PrometheusSource(relay.url, timeout=600.0, parallel=parallel))
        started = time.perf_counter()
        # As the command line builds it for a live source (no scrape interval, figures drawn).
        build_report(
            recording,
            manifest.deployments,
            window,
            title="Observation report",
            source_name=relay.url,
            progress=progress,
        )
        recorded_s = time.perf_counter() - started
    return Measured(direct, delayed, requests, connections, recording.calls, recorded_s)


def print_results(m: Measured, delay_s: float, handshake: bool) -> None:
    """The wall times, the requests per phase and the critical path."""
    direct, delayed = statistics.median(m.direct_s), statistics.median(m.delayed_s)
    round_trip = 2 * delay_s
    ratio = delayed / direct
    met = "met" if ratio <= GOAL_RATIO else "not met"
    print(
        f"\nlink: {delay_s * 1e3:g} ms each way ({round_trip * 1e3:g} ms round trip)"
        + (", plus one round trip per new connection" if handshake else "")
        + f"; medians of {len(m.direct_s)} runs of `inference-obs report` (in process)\n"
        f"{'':34} {'median s':>9}\n"
        f"{'direct (no added latency)':34} {direct:9.2f}\n"
        f"{'over the link':34} {delayed:9.2f}\n"
        f"over the link / direct = {ratio:.1f}x (goal <= {GOAL_RATIO:g}x: {met})\n"
        f"requests: {m.requests:,} over {m.connections:,} connections "
        f"({m.requests / max(m.connections, 1):.1f} per connection)"
    )
    by_phase: dict[str, list[Call]] = defaultdict(list)
    for call in m.calls:
        by_phase[call.phase].append(call)
    chain = longest_chain(m.calls)
    print(
        f"\nrecorded run over the link (build_report, {m.recorded_s:.2f} s): {len(m.calls):,} "
        f"requests\n{'phase':34} {'requests':>9} {'chain':>6} {'in flight s':>12}"
    )
    for phase, calls in sorted(by_phase.items(), key=lambda item: -len(item[1])):
        busy = in_flight_seconds(calls)
        print(f"{phase:34} {len(calls):9,} {longest_chain(calls):6,} {busy:12.2f}")
    print(f"{'whole report':34} {len(m.calls):9,} {chain:6,} {in_flight_seconds(m.calls):12.2f}")
    path = critical_path(m.calls)
    print(f"\nthe critical path, link by link ({len(path)} requests):")
    print(f"{'#':>3} {'phase':32} {'sent s':>7} {'answered s':>10}  asked")
    start = min((call.sent for call in m.calls), default=0.0)
    for i, call in enumerate(path, 1):
        asked = call.what if len(call.what) <= 90 else call.what[:87] + "..."
        print(
            f"{i:3} {call.phase:32} {call.sent - start:7.2f} {call.answered - start:10.2f}  {asked}"
        )
    on_path = Counter(call.phase for call in path)
    print("links per phase: " + ", ".join(f"{p} {n}" for p, n in on_path.most_common()))
    kinds = Counter(call.kind for call in m.calls)
    print(f"\n{'kind of request':48} {'requests':>9}")
    for kind, count in kinds.most_common():
        print(f"{kind:48} {count:9,}")
    print(
        f"\ncritical path: {chain:,} requests one after another on the longest chain, each at "
        f"least a round trip: {chain * round_trip:.1f} s of the recorded run's "
        f"{m.recorded_s:.1f} s"
        + (" (twice that where each request opens a connection)" if handshake else "")
        + "\nchain: the longest chain of requests each sent after the one before it was "
        "answered; in flight s: time with at least one of the phase's requests unanswered"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET, help="a dataset directory")
    parser.add_argument("--delay-ms", type=float, default=50.0, help="added latency each way")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each report")
    parser.add_argument(
        "--parallel", type=int, default=8, help="requests in flight at once (the CLI's default: 8)"
    )
    parser.add_argument(
        "--handshake",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a new connection costs one more round trip, as TCP's handshake does",
    )
    args = parser.parse_args(argv)
    delay_s = args.delay_ms / 1e3
    with patient_http(), tempfile.TemporaryDirectory(prefix="live-link-") as tmp:
        measured = measure(
            args.dataset, delay_s, args.repeats, args.handshake, Path(tmp), args.parallel
        )
    print(f"\nat most {args.parallel} requests in flight (--parallel)")
    print_results(measured, delay_s, args.handshake)


if __name__ == "__main__":
    main()
