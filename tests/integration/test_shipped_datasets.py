"""Every bundled dataset backfills into a real Prometheus and comes back sample for sample.

``samples.om`` goes to promtool exactly as shipped; one raw range selector
over the whole window then returns every series, and each must hold exactly
the dataset's timestamps and values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from inference_obs.source.dataset.reader import read_dataset
from tests.integration.servers import PrometheusServer

pytestmark = pytest.mark.integration

DATASETS = sorted(
    p for p in (Path(__file__).resolve().parents[2] / "datasets").iterdir() if p.is_dir()
)


def test_datasets_are_bundled() -> None:
    assert [p.name for p in DATASETS] == ["h100-vs-h200", "pro5000-vs-h20", "r1-decode"]
    for path in DATASETS:
        assert read_dataset(path).manifest.synthetic
        assert sum(f.stat().st_size for f in path.iterdir()) < 10 * 2**20


@pytest.mark.parametrize("path", DATASETS, ids=lambda p: p.name)
def test_backfilled_dataset_returns_its_samples(
    shipped_prometheus: Callable[[Path], PrometheusServer], path: Path
) -> None:
    dataset = read_dataset(path)
    server = shipped_prometheus(path)
    samples = dataset.samples
    first, last = int(samples.t_ms.min()), int(samples.t_ms.max())
    span = math.ceil((last - first) / 1000) + 1
    result = server.query(f'{{__name__=~".+"}}[{span}s]', last / 1000)["result"]
    stored = {}
    for one in result:
        labels = dict(one["metric"])
        name = labels.pop("__name__")
        stored[(name, tuple(sorted(labels.items())))] = one["values"]
    assert len(stored) == len(samples)
    for i in range(len(samples)):
        key = (samples.names[i], tuple(sorted(samples.labels[i].items())))
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        values = stored[key]
        t_ms = np.array([round(float(t) * 1000) for t, _ in values], dtype=np.int64)
        v = np.array([float(x) for _, x in values])
        np.testing.assert_array_equal(t_ms, samples.t_ms[lo:hi], err_msg=str(key))
        np.testing.assert_array_equal(v, samples.values[lo:hi], err_msg=str(key))
