"""Latency at matched concurrency: computed where the loads overlap, refused where they don't."""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
import yaml

from inference_obs.analyses.validity.matched_load import matched_concurrency
from inference_obs.analyses.validity.verdicts import validity
from inference_obs.metrics import vllm
from inference_obs.simulate import simulate
from inference_obs.source.dataset.source import DatasetSource

from .ground_truth import requests_of, window_of

ROOT = Path(__file__).resolve().parents[2]
TWIN = ROOT / "tests" / "fixtures" / "scenarios" / "twin.yaml"


@pytest.fixture(scope="module")
def busier_b(tmp_path_factory: pytest.TempPathFactory) -> DatasetSource:
    """The control pair with B sent 2.2x A's traffic: loads differ but overlap."""
    scenario = yaml.safe_load(TWIN.read_text())
    scenario["deployments"][1] = copy.deepcopy(scenario["deployments"][1])
    scenario["deployments"][1]["workload"][0]["rate_per_second"] = 2.2
    out = tmp_path_factory.mktemp("busier-b")
    (out / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    return DatasetSource(simulate(out / "scenario.yaml", out / "data", seed=11))


def test_where_loads_overlap_the_quantiles_use_only_matched_intervals(
    busier_b: DatasetSource,
) -> None:
    deployments = busier_b.dataset.manifest.deployments
    window = window_of(busier_b)
    windows = {d.name: window for d in deployments}
    result = matched_concurrency(busier_b, deployments, windows, vllm.TIME_TO_FIRST_TOKEN)
    assert result.band is not None
    assert all(n >= 3 for n in result.intervals.values()), result.intervals
    requests = requests_of(busier_b)
    for d in deployments:
        # The kept intervals hold the first tokens of about the requests whose first
        # token fell in them (increase() extrapolates each interval a little).
        offsets = np.array([(t - window.start).total_seconds() for t in result.kept[d.name]])
        first = requests.loc[requests["replica"].isin(d.replicas), "first_token"].to_numpy()
        inside = sum(int(((first > end - 60) & (first <= end)).sum()) for end in offsets)
        assert result.observations[d.name] == pytest.approx(inside, rel=0.15), d.name
        for m in result.quantiles[d.name].values():
            assert m.ok
            assert m.bounds is not None
            assert m.bounds.lower <= (m.value or 0) <= m.bounds.upper
            assert m.provenance.promql[0].startswith("sum(avg_over_time(")
            assert "increase(" in m.provenance.promql[1]
    assert all(t.tzinfo is not None and t <= window.end for ts in result.kept.values() for t in ts)
    assert result.kept["A"][0] - window.start >= timedelta(0)


def test_the_validity_pair_carries_the_matched_latency_when_load_differs(
    busier_b: DatasetSource,
) -> None:
    result = validity(busier_b, busier_b.dataset.manifest.deployments, window_of(busier_b))
    (pair,) = result.pairs
    assert pair.finding("concurrency_differs") is not None
    families = [m.family for m in pair.matched]
    assert families == [vllm.INTER_TOKEN_LATENCY.name, vllm.TIME_TO_FIRST_TOKEN.name]
    assert all(m.band is not None for m in pair.matched)


def test_where_loads_never_overlap_nothing_is_invented() -> None:
    source = DatasetSource(ROOT / "datasets" / "h100-vs-h200")
    deployments = source.dataset.manifest.deployments
    windows = {d.name: window_of(source) for d in deployments}
    result = matched_concurrency(source, deployments, windows)
    assert result.band is None
    assert "never overlap" in result.reason
    assert "H100 ran" in result.reason
    assert "H200 ran" in result.reason
    assert all(not m.ok for q in result.quantiles.values() for m in q.values())
    assert result.intervals == {"H100": 0, "H200": 0}


def test_a_matched_quantile_in_the_lowest_bucket_says_so(busier_b: DatasetSource) -> None:
    deployments = busier_b.dataset.manifest.deployments
    window = window_of(busier_b)
    windows = {d.name: window for d in deployments}
    result = matched_concurrency(busier_b, deployments, windows, vllm.REQUEST_QUEUE_TIME)
    requests = requests_of(busier_b)
    for d in deployments:
        for label, m in result.quantiles[d.name].items():
            assert m.ok
            assert m.bounds is not None
            assert m.bounds.lower == 0, (d.name, label, m.bounds)
            (note,) = [a for a in m.annotations if a.kind == "lowest_bucket"]
            assert f"at most {m.bounds.upper:g}" in note.message
        # The bound holds: over the whole window, at least 95% of the requests waited no
        # longer than it (the matched intervals are a part of the window).
        waited = requests.loc[requests["replica"].isin(d.replicas), "queue_time"].dropna()
        upper = result.quantiles[d.name]["p95"].bounds
        assert upper is not None
        assert (waited <= upper.upper).mean() >= 0.95
    # A quantile above the lowest bucket carries no such note.
    ttft = matched_concurrency(busier_b, deployments, windows, vllm.TIME_TO_FIRST_TOKEN)
    for q in ttft.quantiles.values():
        for m in q.values():
            assert m.bounds is not None
            assert m.bounds.lower > 0
            assert all(a.kind != "lowest_bucket" for a in m.annotations)
