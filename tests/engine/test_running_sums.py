"""Compensated sums take one of two loops by width; both give Prometheus's bits."""

from __future__ import annotations

import pytest

from inference_obs.engine import compensated
from inference_obs.engine.functions import sum_over_time
from inference_obs.engine.rules import Rules
from tests.engine.test_fast_paths import KINDS, STEP_MS, check, ref_sum, sample_set


@pytest.mark.parametrize("widest", [0, 1 << 20], ids=["per-position", "accumulate"])
@pytest.mark.parametrize("rules", [Rules.PROMETHEUS_2, Rules.PROMETHEUS_3])
@pytest.mark.parametrize("ragged", [False, True])
def test_both_loops_equal_prometheus_bit_for_bit(
    widest: int, rules: Rules, ragged: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(compensated, "_ACCUMULATE_WIDEST", widest)
    samples = sample_set(KINDS * 2, 200, ragged=ragged, seed=11)  # 96 series: a wide block
    check(sum_over_time, ref_sum, samples, 20 * STEP_MS, 180 * STEP_MS, rules)
