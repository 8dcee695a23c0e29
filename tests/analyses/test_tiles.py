"""Reading app scrapes in tiles: widths, rows, queueing, boundaries and sampled shares.

The expected rows and classes come from the plan in :mod:`tests.analyses.tiles_data`
(worked out by hand there) or from the raw samples in numpy, never from the
code under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.boundaries.evidence import gather
from inference_obs.analyses.boundaries.stages import boundaries
from inference_obs.analyses.queueing import queueing
from inference_obs.analyses.run import run_one
from inference_obs.analyses.throughput import throughput
from inference_obs.analyses.validity.profile import NEEDED, profile
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import dcgm, vllm
from inference_obs.query import to_promql
from inference_obs.reading.context import Reading
from inference_obs.reading.resolution import (
    positive_share,
    series_count,
    step_for,
    tile_ms,
    tile_step,
    tile_window,
)
from inference_obs.reading.rows import align_gpu, app_rows
from inference_obs.samples import Series, Window
from inference_obs.source.dataset.manifest import Generator, Manifest, ManifestWindow
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

from .tiles_data import (
    DEPLOYMENT,
    STEP,
    T0_CLASSES,
    T0_MEANS,
    T0_RUNNING,
    T0_WAITING,
    tiles_dataset,
    tiles_window,
)

WINDOW = tiles_window()
TILE_ENDS_MS = [round((WINDOW.start_s + STEP * (k + 1)) * 1000) for k in range(10)]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> DatasetSource:
    return DatasetSource(tiles_dataset(Path(tmp_path_factory.mktemp("tiles"))))


# --- widths -------------------------------------------------------------------------------


def test_tile_width_must_cut_the_window_into_equal_tiles() -> None:
    hour = Window.parse("2026-03-02T12:00+00:00", "1h")
    assert tile_ms(hour, 45) == 45_000
    assert tile_ms(hour, 0.25) == 250
    # 3,600,000 ms = 2^7 x 3^2 x 5^5 ms cut into n equal tiles: 7 s would be 514.3 tiles; the
    # nearest whole counts that divide are 576 (6.25 s) and 500 (7.2 s).
    with pytest.raises(ValueError, match=r"7 s does not cut the 3600 s window.*6\.25 s or 7\.2 s"):
        tile_ms(hour, 7)
    for bad, why in (
        (0, "positive whole number of milliseconds"),
        (0.0005, "positive whole number of milliseconds"),
        (-60, "positive whole number of milliseconds"),
        (float("nan"), "number of seconds"),
        (True, "number of seconds"),
        (7200, "longer than the 3600 s window"),
    ):
        with pytest.raises(ValueError, match=why):
            tile_ms(hour, bad)


def test_tiles_end_at_multiples_of_their_width_since_the_epoch() -> None:
    # 12:00:00 UTC on 2026-03-02 is a multiple of 60 s and of 45 s since the epoch
    # (a day, 86,400 s, is 1,920 tiles of 45 s): the hour's tiles are those it holds.
    hour = Window.parse("2026-03-02T12:00+00:00", "1h")
    assert tile_window(hour, 60) == Window.parse("2026-03-02T12:01+00:00", "59m")
    # 30 s later the tiles do not move with the window: the first whole one ends at
    # 12:02:00 and the last at 13:00:00, 59 tiles (12:00:30-12:01:00 and 13:00:00-13:00:30
    # are in none), not 60 tiles ending at 12:01:30, ..., 13:00:30.
    later = Window.parse("2026-03-02T12:00:30+00:00", "1h")
    assert tile_window(later, 60) == Window.parse("2026-03-02T12:02+00:00", "58m")
    # 12:00:10 is 43,210 s into the day: the first multiple of 45 s at or after it is
    # 43,245 s (961 x 45) = 12:00:45, so the first whole tile ends at 12:01:30; the last
    # multiple at or before 13:00:10 (46,810 s) is 46,800 s (1,040 x 45) = 13:00:00.
    odd = Window.parse("2026-03-02T12:00:10+00:00", "1h")
    assert tile_window(odd, 45) == Window(
        datetime(2026, 3, 2, 12, 1, 30, tzinfo=UTC), datetime(2026, 3, 2, 13, 0, tzinfo=UTC)
    )
    # One whole tile: a window of one step.
    one = tile_window(Window.parse("2026-03-02T12:00:30+00:00", "2m"), 60)
    assert (one.start, one.end - one.start) == (
        datetime(2026, 3, 2, 12, 2, tzinfo=UTC),
        timedelta(milliseconds=1),
    )
    with pytest.raises(ValueError, match="no tile of 60 s ending at a multiple of 60 s"):
        tile_window(Window.parse("2026-03-02T12:00:30+00:00", "1m"), 60)


def test_series_count_counts_series_with_a_sample_in_the_window(source: DatasetSource) -> None:
    waiting = vllm.NUM_REQUESTS_WAITING.select(DEPLOYMENT.matchers)
    assert series_count(source, waiting, WINDOW) == 2  # one engine per replica
    assert series_count(source, dcgm.GPU_UTIL.select(DEPLOYMENT.gpu_matchers), WINDOW) == 4
    assert series_count(source, dcgm.PROF_PCIE_TX_BYTES.select(()), WINDOW) == 0


def test_tile_step_reads_per_scrape_while_it_fits(source: DatasetSource) -> None:
    # 2 app series x 40 scrapes = 80 rows.
    assert tile_step(source, DEPLOYMENT, WINDOW) is None
    assert tile_step(source, DEPLOYMENT, WINDOW, rows=80) is None


def test_tile_step_picks_the_narrowest_whole_width_that_fits(source: DatasetSource) -> None:
    # 80 rows > 40: at most 20 tiles per series; 600 s / 20 = 30 s, two scrapes of 15 s.
    assert tile_step(source, DEPLOYMENT, WINDOW, rows=40) == 30.0
    # At most 7 tiles per series: 600 s / 7 is not whole; 6 tiles of 100 s divide the
    # window, but 100 s is not a whole number of 15 s scrapes; 5 tiles of 120 s are, and 5
    # is at least half of 6, so 120 s.
    assert tile_step(source, DEPLOYMENT, WINDOW, rows=14) == 120.0
    # One tile per series at most: 600 s, forty scrapes.
    assert tile_step(source, DEPLOYMENT, WINDOW, rows=2) == 600.0
    # Under one tile per series: still the whole window, the fewest rows there can be.
    assert tile_step(source, DEPLOYMENT, WINDOW, rows=1) == 600.0
    # A window of less than two scrapes holds no tile of two: per scrape.
    short = Window.parse(WINDOW.start, 10.0)  # one scrape of each series
    assert tile_step(source, DEPLOYMENT, short, rows=1) is None
    with pytest.raises(ValueError, match="rows must be a whole number >= 1"):
        tile_step(source, DEPLOYMENT, WINDOW, rows=0)


def test_tile_step_without_app_series_reads_per_scrape(source: DatasetSource) -> None:
    nobody = DEPLOYMENT.model_copy(update={"selector": {"pod": "nobody"}})
    assert tile_step(source, nobody, WINDOW, rows=1) is None


def test_step_for_resolves_each_form(source: DatasetSource) -> None:
    assert step_for(source, DEPLOYMENT, WINDOW, "scrape") is None
    assert step_for(source, DEPLOYMENT, WINDOW, "auto") is None
    assert step_for(source, DEPLOYMENT, WINDOW, 60) == 60.0
    with pytest.raises(ValueError, match="does not cut"):
        step_for(source, DEPLOYMENT, WINDOW, 70)
    with pytest.raises(ValueError, match="'auto', 'scrape' or seconds"):
        step_for(source, DEPLOYMENT, WINDOW, "fine")  # type: ignore[arg-type]


# --- rows ---------------------------------------------------------------------------------


def test_tile_rows_hold_each_tiles_largest_gauge_samples(source: DatasetSource) -> None:
    gpu_labels = source.series(dcgm.GPU_UTIL.select(DEPLOYMENT.gpu_matchers), WINDOW)
    rows = app_rows(source, DEPLOYMENT, WINDOW, gpu_labels, STEP)
    assert rows.keys == ("namespace", "pod")
    assert rows.tile_ms == 60_000
    assert rows.times["ns/t-0"].tolist() == TILE_ENDS_MS
    assert (rows.starts("ns/t-0") == np.array(TILE_ENDS_MS) - 60_000).all()
    assert rows.waiting["ns/t-0"].tolist() == T0_WAITING
    assert rows.running["ns/t-0"].tolist() == T0_RUNNING
    assert rows.running["ns/t-1"].tolist() == [5.0] * 10
    assert rows.names["ns/t-1"] == {"namespace": "ns", "pod": "t-1"}
    assert rows.found


def test_tile_gpu_means_are_sample_weighted(source: DatasetSource) -> None:
    selector = dcgm.GPU_UTIL.select(DEPLOYMENT.gpu_matchers)
    rows = app_rows(source, DEPLOYMENT, WINDOW, source.series(selector, WINDOW), STEP)
    gpu = align_gpu(source, rows, selector, WINDOW)
    got = gpu.means["ns/t-0"]
    want = np.array([np.nan if m is None else m for m in T0_MEANS])
    np.testing.assert_allclose(got, want, rtol=1e-12)  # NaN where no GPU sample (tile 7)
    assert gpu.tolerance_ms == 0.0
    assert "sum_over_time" in to_promql(gpu.query)
    assert "count_over_time" in to_promql(gpu.query)


def test_the_same_raw_samples_give_the_tiles_by_hand(source: DatasetSource) -> None:
    # Independently of the plan: each tile's max of raw waiting samples, from the raw read.
    raw = source.raw(vllm.NUM_REQUESTS_WAITING.select(DEPLOYMENT.matchers), WINDOW)
    one = next(s for s in raw if s.labels["pod"] == "t-0")
    tile = ((one.t_ms - round(WINDOW.start_s * 1000)) // 60_000).astype(int)
    by_hand = [float(one.values[tile == k].max()) for k in range(10)]
    rows = app_rows(source, DEPLOYMENT, WINDOW, (), STEP)
    assert rows.waiting["all"].tolist() == [a + 0.0 for a in by_hand]  # t-1 never waits


def test_tolerance_and_step_are_one_or_the_other(source: DatasetSource) -> None:
    for analysis in (queueing, boundaries):
        with pytest.raises(
            ConfigurationError, match=rf"{analysis.name}\.tolerance_s=15 .*give one or the other"
        ):
            analysis(source, DEPLOYMENT, WINDOW, step=STEP, tolerance_s=15)


# --- analyses per tile --------------------------------------------------------------------


def test_queueing_classifies_tiles(source: DatasetSource) -> None:
    result = queueing(source, DEPLOYMENT, WINDOW, step=STEP)
    assert result.step_seconds == STEP
    t0 = [i for i in result.intervals if i.replica == "ns/t-0"]
    runs = [c for k, c in enumerate(T0_CLASSES) if k == 0 or c != T0_CLASSES[k - 1]]
    assert [i.classification.value for i in t0] == runs
    assert [i.samples for i in t0] == [1, 1, 1, 1, 1, 1, 1, 1, 2]
    assert t0[2].start.timestamp() == WINDOW.start_s + 120  # a tile's start, not a scrape's
    assert t0[2].end.timestamp() == WINDOW.start_s + 180
    assert (t0[2].max_waiting, t0[2].max_running, t0[2].mean_gpu_util) == (3.0, 4.0, 95.0)
    (t1,) = [i for i in result.intervals if i.replica == "ns/t-1"]
    assert (t1.classification.value, t1.samples) == ("busy", 10)
    # 20 tiles: t-0's ten of the table, t-1's ten busy.
    counts = {c: T0_CLASSES.count(c) + 10 * (c == "busy") for c in set(T0_CLASSES) | {"busy"}}
    for cls, share in result.class_share.items():
        assert share.value == pytest.approx(counts.get(cls, 0) / 20), cls
    assert result.gpu_alignment.value == 19.0  # every tile but t-0's seventh
    assert result.gpu_alignment.unit == "tiles"
    assert result.peak_waiting.value == 3.0
    assert result.peak_time is not None
    assert result.peak_time.timestamp() == WINDOW.start_s + 180
    promql = result.class_share["busy"].provenance.promql
    assert any("max_over_time(vllm:num_requests_waiting" in q for q in promql), promql


def test_queueing_per_scrape_still_classifies_scrapes(source: DatasetSource) -> None:
    result = queueing(source, DEPLOYMENT, WINDOW)
    assert result.step_seconds is None
    t0 = [i for i in result.intervals if i.replica == "ns/t-0"]
    # Tile 2's queue is one scrape (its second), so per scrape the capacity interval is one
    # sample long and starts at that scrape, 18 s into the tile.
    (capacity,) = [i for i in t0 if i.classification.value == "capacity"]
    assert (capacity.samples, capacity.start.timestamp()) == (1, WINDOW.start_s + 120 + 18)


def test_boundaries_read_evidence_only_where_it_can_matter(source: DatasetSource) -> None:
    reading = Reading(source, DEPLOYMENT, WINDOW, "boundaries", step=STEP)
    evidence = gather(reading, dcgm.GPU_UTIL, 0.01, tolerance_ms=None, idle_below=0.5)
    track = evidence.tracks["ns/t-0"]
    assert track.tile_ms == 60_000
    # PCIe is asked only for tiles with work while the GPUs computed under half the time:
    # tiles 5 and 6 (1000 x their mean utilisation); NaN elsewhere, and for t-1 throughout.
    want = np.full(10, np.nan)
    want[5], want[6] = 15_000.0, 0.0
    np.testing.assert_array_equal(track.pcie_rx, want)
    assert np.isnan(evidence.tracks["ns/t-1"].pcie_rx).all()
    assert not evidence.read_raw
    assert any(" and on(namespace, pod) " in to_promql(q) for q in evidence.queries)
    assert dcgm.PROF_PCIE_TX_BYTES.name in evidence.missing
    assert dcgm.PROF_PCIE_RX_BYTES.name not in evidence.missing
    # Families without series are named missing and not asked for at all.
    asked = " ".join(to_promql(q) for q in evidence.queries)
    assert dcgm.PROF_PCIE_RX_BYTES.name in asked
    assert dcgm.PROF_PCIE_TX_BYTES.name not in asked
    assert "container_cpu" not in asked
    assert "process_cpu_seconds_total" not in asked
    result = boundaries(source, DEPLOYMENT, WINDOW, step=STEP)
    assert result.step_seconds == STEP
    (interval,) = result.intervals
    assert (interval.replica, interval.samples, interval.cause.value) == (
        "ns/t-0",
        2,
        "unexplained",
    )
    assert interval.start.timestamp() == WINDOW.start_s + 300
    assert interval.end.timestamp() == WINDOW.start_s + 420
    assert interval.pcie_rx_bytes_per_second == 7_500.0  # median of 15,000 and 0


def test_a_share_of_scrapes_combines_a_targets_engines(tmp_path: Path) -> None:
    """Two engines of one target queued at scrapes 1 and 5 and at 1 and 9: three of its
    40 scrapes had a request waiting, not four of 80 engine samples; a second target never
    queued. By tile (four scrapes each): tiles 0, 1 and 2 of the first target's ten."""
    start = WINDOW.start_s + 3.0
    times = start + 15.0 * np.arange(40)
    series = []
    for pod, engine, queued in (("t-a", "0", (1, 5)), ("t-a", "1", (1, 9)), ("t-b", "0", ())):
        waiting = np.zeros(40)
        waiting[list(queued)] = 2.0
        labels = {"namespace": "ns", "pod": pod, "model_name": "m", "engine": engine}
        series.append(Series(vllm.NUM_REQUESTS_WAITING.name, labels, times, waiting))
    manifest = Manifest(
        title="engines",
        synthetic=True,
        generator=Generator(scenario="engines", seed=0, version="0"),
        window=ManifestWindow(start=WINDOW.start, end=WINDOW.end),
        scrape_interval_seconds=15.0,
        deployments=(DEPLOYMENT,),
    )
    engines = DatasetSource(write_dataset(tmp_path / "engines", manifest, series))
    selector = vllm.NUM_REQUESTS_WAITING.select(DEPLOYMENT.matchers)
    assert positive_share(engines, selector, WINDOW, None)[0] == 3 / 80
    assert positive_share(engines, selector, WINDOW, STEP)[0] == 3 / 20


def test_sampled_shares_per_tile_count_series_tiles(source: DatasetSource) -> None:
    waiting = vllm.NUM_REQUESTS_WAITING.select(DEPLOYMENT.matchers)
    # Per scrape: 2 of t-0's 40 samples, none of t-1's 40.
    assert positive_share(source, waiting, WINDOW, None)[0] == 2 / 80
    # Per tile: t-0's tiles 2 and 5 of 20 series-tiles.
    assert positive_share(source, waiting, WINDOW, STEP)[0] == 2 / 20
    running = vllm.NUM_REQUESTS_RUNNING.select(DEPLOYMENT.matchers)
    # t-0's tiles 1, 2, 5 and 6, and all ten of t-1's.
    assert positive_share(source, running, WINDOW, STEP)[0] == 14 / 20
    share = throughput(source, DEPLOYMENT, WINDOW, step=STEP).waiting_sample_share
    assert share.value == 2 / 20
    assert "60 s tile" in share.caveats[0]
    ran = run_one(source, DEPLOYMENT, WINDOW, step=STEP, analyses=NEEDED)
    assert profile(source, ran).active_share.value == 14 / 20
    nobody = DEPLOYMENT.model_copy(update={"selector": {"pod": "nobody"}})
    missing = throughput(source, nobody, WINDOW, step=STEP).waiting_sample_share
    assert missing.value is None
    assert missing.status.value == "no_data"
