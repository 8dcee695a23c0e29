"""Units of the simulator: step arithmetic, arrivals, scheduler limits, labels, buckets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml

from inference_obs.errors import ConfigurationError
from inference_obs.metrics import dcgm, vllm
from inference_obs.metrics.builders import bucket_bound_spellings
from inference_obs.simulate import Scenario, run_scenario
from inference_obs.simulate.arrivals import generate_requests
from inference_obs.simulate.emit_vllm import histogram_buckets
from inference_obs.simulate.engine_spec import StepModel
from inference_obs.simulate.steps import decode_stretch, engine_steps, step_time

from .conftest import SMALL, Observed


def _small(**changes: Any) -> Scenario:
    data = yaml.safe_load(SMALL.read_text(encoding="utf-8"))
    data.update(changes)
    return Scenario.model_validate(data)


def test_step_time_splits_compute_from_memory() -> None:
    model = StepModel(base_ms=10, per_token_ms=0.1, per_sequence_ms=1, per_kilo_context_ms=2)
    seconds, share = step_time(model, prefill_tokens=100, decoders=2, spec_tokens=1, context=500)
    # 10 + 0.1 * (100 + 2 * 2) + 1 * 2 + 2 * 0.5 = 23.4 ms, of which 10.4 ms compute.
    assert seconds == pytest.approx(0.0234)
    assert share == pytest.approx(10.4 / 23.4)


def test_engine_steps_carry_the_partial_step() -> None:
    # Half a step left at t0 = 0 with 0.1 s steps: completions at 0.05, 0.15, 0.25.
    steps, left = engine_steps(0.5, 0.0, 0.3, 0.1)
    assert steps == 3
    assert left == pytest.approx(0.5)
    steps, left = engine_steps(1.0, 0.0, 0.05, 0.1)
    assert steps == 0
    assert left == pytest.approx(0.5)


def test_decode_latencies_add_up_to_the_decode_time() -> None:
    # Two requests, first tokens at 0.0 and 0.02; 4 and 2 decode steps, 9 and 2 tokens after.
    frac = np.array([1.0, 1.0])
    last = np.array([0.0, 0.02])
    done = np.array([0, 0])
    total = np.array([4, 2])
    after = np.array([9, 2])
    first = decode_stretch(frac, last, done, total, after, 0.02, 0.1, 0.03)
    # Stretch (0.02, 0.1] at 30 ms: both complete steps at 0.05 and 0.08.
    assert first.steps.tolist() == [2, 2]
    assert first.finished.tolist() == [False, True]
    assert first.tokens.tolist() == [4, 2]  # floor(2 * 9 / 4) of request 1's 9
    assert first.frac_left[0] == pytest.approx(1 / 3)  # next step due at 0.11
    second = decode_stretch(
        first.frac_left, first.last_token, done + first.steps, total, after, 0.1, 0.5, 0.05
    )
    assert second.steps.tolist() == [2, 0]
    assert second.finished.tolist() == [True, False]
    weights = np.concatenate([first.itl_weights, second.itl_weights])
    values = np.concatenate([first.itl_values, second.itl_values])
    # Request 1's tokens: 0.05, 0.08, then at 50 ms steps 0.1 + 0.05 / 3 and 50 ms later.
    assert second.last_token[0] == pytest.approx(0.1 + 0.05 / 3 + 0.05)
    finish_1 = second.last_token[0]
    finish_2 = first.last_token[1]
    assert float(np.sum(values * weights)) == pytest.approx(finish_1 - 0.0 + finish_2 - 0.02)
    assert weights.sum() == 6


def test_arrivals_follow_the_rate_and_its_bursts() -> None:
    scenario = _small()
    spec = scenario.deployments[0]
    requests = generate_requests(spec, 1, 0, 0.0, 600.0)
    arrivals = requests.arrival
    # 1.2/s for ten minutes, three times that in minute 2, plus the scripted clusters.
    expected = 1.2 * 540 + 3.6 * 60 + 9
    assert abs(arrivals.size - expected) < 4 * np.sqrt(expected)
    assert np.all(np.diff(arrivals) >= 0)
    in_burst = ((arrivals >= 120) & (arrivals < 180)).sum()
    assert in_burst > 2 * ((arrivals >= 60) & (arrivals < 120)).sum()
    assert (requests.replica[np.isclose(arrivals, 300.0)] == 1).all()
    limited = requests.max_tokens > 0
    assert np.all(requests.output_tokens[limited] <= requests.max_tokens[limited])
    hits = requests.local_hit_tokens + requests.external_hit_tokens
    assert np.all(hits < requests.prompt_tokens)
    assert np.all(hits % spec.kv_cache.block_size == 0)


def test_the_scheduler_keeps_its_limits(small: Observed) -> None:
    spec = small.sim.scenario.deployments[0]
    for run in small.sim.engines[spec.name]:
        assert run.running.max() <= (spec.config.max_num_seqs or 0)
        assert run.kv_usage.min() >= 0
        assert run.kv_usage.max() <= 1
    table = small.sim.requests
    finished = table[table["outcome"] == "finished"]
    assert (finished["queue_time"] >= 0).all()
    assert (finished["prefill_time"] > 0).all()
    assert np.allclose(finished["e2e"], finished["ttft"] + finished["decode_time"], atol=2e-6)
    one_token = finished["output_tokens"] == 1
    assert one_token.any()
    assert (finished.loc[one_token, "tpot"] == 0).all()


def test_inter_token_latencies_sum_to_decode_time_without_cuts() -> None:
    data = yaml.safe_load(SMALL.read_text(encoding="utf-8"))
    data["faults"] = []
    workload = data["deployments"][0]["workload"][0]
    workload["abort_share"] = 0
    workload["error_share"] = 0
    scenario = Scenario.model_validate(data)
    sim = run_scenario(scenario)
    runs = sim.engines["SMALL"]
    assert (sim.requests["outcome"] == "finished").all()
    itl = sum(run.inter_token_latency.total() for run in runs)
    decode = sum(float(np.sum(run.finish - run.first_token)) for run in runs)
    assert itl == pytest.approx(decode, rel=1e-9)


def test_series_carry_the_catalogue_labels(small: Observed) -> None:
    (gpu,) = small.select(dcgm.GPU_UTIL.name, pod="small-01", gpu="0")
    assert set(gpu.labels) == {*dcgm.GPU_LABELS, "instance", "job"}
    assert gpu.labels["UUID"].startswith("GPU-")
    assert gpu.labels["modelName"] == "NVIDIA H20"
    (ttft,) = small.select(f"{vllm.TIME_TO_FIRST_TOKEN.name}_count", pod="small-01", engine="0")
    assert set(ttft.labels) == {*vllm.STANDARD_LABELS, "instance", "job", "namespace", "pod"}
    (info,) = small.select(vllm.CACHE_CONFIG_INFO.name, pod="small-01")
    assert set(vllm.CACHE_CONFIG_INFO.labels) <= set(info.labels)
    assert info.labels["num_gpu_blocks"] == "1500"
    assert set(info.values) == {1.0}


def test_buckets_are_the_catalogue_defaults_spelled_as_vllm_does(small: Observed) -> None:
    spec = small.sim.scenario.deployments[0]
    for family in (vllm.TIME_TO_FIRST_TOKEN, vllm.E2E_REQUEST_LATENCY, vllm.REQUEST_PROMPT_TOKENS):
        assert histogram_buckets(spec, family) == family.buckets
        les = {
            s.labels["le"]
            for s in small.select(f"{family.name}_bucket", pod="small-01", engine="0")
        }
        assert les == {*(bucket_bound_spellings(b)[0] for b in family.buckets or ()), "+Inf"}
    assert "20.0" in {
        s.labels["le"] for s in small.select(f"{vllm.REQUEST_PROMPT_TOKENS.name}_bucket")
    }


def test_declared_max_model_len_and_overrides_change_the_buckets() -> None:
    data = yaml.safe_load(SMALL.read_text(encoding="utf-8"))
    spec_data = data["deployments"][0]
    spec_data["config"]["max_model_len"] = 8192
    spec_data["custom_histogram_buckets"] = {"ttft": [0.5, 1, 2]}
    spec = Scenario.model_validate(data).deployments[0]
    assert histogram_buckets(spec, vllm.REQUEST_PROMPT_TOKENS) == vllm.request_tokens_buckets(8192)
    assert histogram_buckets(spec, vllm.TIME_TO_FIRST_TOKEN) == (0.5, 1, 2)
    assert histogram_buckets(spec, vllm.E2E_REQUEST_LATENCY) == vllm.REQUEST_LATENCY_BUCKETS
    with pytest.raises(ConfigurationError, match="vllm:num_requests_running: not a histogram"):
        histogram_buckets(spec, vllm.NUM_REQUESTS_RUNNING)
