"""``dataset load`` writes the bundled dataset into real stores, and they then answer as it does.

The PRO 5000 vs H20 dataset is loaded with the command line into a
VictoriaMetrics 1.79 of this module's own (import API) and into an empty
Prometheus 2.42 with the remote-write receiver (remote write). Then:

- each store holds every sample of ``samples.om``, read back through the
  library's read-only source: Prometheus bit for bit, VictoriaMetrics with
  its ~12 significant digits (1e-9 relative, as test_source_agreement);
- the analyses through Prometheus agree with the offline ones, measurement by
  key (status, value to 1e-9 relative, bounds), as test_analyses_agreement
  requires of a promtool backfill; through VictoriaMetrics, the raw samples
  and every analysis measurement outside the two documented VictoriaMetrics
  classes (``histogram_quantile``, ``increase`` of a counter first seen in the
  window: test_source_agreement) agree under ``Rules.VICTORIAMETRICS``;
- a second load without ``--existing write`` is refused before it writes,
  naming the store without its credentials, and the store holds what it
  held; with ``--existing write`` Prometheus refuses what it holds (counted
  as already held) and VictoriaMetrics keeps a second copy (its documented
  behaviour without ``-dedup.minScrapeInterval``);
- batches never exceed ``--batch-samples``, and a file of several blocks is
  loaded holding a few blocks' worth of memory, not the file.
"""

from __future__ import annotations

import json
import math
import re
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.cache import cache
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import latency
from inference_obs.analyses.shapes import shapes
from inference_obs.analyses.throughput import throughput
from inference_obs.cli import main
from inference_obs.deployment import Deployment
from inference_obs.engine.rules import Rules
from inference_obs.load import Progress, WireProtocol, WriteClient, load_dataset
from inference_obs.load.client import parse_write_url
from inference_obs.query import Matcher, Selector
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Labels, SampleSet, Series, Window
from inference_obs.source.base import Source
from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset
from inference_obs.source.openmetrics.reader import BLOCK_BYTES
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import (
    PrometheusFactory,
    PrometheusServer,
    VictoriaMetricsServer,
    require_binary,
)

pytestmark = pytest.mark.integration

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
RELATIVE = 1e-9  # as test_analyses_agreement and test_source_agreement
BATCH = 4000  # 32,820 samples: nine requests or more, none above this
Analysis = Callable[[Source, Deployment, Window], AnalysisResult]
ANALYSES: dict[str, Analysis] = {
    "latency": latency,
    "shapes": shapes,
    "cache": cache,
    "throughput": throughput,
    "gpu": gpu,
}
# VictoriaMetrics-only differences documented in test_source_agreement.
VM_DIFFERS = re.compile(r"histogram_quantile|increase\(")


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    return read_dataset(DATASET)


@pytest.fixture(scope="module")
def vm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetricsServer]:
    # Its own server: the session's is shared, and this test loads a whole dataset twice.
    binary = require_binary("victoria-metrics")
    with VictoriaMetricsServer(tmp_path_factory.mktemp("vm-load"), binary=binary) as server:
        yield server


@pytest.fixture(scope="module")
def prom_server(prometheus_factory: PrometheusFactory) -> Iterator[PrometheusServer]:
    server = prometheus_factory()  # empty, remote-write receiver on, scraping nothing
    yield server
    server.stop()


def _with_credentials(base_url: str) -> str:
    # Neither server checks credentials; they must still never be printed.
    return base_url.replace("http://", "http://ann:s3cret@")


def _load(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["dataset", "load", str(DATASET), *args])
    out, err = capsys.readouterr()
    return status, out, err


def _window(samples: SampleSet) -> Window:
    """From the first sample to the last (the window of every sample)."""
    first, last = int(samples.t_ms.min()), int(samples.t_ms.max())
    return Window(
        datetime.fromtimestamp(first / 1000, UTC), datetime.fromtimestamp(last / 1000, UTC)
    )


def _stored(source: PrometheusSource, dataset: Dataset) -> dict[tuple[str, Labels], Series]:
    everything = Selector(None, (Matcher.regex("__name__", ".+"),))
    held = source.raw(everything, _window(dataset.samples))
    return {(s.name, s.labels): s for s in held}


def _wait_until_searchable(server: VictoriaMetricsServer, dataset: Dataset) -> None:
    # VictoriaMetrics indexes imported series asynchronously: wait, bounded.
    deadline = time.monotonic() + 20
    wanted = int(dataset.samples.offsets[-1])
    source = PrometheusSource(server.base_url)
    while True:
        server.flush()
        held = sum(s.values.size for s in _stored(source, dataset).values())
        if held >= wanted:
            return
        assert time.monotonic() < deadline, f"VictoriaMetrics holds {held} of {wanted} samples"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def vm_loaded(vm_server: VictoriaMetricsServer, dataset: Dataset) -> VictoriaMetricsServer:
    status = main(
        [
            "dataset", "load", str(DATASET), "--into", _with_credentials(vm_server.base_url),
            "--batch-samples", str(BATCH),
        ]
    )  # fmt: skip
    assert status == 0
    _wait_until_searchable(vm_server, dataset)
    return vm_server


@pytest.fixture(scope="module")
def prom_loaded(prom_server: PrometheusServer) -> PrometheusServer:
    into = _with_credentials(prom_server.base_url) + "/api/v1/write"
    assert (
        main(["dataset", "load", str(DATASET), "--into", into, "--batch-samples", str(BATCH)]) == 0
    )
    return prom_server


def _assert_holds_every_sample(stored: dict[tuple[str, Labels], Series], dataset: Dataset) -> None:
    samples = dataset.samples
    assert len(stored) == len(samples.names) == 547  # 547: distinct series lines of samples.om
    for i, key in enumerate(zip(samples.names, samples.labels, strict=True)):
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        held = stored[key]
        assert np.array_equal(held.t_ms, samples.t_ms[lo:hi]), key
        assert np.allclose(held.values, samples.values[lo:hi], rtol=RELATIVE, atol=0), key


def test_victoria_metrics_holds_every_sample(
    vm_loaded: VictoriaMetricsServer, dataset: Dataset
) -> None:
    server = vm_loaded
    _assert_holds_every_sample(_stored(PrometheusSource(server.base_url), dataset), dataset)


def test_prometheus_holds_every_sample_bit_for_bit(
    prom_loaded: PrometheusServer, dataset: Dataset
) -> None:
    stored = _stored(PrometheusSource(prom_loaded.base_url), dataset)
    _assert_holds_every_sample(stored, dataset)
    samples = dataset.samples
    held = np.concatenate(
        [stored[k].values for k in zip(samples.names, samples.labels, strict=True)]
    )
    assert held.tobytes() == samples.values.tobytes()  # every bit of every value


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=RELATIVE)


def _by_key(result: AnalysisResult) -> dict[str, Measurement]:
    return {m.key: m for m in result.measurements()}


def _disagreements(
    offline: AnalysisResult, live: AnalysisResult, skip: re.Pattern[str] | None = None
) -> tuple[list[str], int]:
    a, b = _by_key(offline), _by_key(live)
    wrong = [f"{k}: only {'offline' if k in a else 'live'}" for k in sorted(a.keys() ^ b.keys())]
    compared = 0
    for key in sorted(a.keys() & b.keys()):
        x, y = a[key], b[key]
        if skip is not None and any(skip.search(q) for q in x.provenance.promql):
            continue
        compared += 1
        if x.status != y.status or not _close(x.value, y.value):
            wrong.append(f"{key}: offline {x.status} {x.value!r}, live {y.status} {y.value!r}")
        elif (x.bounds is None) != (y.bounds is None) or (
            x.bounds is not None
            and y.bounds is not None
            and not (
                _close(x.bounds.lower, y.bounds.lower) and _close(x.bounds.upper, y.bounds.upper)
            )
        ):
            wrong.append(f"{key}: bounds offline {x.bounds}, live {y.bounds}")
    return wrong, compared


def _agreement(
    dataset: Dataset,
    live: PrometheusSource,
    rules: Rules,
    skip: re.Pattern[str] | None,
    analyses: tuple[str, ...] = tuple(ANALYSES),
) -> tuple[list[str], int, int]:
    offline = DatasetSource(dataset, rules=rules)
    window = dataset.manifest.window.window()
    wrong: list[str] = []
    compared = answered = 0
    for deployment in dataset.manifest.deployments:
        for name in analyses:
            analysis = ANALYSES[name]
            here = analysis(offline, deployment, window)
            there = analysis(live, deployment, window)
            lines, n = _disagreements(here, there, skip)
            wrong += [f"{deployment.name} {name}: {line}" for line in lines]
            compared += n
            answered += sum(m.ok for m in here.measurements())
    return wrong, compared, answered


def test_analyses_through_prometheus_agree_with_offline(
    prom_loaded: PrometheusServer, dataset: Dataset
) -> None:
    live = PrometheusSource(prom_loaded.base_url)
    wrong, compared, answered = _agreement(dataset, live, Rules.PROMETHEUS_2, None)
    assert not wrong, f"{len(wrong)} of {compared} disagree:\n" + "\n".join(wrong)
    assert answered > compared / 2, f"only {answered} of {compared} have a value"


def test_analyses_through_victoria_metrics_agree_with_offline_under_its_rules(
    vm_loaded: VictoriaMetricsServer, dataset: Dataset
) -> None:
    live = PrometheusSource(vm_loaded.base_url)
    assert live.info().rules is Rules.VICTORIAMETRICS
    # latency and shapes are histogram quantiles, which the offline engine refuses under
    # VictoriaMetrics rules (NotSupportedOffline): the documented class 1.
    kept = ("cache", "throughput", "gpu")
    wrong, compared, _ = _agreement(dataset, live, Rules.VICTORIAMETRICS, VM_DIFFERS, kept)
    assert not wrong, f"{len(wrong)} of {compared} disagree:\n" + "\n".join(wrong)
    assert compared > 20, f"only {compared} measurements outside the documented classes"


def _count(server: VictoriaMetricsServer | PrometheusServer, dataset: Dataset) -> int:
    if isinstance(server, VictoriaMetricsServer):
        server.flush()
    stored = _stored(PrometheusSource(server.base_url), dataset)
    return sum(s.values.size for s in stored.values())


@pytest.mark.parametrize("store", ["vm", "prometheus"])
def test_a_second_load_is_refused_before_it_writes(
    store: str,
    vm_loaded: VictoriaMetricsServer,
    prom_loaded: PrometheusServer,
    dataset: Dataset,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = vm_loaded if store == "vm" else prom_loaded
    before = _count(server, dataset)
    assert before == int(dataset.samples.offsets[-1])
    status, out, err = _load(capsys, "--into", _with_credentials(server.base_url))
    assert status != 0
    assert "already holds DCGM_FI_DEV_FB_USED{" in err
    assert server.base_url in err
    assert "s3cret" not in err + out
    assert "ann:" not in err + out
    assert "--existing write" in err
    assert "sent" not in out  # refused before the first request
    time.sleep(0.5)
    assert _count(server, dataset) == before


def test_existing_write_to_prometheus_counts_what_it_holds(
    prom_loaded: PrometheusServer, dataset: Dataset, capsys: pytest.CaptureFixture[str]
) -> None:
    """Prometheus refuses a request of samples it holds whole; the load goes on, nothing doubles."""
    total = int(dataset.samples.offsets[-1])
    into = prom_loaded.base_url + "/api/v1/write"
    status, out, _ = _load(capsys, "--into", into, "--existing", "write", "--batch-samples", "4000")
    assert status == 0
    # Requests: each 30-minute slab of time (t // 1,800,000 ms) in pieces of 4,000.
    slabs = np.unique(dataset.samples.t_ms // 1_800_000, return_counts=True)[1]
    requests = sum(math.ceil(n / 4000) for n in slabs.tolist())
    assert f"0 samples of 0 series in {requests} requests, {total:,} already held" in out
    assert _count(prom_loaded, dataset) == total


def test_progress_and_batches_are_bounded(
    prometheus_factory: PrometheusFactory, dataset: Dataset
) -> None:
    server = prometheus_factory()
    seen: list[Progress] = []
    try:
        target = parse_write_url(server.base_url)
        client = WriteClient(target.endpoint, WireProtocol.REMOTE_WRITE)
        done = load_dataset(DATASET, client, batch_samples=1000, progress=seen.append)
        client.close()
    finally:
        server.stop()
    total = int(dataset.samples.offsets[-1])
    # Three 30-minute slabs of time, each sent in requests of at most 1,000 samples.
    assert done.largest_batch <= 1000
    assert done.requests >= math.ceil(total / 1000)
    sent = [p for p in seen if p.stage == "sending"]
    assert [p.samples for p in sent] == sorted(p.samples for p in sent)
    assert sent[-1].samples == done.samples == total
    assert sent[-1].fraction == 1.0
    assert sent[-1].series == done.series == 547


def _large_dataset(path: Path, n_series: int) -> Path:
    """``n_series`` series of 4,000 samples with long label sets (~170 KiB of text each)."""
    # Two days before the bundled dataset: apart from it in the same VictoriaMetrics.
    start = 1_792_230_400.0  # 2026-10-17T09:40:00Z
    steps = start + 15.0 * np.arange(4000)
    rng = np.random.default_rng(3)
    padding = "x" * 120  # makes each line ~180 bytes, as a DCGM line is
    series = [
        Series(
            "load_gauge",
            {"pod": f"p{i:03d}", "pad": padding, "n": str(n_series)},
            steps,
            rng.normal(size=steps.size),
        )
        for i in range(n_series)
    ]
    manifest = Manifest.model_validate(
        {
            "title": "Load memory check",
            "synthetic": True,
            "window": {"start": "2026-10-17T09:40:00Z", "end": "2026-10-18T02:20:00Z"},
            "scrape_interval_seconds": 15,
            "deployments": [
                {
                    "name": "T",
                    "selector": {"pod": "~p.*"},
                    "hardware": {"gpu_model": "NVIDIA H20", "gpus_per_replica": 1},
                    "engine": {"name": "vllm"},
                }
            ],
            "generator": {"scenario": "load-test", "seed": 3, "version": "0.1.0"},
        }
    )
    write_dataset(path, manifest, series)
    return path


def _peak_while_loading(path: Path, server: VictoriaMetricsServer) -> tuple[int, int]:
    """Samples sent and the peak of Python and numpy allocations (bytes) while loading."""
    client = WriteClient(parse_write_url(server.base_url).endpoint, WireProtocol.VM_IMPORT)
    tracemalloc.start()
    try:
        done = load_dataset(path, client, batch_samples=20_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        client.close()
    assert done.largest_batch <= 20_000
    return done.samples, peak


def test_memory_held_while_loading_does_not_grow_with_the_file(
    tmp_path: Path, vm_server: VictoriaMetricsServer
) -> None:
    small, large = _large_dataset(tmp_path / "s", 40), _large_dataset(tmp_path / "l", 120)
    sizes = [(p / "samples.om").stat().st_size for p in (small, large)]
    assert sizes[0] > 3 * BLOCK_BYTES  # read in several blocks even when small
    sent_small, peak_small = _peak_while_loading(small, vm_server)
    sent_large, peak_large = _peak_while_loading(large, vm_server)
    assert (sent_small, sent_large) == (40 * 4000, 120 * 4000)
    # The reader's working set is a few blocks (the block read, its parse buffer
    # and scan temporaries, the text carried over) plus one batch; the series'
    # labels (a few hundred bytes each) are all that grows with the file.
    shown = f"peaks {peak_small / 2**20:.1f} and {peak_large / 2**20:.1f} MiB"
    assert peak_large < 1.2 * peak_small, shown
    assert peak_large < 4 * BLOCK_BYTES < sizes[1] / 2, shown


def _report_measurements(out: Path, *args: str) -> dict[str, dict[str, object]]:
    assert main(["report", "--format", "json", "--quiet", "--out", str(out), *args]) == 0
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return {m["key"]: m for m in report["measurements"]}


def test_live_report_on_the_loaded_prometheus_agrees_with_the_offline_report(
    prom_loaded: PrometheusServer, dataset: Dataset, tmp_path: Path
) -> None:
    """The route the README gives: load, then ``report --prometheus``; the numbers are the same."""
    window = dataset.manifest.window.window()
    offline = _report_measurements(tmp_path / "offline", "--dataset", str(DATASET))
    live = _report_measurements(
        tmp_path / "live",
        "--prometheus", prom_loaded.base_url,
        "--deployments", str(DATASET / "manifest.json"),
        "--end", window.end.isoformat(), "--window", "1h",
    )  # fmt: skip
    assert offline.keys() == live.keys()
    wrong = []
    for key, here in offline.items():
        there = live[key]
        value, other = here["value"], there["value"]
        assert value is None or isinstance(value, float | int)
        assert other is None or isinstance(other, float | int)
        if here["status"] != there["status"] or not _close(value, other):
            wrong.append(
                f"{key}: offline {here['status']} {value!r}, live {there['status']} {other!r}"
            )
    assert not wrong, f"{len(wrong)} of {len(offline)} differ:\n" + "\n".join(wrong)
    assert sum(m["status"] == "ok" for m in offline.values()) > len(offline) / 2


def test_remote_write_of_many_hours_keeps_every_sample(
    tmp_path: Path, prometheus_factory: PrometheusFactory
) -> None:
    """16.7 hours, far past the hour a Prometheus head accepts behind its newest sample.

    Sent in file order, every series after the first would be refused "out of
    bounds" back to an hour before the first one's end; sent in time order,
    half an hour at a time, every sample is stored.
    """
    path = _large_dataset(tmp_path / "long", 40)
    server = prometheus_factory()
    try:
        client = WriteClient(parse_write_url(server.base_url).endpoint, WireProtocol.REMOTE_WRITE)
        done = load_dataset(path, client, batch_samples=5000)
        client.close()
        start = 1_792_230_400.0  # _large_dataset's first sample; 15 s apart, 4,000 each
        window = Window(
            datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(start + 15 * 3999, UTC)
        )
        held = PrometheusSource(server.base_url).raw(
            Selector(None, (Matcher.equal("__name__", "load_gauge"),)), window
        )
    finally:
        server.stop()
    assert done.samples == 40 * 4000
    assert len(held.names) == 40
    assert int(held.offsets[-1]) == 40 * 4000
    # 4,000 x 15 s spans 34 half hours from 09:30 (09:40 lies in the 09:30 slab).
    assert done.requests >= 34
