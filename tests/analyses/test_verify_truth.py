"""``dataset verify`` against the ground truth each bundled dataset ships (requests.csv).

Every expected number here comes from requests.csv by the helpers of
tests/analyses/ground_truth.py or by hand, never from the code under test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from inference_obs.analyses.verify import RowStatus
from inference_obs.cli import main
from inference_obs.report.verify import verify_dataset
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset
from tests.analyses.ground_truth import BUNDLED, COLUMNS, DATASETS, EXACT, true_quantile, truth


def _window_truth(requests: pd.DataFrame, name: str, metric: str, seconds: float) -> np.ndarray:
    column, event, finished = COLUMNS[metric]
    rows = requests[requests["deployment"] == name]
    keep = (rows[event] > 0) & (rows[event] <= seconds) & rows[column].notna()
    if finished:
        keep &= rows["outcome"] == "finished"
    out: np.ndarray = rows.loc[keep, column].to_numpy(np.float64)
    return out


@pytest.mark.parametrize("name", BUNDLED)
def test_verify_recomputes_and_checks_every_number_against_the_ground_truth(name: str) -> None:
    path = DATASETS / name
    result = verify_dataset(path)
    assert result.passed, result.failures
    rows = {r.key: r for r in result.rows}
    # Null against null is never "ok".
    assert all(r.status is not RowStatus.OK for r in result.rows if r.published is None)
    # Every realised request figure is recomputed from requests.csv: what is left over is
    # a scenario target or an engine-step count, each with its reason.
    for r in result.rows:
        if r.status is RowStatus.NOT_RECOMPUTABLE:
            assert r.key.startswith("targets.") or "engine" in r.reason, r
    source = DatasetSource(path)
    requests = pd.read_csv(path / "requests.csv")
    seconds = source.dataset.manifest.window.window().seconds
    bounds = 0
    for deployment in requests["deployment"].unique():
        for metric, (column, event, finished) in COLUMNS.items():
            mean = rows.get(f"truth.{deployment}/latency/{metric}_mean")
            counted = truth(source, deployment, column, event, finished)
            if not counted.size:
                continue
            assert mean is not None
            if mean.published is None:  # the dataset exports no such histogram
                assert mean.status is RowStatus.ABSENT
                assert "no number" in mean.reason
                continue
            # Means: the requests the counters recorded, exact but for float rounding.
            assert mean.status is RowStatus.OK
            assert mean.recomputed == pytest.approx(counted.mean(), rel=EXACT)
            for label, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)):
                row = rows[f"truth.{deployment}/latency/{metric}_{label}"]
                if row.published is None:  # buckets not exported: no bound to check, said so
                    assert row.status is RowStatus.ABSENT
                    assert "no number" in row.reason
                    continue
                counted_only = "counted between" in row.reason
                values = (
                    counted
                    if counted_only
                    else _window_truth(requests, deployment, metric, seconds)
                )
                assert row.recomputed == true_quantile(values, q)
                assert row.status is RowStatus.OK
                bounds += 1
    assert bounds >= 16


def test_the_published_pro_ttft_p99_is_checked_against_the_population_it_names() -> None:
    rows = {r.key: r for r in verify_dataset(DATASETS / "pro5000-vs-h20").rows}
    row = rows["truth.PRO/latency/ttft_p99"]
    # requests.csv: 1,980 PRO first tokens between the first and last scrape, 98.99 % of them
    # <= 40 s, so their P99 lies in (40, 80], the bucket published, which says it holds for
    # them; the window's 2,008 (99.004 % <= 40 s) have P99 39.83 s, outside it.
    assert "1,980 requests counted between" in row.reason
    assert 40 < (row.recomputed or 0) <= 80
    assert rows["realised.PRO.gpu_dram_active_mean"].status is RowStatus.ABSENT
    # aggregates.json publishes the P99 of the window's 2,008 PRO TTFTs (numpy's linear
    # interpolation) to 6 digits: 39.7596 s; recomputed from requests.csv it agrees.
    requests = pd.read_csv(DATASETS / "pro5000-vs-h20" / "requests.csv")
    ttft = _window_truth(requests, "PRO", "ttft", 3600.0)
    assert ttft.size == 2008
    p99 = rows["realised.PRO.ttft_seconds.p99"]
    assert p99.status is RowStatus.OK
    assert p99.published == 39.7596
    assert p99.recomputed == pytest.approx(float(np.quantile(ttft, 0.99)), rel=EXACT)


def test_verify_exits_1_when_the_ground_truth_leaves_a_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = read_dataset(DATASETS / "r1-decode")
    assert dataset.requests is not None
    slower = dataset.requests.copy()
    slower["ttft"] = slower["ttft"] * 100  # every TTFT 100 times what the buckets counted
    write_dataset(
        tmp_path / "d",
        dataset.manifest,
        dataset.samples,
        aggregates=dataset.aggregates,
        requests=slower,
    )
    assert main(["dataset", "verify", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert any(
        line.startswith("outside          truth.R1/latency/ttft_p50") for line in out.splitlines()
    )
    assert any(
        line.startswith("differs          realised.R1.ttft_seconds.p50")
        for line in out.splitlines()
    )
    assert "published numbers differ, are missing or fall outside their bounds" in err
