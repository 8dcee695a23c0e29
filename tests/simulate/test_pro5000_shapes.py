"""The pro5000-vs-h20 dataset has the shape of the observation it is modelled on.

Everything is read from the dataset's series, the way a report would read
it: counter increases over the window, sampled gauges, GPU samples.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from inference_obs.metrics import dcgm, vllm
from inference_obs.metrics.builders import bucket_bound_spellings

from .conftest import Observed

PRO, H20 = "pro-model-01", "h20-model-"


@pytest.fixture(scope="module")
def data(shipped: dict[str, Observed]) -> Observed:
    return shipped["pro5000-vs-h20"]


def _increase(data: Observed, name: str, pod_prefix: str, **labels: str) -> float:
    """Sum over matching series of (last - first) sample inside the window."""
    total = 0.0
    for series in data.select(name, **labels):
        if not series.labels["pod"].startswith(pod_prefix):
            continue
        inside = (series.t_ms >= data.start_ms) & (series.t_ms <= data.end_ms)
        values = series.values[inside]
        total += float(values[-1] - values[0])
    return total


def _le(bound: float) -> str:
    return bucket_bound_spellings(bound)[0]


def _gauge(
    data: Observed, name: str, pod: str, **labels: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    (series,) = data.select(name, pod=pod, **labels)
    return data.offsets(series) / 60.0, series.values


def test_pro_requests_mostly_set_short_output_limits(data: Observed) -> None:
    name = f"{vllm.REQUEST_PARAMS_MAX_TOKENS.name}_bucket"
    everything = _increase(data, name, PRO, le="+Inf")
    assert everything > 1000
    assert _increase(data, name, PRO, le=_le(20)) / everything == pytest.approx(0.8215, abs=0.03)
    assert _increase(data, name, PRO, le=_le(50)) / everything == pytest.approx(0.9582, abs=0.02)


def test_finish_reasons(data: Observed) -> None:
    name = vllm.REQUEST_SUCCESS.name

    def shares(pods: str) -> dict[str, float]:
        counts = {r: _increase(data, name, pods, finished_reason=r) for r in ("stop", "length")}
        for other in ("abort", "error", "repetition"):
            assert _increase(data, name, pods, finished_reason=other) == 0
        return {r: c / sum(counts.values()) for r, c in counts.items()}

    assert shares(PRO)["length"] > 0.99
    h20 = shares(H20)
    assert h20["length"] == pytest.approx(0.0211, abs=0.01)
    assert h20["stop"] > 0.97


def test_h20_serves_long_cached_prompts_and_long_outputs(data: Observed) -> None:
    prompt = vllm.REQUEST_PROMPT_TOKENS.name
    mean_prompt = _increase(data, f"{prompt}_sum", H20) / _increase(data, f"{prompt}_count", H20)
    assert 20_000 < mean_prompt < 100_000
    hits = _increase(data, vllm.PREFIX_CACHE_HITS.name, H20)
    assert hits / _increase(data, vllm.PREFIX_CACHE_QUERIES.name, H20) > 0.85
    output = vllm.REQUEST_GENERATION_TOKENS.name
    assert _increase(data, f"{output}_sum", H20) / _increase(data, f"{output}_count", H20) > 300


def _pro_gpu_util(data: Observed) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """PRO's eight GPUs: sample times (minutes) and utilisation, one row per GPU."""
    series = data.select(dcgm.GPU_UTIL.name, pod=PRO)
    assert len(series) == 8
    return data.offsets(series[0]) / 60.0, np.vstack([s.values for s in series])


def test_a_burst_of_waiting_requests_around_minutes_14_to_16(data: Observed) -> None:
    minutes, waiting = _gauge(data, vllm.NUM_REQUESTS_WAITING.name, PRO)
    burst = (minutes >= 13) & (minutes <= 17)
    assert 15 <= waiting[burst].max() <= 30
    stall = (minutes >= 43.5) & (minutes <= 45)
    assert waiting[~burst & ~stall].max() <= 5
    gpu_minutes, util = _pro_gpu_util(data)
    for at in minutes[burst & (waiting >= 10)]:
        nearest = np.argmin(np.abs(gpu_minutes - at))
        assert util[:, nearest].mean() >= 88


def test_one_sample_runs_11_and_queues_4_while_the_gpus_read_0(data: Observed) -> None:
    minutes, running = _gauge(data, vllm.NUM_REQUESTS_RUNNING.name, PRO)
    _, waiting = _gauge(data, vllm.NUM_REQUESTS_WAITING.name, PRO)
    _, deferred = _gauge(data, vllm.NUM_REQUESTS_WAITING_BY_REASON.name, PRO, reason="deferred")
    (picked,) = np.flatnonzero((running == 11) & (waiting == 4))
    assert deferred[picked] == 4
    gpu_minutes, util = _pro_gpu_util(data)
    nearest = np.argmin(np.abs(gpu_minutes - minutes[picked]))
    assert abs(gpu_minutes[nearest] - minutes[picked]) < 1
    assert util[:, nearest].tolist() == [0.0] * 8


def test_pro_gpus_are_mostly_idle_and_h20_gpus_busy(data: Observed) -> None:
    _, util = _pro_gpu_util(data)
    assert 8 < util.mean() < 25
    h20 = [s.values for s in data.select(dcgm.GPU_UTIL.name) if s.labels["pod"].startswith(H20)]
    assert len(h20) == 32
    assert np.concatenate(h20).mean() > 80
