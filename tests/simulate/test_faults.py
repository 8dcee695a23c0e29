"""Each injected fault of the small scenario does what it says in the data."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from inference_obs.metrics import dcgm, vllm
from inference_obs.samples import Series

from .conftest import Observed

S01, S02 = "small-01", "small-02"


def _app(small: Observed, name: str, pod: str, **labels: str) -> Series:
    (series,) = small.select(name, pod=pod, **labels)
    return series


def _up(small: Observed, pod: str) -> Series:
    (series,) = small.select("up", pod=pod)
    return series


def _between(offsets: npt.NDArray[np.float64], start: float, end: float) -> npt.NDArray[np.bool_]:
    out: npt.NDArray[np.bool_] = (offsets >= start) & (offsets < end)
    return out


def test_a_restart_resets_counters_and_loses_requests(small: Observed) -> None:
    up = _up(small, S01)
    down = _between(small.offsets(up), 360, 400)
    assert down.any()
    assert not up.values[down].any()
    assert up.values[~down].all()
    count = _app(small, f"{vllm.E2E_REQUEST_LATENCY.name}_count", S01, engine="0")
    offsets = small.offsets(count)
    assert not _between(offsets, 360, 400).any()
    before, after = np.flatnonzero(offsets < 360)[-1], np.flatnonzero(offsets >= 400)[0]
    assert count.values[after] < count.values[before]
    table = small.sim.requests
    rows = table[table["replica"] == "S-01"]
    restarted = (rows["finish"] > 360) & (rows["finish"] <= offsets[after])
    assert count.values[after] == (restarted & (rows["outcome"] == "finished")).sum()
    assert (rows.loc[rows["outcome"] == "rejected", "arrival"].between(360, 400)).all()
    assert (rows["outcome"] == "rejected").sum() > 0
    lost = rows.loc[rows["outcome"] == "lost"]
    assert len(lost) > 0
    assert (lost["finish"] == 360).all()
    assert (lost["finish_reason"] == "abort").all()
    prompt = _app(small, vllm.PROMPT_TOKENS.name, S01, engine="0")
    assert np.any(np.diff(prompt.values) < 0)


def test_a_stall_keeps_requests_running_on_idle_gpus(small: Observed) -> None:
    running = _app(small, vllm.NUM_REQUESTS_RUNNING.name, S02, engine="0")
    waiting = _app(small, vllm.NUM_REQUESTS_WAITING.name, S02, engine="0")
    deferred = _app(
        small, vllm.NUM_REQUESTS_WAITING_BY_REASON.name, S02, engine="0", reason="deferred"
    )
    stalled = _between(small.offsets(running), 241, 290)
    assert running.values[stalled].min() > 0
    assert (deferred.values[stalled] == waiting.values[stalled]).all()
    node = next(n for n in small.sim.scrapes.nodes if n.replicas == (1,))
    collect = small.sim.scrapes.collect[(node.deployment, node.index)]
    for gpu in small.select(dcgm.GPU_UTIL.name, pod=S02):
        offsets = small.offsets(gpu)
        latest = collect[np.searchsorted(collect, offsets, side="right") - 1]
        during = _between(latest, 241, 290)
        assert during.any()
        assert (gpu.values[during] == 0).all()
        assert gpu.values[~during].max() > 0


def test_scrape_gaps_leave_no_samples(small: Observed) -> None:
    running = _app(small, vllm.NUM_REQUESTS_RUNNING.name, S02, engine="0")
    assert not _between(small.offsets(running), 420, 460).any()
    up = _up(small, S02)
    assert not up.values[_between(small.offsets(up), 420, 460)].any()
    for gpu in small.select(dcgm.POWER_USAGE.name, pod=S02):
        assert not _between(small.offsets(gpu), 480, 510).any()
    (gpu_up,) = [
        s
        for s in small.select("up", job="dcgm-exporter")
        if s.labels["instance"] == "10.0.1.20:9400"
    ]
    assert not gpu_up.values[_between(small.offsets(gpu_up), 480, 510)].any()


def test_a_stopped_gpu_has_no_samples_after_it_stops(small: Observed) -> None:
    for name in (dcgm.GPU_UTIL.name, dcgm.FB_USED.name):
        (stopped,) = small.select(name, pod=S02, gpu="1")
        (other,) = small.select(name, pod=S02, gpu="0")
        assert small.offsets(stopped).max() < 330
        assert small.offsets(other).max() > 330


def test_misaligned_scrapes_are_offset_from_the_app_scrapes(small: Observed) -> None:
    app = small.offsets(_up(small, S01))
    (gpu,) = small.select(dcgm.GPU_UTIL.name, pod=S01, gpu="0")
    # Each GPU scrape lands 7 s (give or take the jitter) after some app scrape.
    lag = (small.offsets(gpu)[:, None] - app[None, :]) % 15
    assert np.all(np.min(np.abs(lag - 7), axis=1) < 0.05)


def test_missing_families_are_absent(small: Observed) -> None:
    name = vllm.NUM_REQUESTS_WAITING_BY_REASON.name
    assert not small.select(name, pod=S01)
    assert len(small.select(name, pod=S02)) == 2
    assert not small.select(dcgm.PROF_SM_OCCUPANCY.name)
    assert small.select(dcgm.PROF_SM_ACTIVE.name)


def test_aborted_requests_are_in_the_ground_truth_only(small: Observed) -> None:
    table = small.sim.requests
    aborted = table[table["outcome"] == "aborted"]
    assert len(aborted) > 0
    assert (aborted["finish_reason"] == "abort").all()
    success = small.select(vllm.REQUEST_SUCCESS.name, finished_reason="abort")
    assert all(not s.values.any() for s in success)
