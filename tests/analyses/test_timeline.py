"""The time line against what was injected: the bundled PRO stall, and faults simulated afresh.

Expected times come from the scenario's fault list and the ground truth
``requests.csv``, which the tests may read and the time line may not: it reads
the analyses' results alone. Each simulated fleet is drawn at a new seed
every run (printed in every assertion message) and its fault times from that
seed, so the rules are checked against draws nobody tuned them on.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from inference_obs.analyses.queueing import QueueClass, QueueingResult, QueueRows, queueing
from inference_obs.analyses.rolling import QuantileSeries, RollingQuantiles
from inference_obs.analyses.run import DeploymentResults, run
from inference_obs.analyses.timeline import Event, EventKind, Timeline, named, timeline
from inference_obs.analyses.timeline.events import Severity
from inference_obs.analyses.timeline.incidents import _attach, _kept, _merge, _text
from inference_obs.analyses.timeline.pieces import (
    NEAR_IDLE_PERCENT,
    SPIKE_FACTOR,
    Piece,
    _queue_run,
    _queue_runs,
    latency_spikes,
    queue_pieces,
    spike_pieces,
)
from inference_obs.samples import Window
from inference_obs.simulate import simulate
from inference_obs.simulate.faults import (
    GpuStops,
    HostStarved,
    Restart,
    ScrapeGap,
    Stall,
    of_kind,
)
from inference_obs.simulate.scenario import Scenario, load_scenario, parse_scenario
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "pro5000-vs-h20"
FAULTS = Path(__file__).with_name("timeline_faults.yaml")
#: The simulated fleet's scrape interval (timeline_faults.yaml), seconds.
SCRAPE_S = 15.0


def _runs(data: Path) -> list[DeploymentResults]:
    source = DatasetSource(data)
    manifest = source.dataset.manifest
    window = manifest.window.window()
    return run(source, manifest.deployments, {d.name: window for d in manifest.deployments})


def _offsets(e: Event, start_s: float) -> tuple[float, float]:
    return e.start.timestamp() - start_s, e.end.timestamp() - start_s


def _names(e: Event, name: str) -> bool:
    return name in e.replicas


def _on(e: Event, pod: str) -> bool:
    """Whether the event names the pod (replicas are ``namespace/pod``)."""
    return any(r == pod or r.endswith(f"/{pod}") for r in e.replicas)


@pytest.fixture(scope="module")
def bundled_runs() -> list[DeploymentResults]:
    return _runs(DATASET)


@pytest.fixture(scope="module")
def bundled(bundled_runs: list[DeploymentResults]) -> Timeline:
    return timeline(bundled_runs)


def test_the_pro_stall_is_an_event_on_its_replica_within_a_scrape_of_its_times(
    bundled: Timeline,
) -> None:
    manifest = json.loads((DATASET / "manifest.json").read_text())
    scenario = load_scenario(manifest["generator"]["scenario"])
    (stall,) = of_kind(scenario.faults, Stall)
    spec = scenario.deployment_of(stall.replica)
    pod = spec.pod(spec.replicas.index(stall.replica))
    start_s = pd.Timestamp(manifest["window"]["start"]).timestamp()
    interval = float(manifest["scrape_interval_seconds"])  # 60 s
    found = [e for e in bundled.stalls if e.deployment == spec.name and _on(e, pod)]
    assert len(found) == 1, [e.text for e in bundled.events]
    (event,) = found
    first, last = _offsets(event, start_s)
    # 43m44.4s-44m40s: the one scrape inside it, at 18:24:25.667 (44m25.667s), shows it.
    assert abs(first - stall.start) <= interval, (first, stall.start)
    assert abs(last - stall.end) <= interval, (last, stall.end)
    assert event.severity.value == "critical"
    assert bundled.events[0] == event  # the most severe event of the hour
    # The ground truth at that scrape: requests scheduled and not finished, or arrived and
    # not scheduled.
    truth = pd.read_csv(DATASET / "requests.csv")
    pro = truth[truth["deployment"] == spec.name]
    at = first
    running = int(((pro["scheduled"] < at) & (pro["finish"] > at)).sum())
    waiting = int(((pro["arrival"] < at) & (pro["scheduled"] > at)).sum())
    assert (running, waiting) == (11, 4)
    assert f"{running} requests running and {waiting} waiting while the GPUs read 0%" in event.text
    # The first tokens after it came up to 56.6 s late: in TTFT bucket (40, 80] of PRO's
    # custom buckets, which the rolling P95 the event quotes lies in too.
    late = pro.loc[(pro["first_token"] > stall.end), "ttft"].max()
    assert 40 < late <= 80
    assert EventKind.LATENCY_SPIKE in event.pieces
    assert "time to first token" in event.text
    # The quantile is quoted as its bucket, which holds the truth; never the interpolation.
    assert "rose to between 40 and 80 s" in event.text


def test_the_events_come_from_the_series_not_from_what_the_dataset_says_of_itself(
    bundled: Timeline, tmp_path: Path
) -> None:
    blank = tmp_path / "blank"
    shutil.copytree(DATASET, blank)
    manifest = json.loads((blank / "manifest.json").read_text())
    assert any("stall" in line for line in manifest["methodology"])  # the fault, in words
    manifest["methodology"] = []
    manifest["title"] = "untitled"
    for truth in ("requests.csv", "aggregates.json"):  # the ground truth and targets too
        del manifest["files"][truth]
        (blank / truth).unlink()
    (blank / "manifest.json").write_text(json.dumps(manifest, indent=2))
    assert timeline(_runs(blank)) == bundled


@dataclass(frozen=True)
class Drawn:
    """A fleet simulated at a fresh seed, with or without its faults."""

    seed: int
    scenario: Scenario
    data: Path
    timeline: Timeline
    start_s: float


def _draw(seed: int, with_faults: bool, out: Path) -> Drawn:
    rng = random.Random(seed)

    def at(low: float, high: float) -> float:
        return round(rng.uniform(low, high), 1)

    stall, host, gap, gpu_gap = at(120, 180), at(420, 480), at(120, 240), at(360, 480)
    times = {
        "stall_start": stall,
        "stall_end": stall + at(60, 120),
        "host_start": host,
        "host_end": host + 180,
        "restart_at": at(200, 300),
        "downtime": at(40, 60),
        "gpu_stops_at": at(480, 600),
        "app_gap_start": gap,
        "app_gap_end": gap + at(40, 70),
        "gpu_gap_start": gpu_gap,
        "gpu_gap_end": gpu_gap + at(40, 70),
    }
    text = FAULTS.read_text()
    if not with_faults:
        text = text.split("\nfaults:")[0]
    for name, value in times.items():
        text = text.replace(f"{{{name}}}", str(value))
    scenario = parse_scenario(text, str(FAULTS))
    data = out / "data"
    simulate(scenario, data, seed=seed)
    start_s = DatasetSource(data).dataset.manifest.window.window().start_s
    return Drawn(seed, scenario, data, timeline(_runs(data)), start_s)


@pytest.fixture(scope="module")
def seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)


@pytest.fixture(scope="module")
def faulty(seed: int, tmp_path_factory: pytest.TempPathFactory) -> Drawn:
    return _draw(seed, True, tmp_path_factory.mktemp("faulty"))


@pytest.fixture(scope="module")
def healthy(seed: int, tmp_path_factory: pytest.TempPathFactory) -> Drawn:
    return _draw(seed, False, tmp_path_factory.mktemp("healthy"))


def _pod(drawn: Drawn, replica: str) -> str:
    spec = drawn.scenario.deployment_of(replica)
    return spec.pod(spec.replicas.index(replica))


def _gpu_labels(drawn: Drawn, replica: str, **wanted: str) -> dict[str, str]:
    """Labels of the replica's first GPU utilisation series matching ``wanted``."""
    pod = _pod(drawn, replica)
    for s in read_dataset(drawn.data).samples:
        labels = {**wanted, "pod": pod}
        if s.name == "DCGM_FI_DEV_GPU_UTIL" and all(
            s.labels.get(k) == v for k, v in labels.items()
        ):
            return dict(s.labels)
    raise AssertionError(f"no GPU series of {replica}")


def _near(
    drawn: Drawn,
    kinds: set[EventKind],
    named_as: Callable[[Event], bool],
    times: tuple[float, float],
    slack: float,
) -> Event:
    """The one event of ``kinds`` (as kind or piece) that is named so and starts and ends
    within ``slack`` seconds of ``times`` (offsets from the window start)."""
    everything = "\n".join(
        f"{e.kind} {e.replicas} {_offsets(e, drawn.start_s)} {e.text}"
        for e in drawn.timeline.events
    )
    found = [
        e
        for e in drawn.timeline.events
        if (e.kind in kinds or kinds & set(e.pieces))
        and named_as(e)
        and all(
            abs(got - want) <= slack
            for got, want in zip(_offsets(e, drawn.start_s), times, strict=True)
        )
    ]
    assert len(found) == 1, f"seed {drawn.seed}: {kinds} at {times}\n{everything}"
    return found[0]


def test_every_injected_fault_is_an_event_on_its_replica_at_its_time(faulty: Drawn) -> None:
    faults, two = faulty.scenario.faults, 2 * SCRAPE_S
    (stall,) = of_kind(faults, Stall)
    pod = _pod(faulty, stall.replica)
    found = _near(faulty, {EventKind.STALL}, lambda e: _on(e, pod), (stall.start, stall.end), two)
    assert found.kind is EventKind.STALL, faulty.seed
    # The highest reading of its rows: a GPU sample straddling the stall's start reads a
    # little of the work before it (seed 1317848437: 1% at the first row, then 0%).
    read = re.search(r"while the GPUs read ([0-9.]+)%", found.text)
    assert read is not None, (faulty.seed, found.text)
    assert float(read.group(1)) <= NEAR_IDLE_PERCENT, (faulty.seed, found.text)
    (restart,) = of_kind(faults, Restart)
    pod = _pod(faulty, restart.replica)
    back = restart.at + restart.downtime
    found = _near(faulty, {EventKind.RESTART}, lambda e: _on(e, pod), (restart.at, back), two)
    assert "counters reset" in found.text, faulty.seed
    for gap in of_kind(faults, ScrapeGap):
        if gap.target == "app":
            name = _pod(faulty, gap.replica)
            kind, named_as = EventKind.SCRAPE_GAP, partial(_on, pod=name)
        else:  # a GPU exporter is named by its scrape target
            name = _gpu_labels(faulty, gap.replica)["instance"]
            kind, named_as = EventKind.GPU_SCRAPE_GAP, partial(_names, name=name)
        _near(faulty, {kind}, named_as, (gap.start, gap.end), two)
    (stops,) = of_kind(faults, GpuStops)
    labels = _gpu_labels(faulty, stops.replica, gpu=str(stops.gpu))
    gpu = f"{labels['Hostname']}/gpu{stops.gpu}"
    window_s = faulty.scenario.window.duration
    _near(faulty, {EventKind.GPU_STOPPED}, lambda e: gpu in e.replicas, (stops.at, window_s), two)
    (host,) = of_kind(faults, HostStarved)
    pod = _pod(faulty, host.replica)
    # The duty cycle averages the exporter's collect interval and must fall under half
    # before a row counts: the interval can open a scrape later than the others, three.
    found = _near(
        faulty,
        {EventKind.GPUS_WAITING},
        lambda e: _on(e, pod),
        (host.start, host.end),
        3 * SCRAPE_S,
    )
    assert "waiting on the host CPUs" in found.text, faulty.seed


def test_a_fleet_without_faults_has_no_stall_restart_gap_or_stopped_gpu(healthy: Drawn) -> None:
    kinds = {e.kind for e in healthy.timeline.events}
    quiet = {EventKind.QUEUE_BURST, EventKind.LATENCY_SPIKE}
    assert kinds <= quiet, (healthy.seed, [e.text for e in healthy.timeline.events])


def test_a_spike_is_ten_times_the_median_or_more_and_splits_where_points_are_missing() -> None:
    # Median of the 7 values is 1 (by hand): 10 and 12 are spikes, 9.9 is not; the point at
    # t=600 is more than 1.5 steps after t=240, so 12 is a spike of its own.
    t = np.array([0, 60, 120, 180, 240, 600, 660], dtype=np.float64)
    values = np.array([1, 1, 9.9, 10, 1, 12, 1], dtype=np.float64)
    lower, upper = np.floor(values), np.floor(values) + 1  # any bucket around each value
    series = QuantileSeries(quantile=0.95, t=t, values=values, lower=lower, upper=upper, promql="q")
    spikes = latency_spikes(series, every=60.0)
    assert SPIKE_FACTOR == 10.0
    assert [(s.first, s.last, s.peak, s.median, s.lower, s.upper) for s in spikes] == [
        (180.0, 180.0, 10.0, 1.0, 10.0, 11.0),
        (600.0, 600.0, 12.0, 1.0, 12.0, 13.0),
    ]


def test_replicas_are_named_up_to_a_handful() -> None:
    names = [f"r-{k}" for k in range(8)]
    assert named(names) == "r-0, r-1, r-2, r-3, r-4 and 3 more"
    assert named(names[:2]) == "r-0, r-1"


def test_pieces_that_touch_on_a_replica_merge_and_a_spike_joins_the_incident_it_follows() -> None:
    stall = Piece(EventKind.STALL, "a", 0.0, 60.0, "held", ("k1",))
    # Starts one 15 s scrape after the stall's last: they touch.
    queue = Piece(EventKind.QUEUE_BURST, "a", 75.0, 120.0, "queued", ("k2",))
    later = Piece(EventKind.QUEUE_BURST, "a", 200.0, 210.0, "again", ("k2",))
    gap_b = Piece(EventKind.SCRAPE_GAP, "b", 0.0, 30.0, "gap b")
    gap_c = Piece(EventKind.SCRAPE_GAP, "c", 10.0, 40.0, "gap c")
    incidents = _merge([queue, gap_c, stall, later, gap_b], touch=15.0)
    by_kind = {(i.kind, tuple(i.replicas)): i for i in incidents}
    assert set(by_kind) == {
        (EventKind.STALL, ("a",)),
        (EventKind.QUEUE_BURST, ("a",)),  # 80 s after the queue: its own incident
        (EventKind.SCRAPE_GAP, ("b", "c")),  # the same kind on two replicas at once
    }
    held = by_kind[EventKind.STALL, ("a",)]
    assert (held.start, held.end) == (0.0, 120.0)
    # First point at 130 s over a 300 s trailing window: the stall (0-120 s, critical) and
    # the gaps (0-40 s) were on in it; the stall is the more severe.
    spike = Piece(EventKind.LATENCY_SPIKE, "", 130.0, 190.0, "slow", promql=("q",), reach=300.0)
    alone = Piece(EventKind.LATENCY_SPIKE, "", 1000.0, 1060.0, "slow later", reach=300.0)
    _attach([spike, alone], incidents)
    assert held.after == [spike]
    assert (held.start, held.end) == (0.0, 120.0)  # a spike dates nothing
    assert incidents[-1].pieces == [alone]
    assert incidents[-1].replicas == []


def test_a_one_row_stall_is_critical_only_when_a_latency_spike_follows_it() -> None:
    # One row of requests beside a GPU reading of 0: the reading may predate the requests.
    once = Piece(EventKind.STALL, "a", 0.0, 0.0, "held once", confirmed=False)
    (alone,) = _merge([once], touch=15.0)
    assert alone.severity is Severity.MAJOR
    assert "a possible stall" in _text(alone)
    # The same row, then the rolling P95 rising within its trailing window: held requests.
    (followed,) = _merge([once], touch=15.0)
    spike = Piece(EventKind.LATENCY_SPIKE, "", 60.0, 120.0, "slow", reach=300.0)
    _attach([spike], [followed])
    assert followed.severity is Severity.CRITICAL
    assert "possible" not in _text(followed)
    # Two rows holding requests on idle GPUs show the stall alone.
    (twice,) = _merge([Piece(EventKind.STALL, "a", 0.0, 60.0, "held twice")], touch=15.0)
    assert twice.severity is Severity.CRITICAL


def test_a_queue_that_a_latency_spike_followed_held_requests_and_is_critical() -> None:
    # A queue beside busy (or not yet idle) GPUs drained by itself: minor.
    queue = Piece(EventKind.QUEUE_BURST, "a", 0.0, 60.0, "up to 4 waiting, GPUs at 39.5%")
    (drained,) = _merge([queue], touch=15.0)
    assert drained.severity is Severity.MINOR
    # The same queue, then the rolling P95 at ten times its median: the users met it.
    (held,) = _merge([queue], touch=15.0)
    _attach([Piece(EventKind.LATENCY_SPIKE, "", 90.0, 150.0, "slow", reach=300.0)], [held])
    assert (held.kind, held.severity) == (EventKind.QUEUE_BURST, Severity.CRITICAL)
    # A spike alone (no queue before it) stays major: longer prompts can raise a quantile.
    (alone,) = _merge([Piece(EventKind.LATENCY_SPIKE, "", 90.0, 150.0, "slow")], touch=15.0)
    assert alone.severity is Severity.MAJOR


def test_requests_running_on_idle_gpus_with_no_queue_are_a_stall_only_with_a_spike() -> None:
    # An engine that hangs just after admitting 11 requests: the scrape sees them running,
    # none waiting, beside a GPU reading of 0 (a published PRO stall, drawn afresh).
    rows = _rows([0, 0, 0, 0], [0, 11, 0, 1], [30.0, 0.0, 0.0, 0.0])
    (run,) = _queue_runs(rows)  # one running request on an idle GPU is no run
    assert (run.start, run.stop) == (1, 2)
    piece = _queue_run(rows, run, None, "scrape", ())
    assert (piece.kind, piece.confirmed, piece.needs_spike) == (EventKind.STALL, False, True)
    assert piece.phrase.startswith("11 requests running, none waiting, while the GPUs read 0%")
    # Alone it is no event: a light load's arrivals after a GPU sample look the same.
    assert _kept(_merge([piece], touch=15.0)) == []
    # With the rolling P95 rising after it, it is the stall.
    incidents = _merge([piece], touch=15.0)
    _attach([Piece(EventKind.LATENCY_SPIKE, "", 120.0, 180.0, "slow", reach=300.0)], incidents)
    (kept,) = _kept(incidents)
    assert (kept.kind, kept.severity) == (EventKind.STALL, Severity.CRITICAL)
    # Beside a restart's scrape gap (requests seen running as the engine went down), the
    # restart stays a restart, with its own times, a spike after it or not; and it is not
    # merged with a stall of another replica at the same time (a fresh seed's injected
    # stall on chat-01 took chat-02's restart in and its times with it).
    gap = Piece(EventKind.RESTART, "a", 90.0, 150.0, "restarted")
    held = Piece(EventKind.STALL, "b", 60.0, 120.0, "74 waiting on idle GPUs")
    incidents = _merge([piece, gap, held], touch=60.0)
    assert {i.kind for i in incidents} == {EventKind.RESTART, EventKind.STALL}
    _attach([Piece(EventKind.LATENCY_SPIKE, "", 160.0, 200.0, "slow", reach=300.0)], incidents)
    by_kind = {i.kind: i for i in _kept(incidents)}
    restart = by_kind[EventKind.RESTART]
    assert (restart.start, restart.end, restart.replicas) == (90.0, 150.0, ["a"])
    assert by_kind[EventKind.STALL].replicas == ["b"]
    # Two such rows need the spike too: a light load's requests beside instants of idle
    # GPUs (a fresh seed's 2 running at 15 % busy read 0 % twice). A queue in the first
    # row is a run of its own, a possible stall.
    twice = _rows([0, 1, 0], [0, 1, 2], [30.0, 0.0, 0.0])
    queued, quiet = _queue_runs(twice)
    assert ((queued.start, queued.stop), (quiet.start, quiet.stop)) == ((1, 2), (2, 3))
    assert _queue_run(twice, quiet, None, "scrape", ()).needs_spike
    first = _queue_run(twice, queued, None, "scrape", ())
    assert (first.kind, first.confirmed, first.needs_spike) == (EventKind.STALL, False, False)


def test_a_spike_confirms_a_one_row_stall_only_if_the_gpus_stayed_idle() -> None:
    # A burst's first scrape beside a stale idle reading, the GPUs busy at the next row
    # (a fresh seed: 1 running and 2 waiting at 17:52, then the burst's own TTFT spike).
    rows = _rows([0, 2, 9, 4], [0, 1, 8, 8], [20.0, 0.0, 99.0, 99.0])
    first = _queue_run(rows, slice(1, 2), None, "scrape", ())
    assert (first.kind, first.confirmed, first.idle_after) == (EventKind.STALL, False, False)
    spike = Piece(EventKind.LATENCY_SPIKE, "", 300.0, 360.0, "slow", reach=300.0)
    (alone,) = _merge([first], touch=15.0)
    _attach([spike], [alone])
    assert alone.severity is Severity.MAJOR
    assert "the GPUs read busy at the next scrape" in _text(alone)
    # Beside the burst's rows it neither names nor dates the event: a queue that the spike
    # followed (critical), not a stall.
    burst = _queue_run(rows, slice(2, 4), None, "scrape", ())
    incidents = _merge([first, burst], touch=60.0)
    _attach([spike], incidents)
    (kept,) = _kept(incidents)
    assert (kept.kind, kept.severity) == (EventKind.QUEUE_BURST, Severity.CRITICAL)
    # The GPUs still idle at the next row: the spike confirms the stall.
    held = _queue_run(
        _rows([0, 2, 0], [0, 9, 0], [20.0, 0.0, 0.0]), slice(1, 2), None, "scrape", ()
    )
    (stall,) = _merge([held], touch=15.0)
    _attach([spike], [stall])
    assert (held.idle_after, stall.severity) == (True, Severity.CRITICAL)


def test_a_spike_confirms_a_one_row_stall_only_if_it_shows_requests_held_half_a_row() -> None:
    # A fresh seed's burst of long prompts between two GPU samples a minute apart: one row
    # of 6 running and 3 waiting beside 0 % on both sides, then a P95 of 5-10 s. The GPU
    # reading beside a 60 s row may lie 30 s from it; a 5 s hold cannot reach it.
    rows = _rows([0, 3, 0], [0, 6, 0], [18.6, 0.0, 0.0])
    held = _queue_run(rows, slice(1, 2), None, "scrape", (), reach_s=30.0)
    assert (held.kind, held.confirmed, held.idle_after) == (EventKind.STALL, False, True)
    assert held.needs_held_s == 30.0
    short = Piece(EventKind.LATENCY_SPIKE, "", 60.0, 120.0, "5-10 s", reach=300.0, held_s=5.0)
    (burst,) = _merge([held], touch=15.0)
    _attach([short], [burst])
    assert burst.severity is Severity.MAJOR
    assert "requests held 5 s at least, not the 30 s the GPU reading" in _text(burst)
    # A hold of 40 s or more (the published PRO stall's 40-80 s P95) spans the reading.
    long = Piece(EventKind.LATENCY_SPIKE, "", 60.0, 120.0, "40-80 s", reach=300.0, held_s=40.0)
    (stall,) = _merge([held], touch=15.0)
    _attach([long], [stall])
    assert (stall.kind, stall.severity) == (EventKind.STALL, Severity.CRITICAL)
    assert "possible" not in _text(stall)
    # Requests seen running, none waiting, need the same hold to be a stall at all.
    quiet = _queue_run(_rows([0, 0, 0], [0, 6, 0], [18.6, 0.0, 0.0]), slice(1, 2), None,
                       "scrape", (), reach_s=30.0)  # fmt: skip
    assert quiet.needs_spike
    incidents = _merge([quiet], touch=15.0)
    _attach([short], incidents)
    assert _kept(incidents) == []
    incidents = _merge([quiet], touch=15.0)
    _attach([long], incidents)
    (kept,) = _kept(incidents)
    assert (kept.kind, kept.severity) == (EventKind.STALL, Severity.CRITICAL)
    # Two rows show the stall alone: no hold is asked of a spike.
    twice = _queue_run(_rows([0, 3, 3], [0, 6, 6], [18.6, 0.0, 0.0]), slice(1, 3), None,
                       "scrape", (), reach_s=30.0)  # fmt: skip
    assert (twice.confirmed, twice.needs_held_s) == (True, 0.0)


def test_a_one_row_stall_asks_a_hold_of_half_the_longer_of_the_app_and_gpu_intervals(
    bundled_runs: list[DeploymentResults],
) -> None:
    pro = bundled_runs[0].of(queueing)  # app and GPU exporters both scraped every 60 s
    assert round(pro.row_seconds) == round(pro.gpu_seconds) == 60

    def reach(q: QueueingResult) -> set[float]:
        pieces = queue_pieces(q, None)
        return {round(p.needs_held_s, 1) for p in pieces if p.kind is EventKind.STALL}

    assert reach(pro) == {30.0}  # the published stall's one row
    # GPU readings four times further apart: the nearest may lie two minutes away.
    assert reach(pro.model_copy(update={"gpu_seconds": 240.0})) == {120.0}


def test_a_spike_in_seconds_carries_the_lower_bound_of_its_peaks_bucket() -> None:
    t = np.arange(0.0, 600.0, 60.0)
    values = np.array([0.25, 0.25, 0.25, 0.25, 7.0, 0.25, 0.25, 0.25, 0.25, 0.25])
    lower, upper = np.where(values > 1, 5.0, 0.1), np.where(values > 1, 10.0, 0.25)
    series = QuantileSeries(quantile=0.95, t=t, values=values, lower=lower, upper=upper, promql="q")
    rolling = RollingQuantiles(
        deployment="A", family="vllm:time_to_first_token_seconds", unit="seconds",
        window=Window.parse(datetime.fromtimestamp(0, UTC), 600.0), every=60.0, length=300.0,
        series=(series,), buckets_promql="b",
    )  # fmt: skip
    (piece,) = spike_pieces(rolling, None)
    assert (piece.start, piece.held_s, piece.reach) == (240.0, 5.0, 300.0)
    other = rolling.model_copy(update={"unit": "tokens"})
    assert spike_pieces(other, None)[0].held_s == 0.0


def test_a_spike_joins_the_queue_before_it_rather_than_an_earlier_spike() -> None:
    earlier = Piece(EventKind.LATENCY_SPIKE, "", 0.0, 60.0, "slow first", reach=300.0)
    queue = Piece(EventKind.QUEUE_BURST, "a", 100.0, 220.0, "up to 15 waiting")
    incidents = _merge([queue], touch=15.0)
    later = Piece(EventKind.LATENCY_SPIKE, "", 240.0, 240.0, "slow after", reach=300.0)
    _attach([earlier, later], incidents)
    burst = next(i for i in incidents if i.kind is EventKind.QUEUE_BURST)
    # The earlier spike (major) began before the queue (minor) and was in the trailing
    # window, but it is a consequence too: the queue is the cause.
    assert burst.after == [later]
    assert burst.severity is Severity.CRITICAL


def _rows(waiting: list[float], running: list[float], util: list[float]) -> QueueRows:
    t = np.arange(len(waiting), dtype=np.float64) * 60.0
    return QueueRows(
        replica="a",
        begin=t - 60.0,
        t=t,
        waiting=np.array(waiting),
        running=np.array(running),
        gpu_util=np.array(util),
        classes=(QueueClass.IDLE,) * len(waiting),
    )


def test_a_queue_that_mostly_read_busy_gpus_is_a_burst_and_its_idle_edge_no_stall() -> None:
    # Four rows with a queue; the first GPU reading is 3% (a sample taken before the burst
    # arrived), the other three 99-100%: a queue on busy GPUs.
    edge = _rows([11, 9, 6, 2], [7, 8, 8, 8], [3.0, 99.0, 100.0, 99.0])
    piece = _queue_run(edge, slice(0, 4), None, "scrape", ())
    assert piece.kind is EventKind.QUEUE_BURST
    # Two of four rows held on idle GPUs: half the readings, a stall seen twice.
    held = _rows([11, 9, 6, 2], [7, 8, 8, 8], [0.0, 1.0, 100.0, 99.0])
    piece = _queue_run(held, slice(0, 4), None, "scrape", ())
    assert (piece.kind, piece.confirmed) == (EventKind.STALL, True)
    # One row held, alone in its run: a stall, which needs a spike after it to be confirmed.
    once = _queue_run(_rows([4], [11], [0.0]), slice(0, 1), None, "scrape", ())
    assert (once.kind, once.confirmed) == (EventKind.STALL, False)
