"""A written dataset's samples.om backfills into Prometheus 2.42 exactly as it reads back.

The dataset mixes a counter spanning several of promtool's 2 h blocks, gauges
with NaN, +-Inf, -0.0 and the smallest subnormal, timestamps on odd
milliseconds (written as the millisecond's midpoint for promtool's
truncation), and label values with quotes, backslashes, newlines, braces,
spaces, control characters and non-ASCII text. promtool backfills ``samples.om`` as it
lies on disk; then, for every metric name, the raw range selector
``{__name__="x"}[window]`` evaluated at the window's end must return exactly
the dataset's series: the same label sets, timestamps and values, bit for bit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import numpy as np
import pytest

from inference_obs.query import Matcher, Selector, to_promql
from inference_obs.samples import Series
from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.writer import write_dataset
from tests.integration.servers import PrometheusFactory, PrometheusServer

pytestmark = pytest.mark.integration

START = 1_792_403_200.0  # 2026-10-19T09:40:00Z
HOURS = 5  # longer than promtool's 2 h blocks, so the series spans several
AWKWARD = [
    'q"uote',
    "back\\slash",
    "new\nline",
    "}{,=",
    "é中😀",
    '\\"\\n',
    " spaced  out ",
    "tab\tcr\rnul\x00del\x7f\x85\u2028",  # written raw: only \\, " and newline are escaped
]


def _series() -> list[Series]:
    rng = np.random.default_rng(11)
    steps = START + 60.0 * np.arange(HOURS * 60)
    out = [
        Series("ds_requests_total", {"pod": "p0"}, steps, np.cumsum(rng.poisson(4, steps.size))),
        Series(
            "ds_gauge",
            {"kind": "special"},
            START + np.array([0.001, 0.999, 1.5, 2.003, 7.777]),
            [np.nan, np.inf, -np.inf, -0.0, 5e-324],
        ),
        Series(
            "ds_gauge",
            {"kind": "plain"},
            START + rng.integers(0, 10**6, 40).cumsum() / 1000,
            rng.normal(size=40) * 1e6,
        ),
    ]
    for i, value in enumerate(AWKWARD):
        out.append(Series("ds_awkward", {"v": value, "i": str(i)}, [START + i + 0.001], [i / 3]))
    return out


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    manifest = Manifest.model_validate(
        {
            "title": "Backfill check",
            "synthetic": True,
            "window": {"start": "2026-10-19T09:40:00Z", "end": "2026-10-19T14:40:00Z"},
            "scrape_interval_seconds": 60,
            "deployments": [
                {
                    "name": "T",
                    "selector": {"pod": "p0"},
                    "hardware": {"gpu_model": "NVIDIA H20", "gpus_per_replica": 1},
                    "engine": {"name": "vllm"},
                }
            ],
            "generator": {"scenario": "backfill-test", "seed": 11, "version": "0.1.0"},
        }
    )
    path = tmp_path_factory.mktemp("dataset") / "ds"
    write_dataset(path, manifest, _series())
    return read_dataset(path)


@pytest.fixture(scope="module")
def prometheus(
    prometheus_factory: PrometheusFactory, dataset: Dataset
) -> Iterator[PrometheusServer]:
    # Bytes, then decode: read_text() would turn a raw "\r" in a label value into "\n".
    server = prometheus_factory((dataset.path / "samples.om").read_bytes().decode("utf-8"))
    yield server
    server.stop()


def _stored(
    server: PrometheusServer, name: str, end_ms: int, window_s: float
) -> dict[frozenset[tuple[str, str]], tuple[list[int], list[float]]]:
    selector = Selector(None, (Matcher.equal("__name__", name),)).over(window_s)
    data = server.query(to_promql(selector), end_ms / 1000)
    assert data["resultType"] == "matrix"
    out = {}
    for one in data["result"]:
        labels = frozenset((k, v) for k, v in one["metric"].items() if k != "__name__")
        assert one["metric"]["__name__"] == name
        # The API writes times as float seconds with millisecond digits.
        t_ms = [round(float(t) * 1000) for t, _ in one["values"]]
        out[labels] = (t_ms, [float(v) for _, v in one["values"]])
    return out


def test_dataset_samples_are_what_prometheus_stores(
    dataset: Dataset, prometheus: PrometheusServer
) -> None:
    samples = dataset.samples
    assert len(samples) == len(_series())
    end_ms = int(samples.t_ms.max())
    # A range selector at `end` covers [end - window, end]: reach past the first sample.
    window_s = math.ceil((end_ms - int(samples.t_ms.min())) / 1000) + 60
    for name in sorted(set(samples.names)):
        stored = _stored(prometheus, name, end_ms, window_s)
        mine = [s for s in samples if s.name == name]
        assert set(stored) == {frozenset(s.labels.items()) for s in mine}
        for series in mine:
            t_ms, values = stored[frozenset(series.labels.items())]
            assert t_ms == series.t_ms.tolist(), series.labels
            # Bit for bit, NaN by position and -0.0 by sign.
            got = np.array(values)
            assert np.array_equal(np.isnan(got), np.isnan(series.values))
            finite = ~np.isnan(got)
            assert got[finite].tobytes() == series.values[finite].tobytes(), series.labels


def test_dataset_reads_back_as_written(dataset: Dataset) -> None:
    want = sorted(_series(), key=lambda s: (s.name, tuple(s.labels.items())))
    for got, one in zip(dataset.samples, want, strict=True):
        assert (got.name, got.labels) == (one.name, one.labels)
        assert np.array_equal(got.t_ms, one.t_ms)
        assert np.array_equal(got.values, one.values, equal_nan=True)


def test_promtool_wrote_several_blocks(prometheus: PrometheusServer) -> None:
    # One block per 2 h range the samples touch: 5 h from a whole hour spans 3.
    blocks = re.findall(r"^[0-9A-Z]{26} ", prometheus.promtool_output, flags=re.MULTILINE)
    assert len(blocks) >= 3, prometheus.promtool_output
