"""Request shapes against the ground truth of datasets/pro5000-vs-h20 (see test_latency)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inference_obs.analyses.shapes import ShapesResult, shapes
from inference_obs.reading.measurement import Status
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource

from .ground_truth import EXACT, deployment, truth
from .test_latency import window

__all__ = ["window"]


@pytest.fixture(scope="module")
def results(source: DatasetSource, window: Window) -> dict[str, ShapesResult]:
    return {d.name: shapes(source, d, window) for d in source.dataset.manifest.deployments}


@pytest.mark.parametrize("name", ["PRO", "H20"])
def test_max_tokens_mean_and_shares(
    source: DatasetSource, results: dict[str, ShapesResult], name: str
) -> None:
    limits = truth(source, name, "max_tokens")
    result = results[name]
    assert result.max_tokens_mean.value is not None
    assert math.isclose(result.max_tokens_mean.value, float(limits.mean()), rel_tol=EXACT)
    for bound, m in result.max_tokens_share.items():
        share = float(np.mean(limits <= bound))
        assert m.status is Status.OK
        assert m.bounds is not None
        assert m.value is not None
        if bound in (20, 50, 100):  # bucket bounds: exact
            assert m.bounds.lower == m.bounds.upper
            assert m.value == pytest.approx(share, rel=EXACT, abs=1e-12)
        else:
            assert m.bounds.lower <= share <= m.bounds.upper
            assert m.provenance.computation is not None


def test_pro_is_short_output_traffic(results: dict[str, ShapesResult]) -> None:
    pro = results["PRO"]
    assert pro.max_tokens_share[20].value == pytest.approx(0.8215, abs=0.03)
    assert pro.output_to_limit.value == pytest.approx(1.0, abs=1e-9)
    assert pro.output_tokens_mean.value == pytest.approx(pro.max_tokens_mean.value, rel=1e-9)


def test_finish_reason_mix(source: DatasetSource, results: dict[str, ShapesResult]) -> None:
    pro = results["PRO"]
    assert pro.finish_shares["length"].value == 1.0
    assert pro.finish_counts["stop"].value == 0.0
    assert pro.finish_counts["stop"].ok
    assert "not success" in pro.finish_shares["length"].caveats[0]
    for name in ("PRO", "H20"):
        reasons = truth(source, name, "finish_reason", dtype=object)
        result = results[name]
        for reason, m in result.finish_shares.items():
            expected = float(np.mean(reasons == reason))
            assert m.value == pytest.approx(expected, rel=EXACT, abs=1e-12), reason
        assert result.finished.value is not None
        assert result.finished.value > reasons.size  # extrapolated to the window's edges


def test_means_match_ground_truth_and_frame(
    source: DatasetSource, results: dict[str, ShapesResult]
) -> None:
    pro = results["PRO"]
    prompts = truth(source, "PRO", "prompt_tokens")
    assert pro.prompt_tokens_mean.value == pytest.approx(float(prompts.mean()), rel=1e-9)
    assert pro.prompt_tokens_mean.unit == "tokens"
    frame = pro.to_frame()
    assert "max_tokens_share_le_20" in set(frame["statistic"])
    assert "<table>" in pro._repr_html_()
    assert deployment(source, "PRO").name == pro.finished.deployment
