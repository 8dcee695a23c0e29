"""Cache analysis against the ground truth of datasets/pro5000-vs-h20 (see test_latency)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.analyses.cache import CacheResult, cache
from inference_obs.errors import QueryError
from inference_obs.metrics import vllm
from inference_obs.reading.measurement import Status
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

from .ground_truth import EXACT, deployment, truth
from .test_latency import window

__all__ = ["window"]


@pytest.fixture(scope="module")
def results(source: DatasetSource, window: Window) -> dict[str, CacheResult]:
    return {d.name: cache(source, d, window) for d in source.dataset.manifest.deployments}


def test_pro_hit_rates_each_with_its_denominator(
    source: DatasetSource, results: dict[str, CacheResult]
) -> None:
    # Cache lookups are recorded at admission, every admitted request counts.
    prompt = truth(source, "PRO", "prompt_tokens", "admitted", finished=False)
    local = truth(source, "PRO", "local_hit_tokens", "admitted", finished=False)
    external = truth(source, "PRO", "external_hit_tokens", "admitted", finished=False)
    pro = results["PRO"]
    assert pro.prefix_cache_hit_rate.value == pytest.approx(local.sum() / prompt.sum(), rel=EXACT)
    expected = external.sum() / (prompt.sum() - local.sum())
    assert pro.external_kv_hit_rate.value == pytest.approx(expected, rel=EXACT)
    assert pro.prefix_cache_hit_rate.unit == "ratio"
    with pytest.raises(QueryError, match=r"cannot be added"):
        pro.combined_hit_rate()


def test_h20_has_no_external_cache(results: dict[str, CacheResult]) -> None:
    m = results["H20"].external_kv_hit_rate
    assert m.status is Status.NO_DATA
    assert m.value is None
    assert any(vllm.EXTERNAL_PREFIX_CACHE_HITS.name in a.message for a in m.annotations)


def test_preemptions_and_speculative_decoding(
    source: DatasetSource, results: dict[str, CacheResult]
) -> None:
    pro = results["PRO"]
    assert pro.preemptions.status is Status.OK
    assert pro.preemptions.value == 0.0
    assert truth(source, "PRO", "preemptions", finished=False).sum() == 0
    rate, length = pro.spec_acceptance_rate, pro.spec_mean_acceptance_length
    assert rate.value is not None
    assert 0 < rate.value <= 1
    k = deployment(source, "PRO").config.num_speculative_tokens
    assert k is not None
    assert length.value is not None
    # Mean acceptance length includes the bonus token: 1 + k * acceptance rate.
    assert length.value == pytest.approx(1 + k * rate.value, rel=EXACT)
    assert length.unit == "tokens"


def test_without_spec_decode_families_gives_no_data_naming_them(
    source: DatasetSource, window: Window, tmp_path: Path
) -> None:
    kept = [s for s in source.samples if s.name.startswith(("vllm:prefix_cache", "vllm:num_pre"))]
    dataset = write_dataset(tmp_path / "no-spec", source.dataset.manifest, kept)
    result = cache(DatasetSource(dataset), deployment(source, "PRO"), window)
    assert result.prefix_cache_hit_rate.ok
    for m in (result.spec_acceptance_rate, result.spec_mean_acceptance_length):
        assert m.status is Status.NO_DATA
        assert m.value is None
        message = " ".join(a.message for a in m.annotations)
        assert vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS.name in message
    frame = result.to_frame()
    assert (frame["status"] == "no_data").sum() == 3
