"""throughput(): increases, rates and regime against the bundled simulator datasets."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.throughput import Regime, ThroughputResult, throughput
from inference_obs.deployment import Deployment
from inference_obs.metrics import vllm
from inference_obs.reading.measurement import Status
from inference_obs.samples import SampleSet, Window
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.late_pod import FROM_S, LATE, generated, late_dataset, long_window

DATASETS = Path(__file__).parents[2] / "datasets"


def _open(name: str) -> tuple[DatasetSource, Window]:
    source = DatasetSource(DATASETS / name)
    window = source.dataset.manifest.window
    return source, Window(window.start, window.end)


@pytest.fixture(scope="module")
def pro_h20() -> tuple[DatasetSource, Window]:
    return _open("pro5000-vs-h20")


def _deployment(source: DatasetSource, name: str) -> Deployment:
    return next(d for d in source.dataset.manifest.deployments if d.name == name)


def _expected_increase(samples: SampleSet, window: Window) -> float:
    """Prometheus 2 extrapolated increase, per series from its first/last samples, summed."""
    total = 0.0
    for series in samples:
        t = series.timestamps
        v = series.values
        assert np.all(np.diff(v) >= 0), "no counter reset expected"
        sampled = t[-1] - t[0]
        delta = float(v[-1] - v[0])
        to_start, to_end = t[0] - window.start_s, window.end_s - t[-1]
        threshold = sampled / (len(t) - 1) * 1.1
        average = sampled / (len(t) - 1)
        if delta > 0 and v[0] >= 0:
            to_start = min(to_start, sampled * v[0] / delta)
        to_start = to_start if to_start < threshold else average / 2
        to_end = to_end if to_end < threshold else average / 2
        total += delta * (sampled + to_start + to_end) / sampled
    return total


@pytest.mark.parametrize("name", ["PRO", "H20"])
def test_increases_match_counter_samples(pro_h20: tuple[DatasetSource, Window], name: str) -> None:
    source, window = pro_h20
    deployment = _deployment(source, name)
    result = throughput(source, deployment, window)
    for measured, family in (
        (result.output_tokens, vllm.GENERATION_TOKENS),
        (result.prompt_tokens, vllm.PROMPT_TOKENS),
        (result.finished_requests, vllm.REQUEST_SUCCESS),
    ):
        raw = source.raw(family.select(deployment.matchers), window)
        assert measured.status is Status.OK
        assert measured.value == pytest.approx(_expected_increase(raw, window), rel=1e-9)
        assert any("extrapolat" in c for c in measured.caveats)
    rate = result.output_tokens_per_second
    assert result.output_tokens.value is not None
    assert rate.value == pytest.approx(result.output_tokens.value / 3600.0, rel=1e-12)
    assert rate.unit == "tokens/s"


def test_headline_numbers_close_to_aggregates(pro_h20: tuple[DatasetSource, Window]) -> None:
    source, window = pro_h20
    aggregates = source.dataset.aggregates
    assert aggregates is not None
    for name in ("PRO", "H20"):
        result = throughput(source, _deployment(source, name), window)
        truth = aggregates["realised"][name]
        # aggregates count what was generated in the window; increase() extrapolates.
        assert result.output_tokens.value == pytest.approx(truth["generated_tokens"], rel=0.01)
        assert result.output_tokens_per_second_per_replica.value == pytest.approx(
            truth["output_tokens_per_second_per_replica"], rel=0.01
        )


def test_per_replica_mean_and_gpu_hours(pro_h20: tuple[DatasetSource, Window]) -> None:
    source, window = pro_h20
    result = throughput(source, _deployment(source, "H20"), window)
    out = result.output_tokens.value
    assert out is not None
    assert result.replicas_seen.value == 4.0
    per_replica = result.output_tokens_per_second_per_replica
    assert per_replica.value == pytest.approx(out / 3600.0 / 4, rel=1e-12)
    assert any("mean" in c for c in per_replica.caveats)
    assert result.output_tokens_per_gpu_hour.value == pytest.approx(out / 32.0, rel=1e-12)
    assert result.output_tokens_per_gpu_hour.unit == "tokens/GPU-hour"


def test_regime(pro_h20: tuple[DatasetSource, Window]) -> None:
    source, window = pro_h20
    pro = throughput(source, _deployment(source, "PRO"), window)
    h20 = throughput(source, _deployment(source, "H20"), window)
    assert pro.regime is Regime.CAPACITY_LIMITED
    assert pro.waiting_max.value == 19.0
    waiting = source.raw(
        vllm.NUM_REQUESTS_WAITING.select(_deployment(source, "PRO").matchers), window
    )
    assert pro.waiting_sample_share.value == pytest.approx(float(np.mean(waiting.values > 0)))
    assert h20.regime is Regime.DEMAND_LIMITED
    assert "floor" in h20.regime_reason
    assert any("floor" in c for c in h20.output_tokens_per_second.caveats)
    assert h20.kv_cache_usage_max.value is not None
    assert h20.kv_cache_usage_max.value < 0.99


def test_missing_family_is_no_data(pro_h20: tuple[DatasetSource, Window]) -> None:
    source, window = pro_h20
    ghost = _deployment(source, "PRO").model_copy(update={"name": "X", "selector": {"pod": "none"}})
    result = throughput(source, ghost, window)
    assert result.output_tokens.status is Status.NO_DATA
    assert result.output_tokens.value is None
    assert "vllm:generation_tokens_total" in result.output_tokens.annotations[0].message
    assert result.output_tokens_per_second.status is Status.NO_DATA
    assert result.regime is Regime.UNKNOWN


def test_frame_and_html(pro_h20: tuple[DatasetSource, Window]) -> None:
    source, window = pro_h20
    result: ThroughputResult = throughput(source, _deployment(source, "PRO"), window)
    frame = result.to_frame()
    # Ten for the deployment, requests_per_second, and two rates for its one replica.
    assert len(frame) == len(result.measurements()) == 13
    assert frame.set_index("statistic").loc["output_tokens", "unit"] == "tokens"
    assert not math.isnan(frame.set_index("statistic")["value"].astype(float)["output_tokens"])
    assert result._repr_html_().startswith("<table>")


def test_r1_decode_rate() -> None:
    source, window = _open("r1-decode")
    for deployment in source.dataset.manifest.deployments:
        result = throughput(source, deployment, window)
        out = result.output_tokens.value
        assert out is not None
        assert out > 0
        assert result.output_tokens_per_second.value == pytest.approx(out / window.seconds)


def _span_rate(source: DatasetSource, pod: str, replica: str, window: Window) -> float:
    """``replica``'s output tokens/s from its first to its last counter sample in ``window``,
    from requests.csv: the rate increase() gives over the span its samples cover (it
    extrapolates the counter's change between them at the same pace)."""
    selector = vllm.GENERATION_TOKENS.select(_deployment(source, "H20").matchers)
    (series,) = [s for s in source.raw(selector, window) if s.labels["pod"] == pod]
    # requests.csv times are seconds after the dataset's own window start.
    zero = source.dataset.manifest.window.start.timestamp()
    first, last = float(series.timestamps[0]) - zero, float(series.timestamps[-1]) - zero
    return generated((replica,), first, last) / (last - first)


H20_REPLICAS = tuple((f"h20-model-0{i}", f"H20-0{i}") for i in range(1, 5))


def test_a_window_longer_than_the_data_is_not_diluted(
    pro_h20: tuple[DatasetSource, Window],
) -> None:
    source, hour = pro_h20
    h20 = _deployment(source, "H20")
    two_hours = long_window()
    assert two_hours.seconds == 2 * hour.seconds
    assert two_hours.end == hour.end
    long, short = throughput(source, h20, two_hours), throughput(source, h20, hour)
    # The data holds one hour: each replica's rate is its rate over the span it was
    # scraped, and the four replicas ran together, so the deployment's is their sum.
    truth = sum(_span_rate(source, pod, name, two_hours) for pod, name in H20_REPLICAS)
    for result in (long, short):
        assert result.output_tokens_per_second.value == pytest.approx(truth, rel=0.01)
    assert long.output_tokens_per_second.value == pytest.approx(
        short.output_tokens_per_second.value, rel=0.01
    )
    assert long.output_tokens_per_second_per_replica.value == pytest.approx(truth / 4, rel=0.01)
    # 32 GPUs for the hour the data holds, not for two.
    assert long.output_tokens_per_gpu_hour.value == pytest.approx(
        (long.output_tokens.value or 0.0) / 32.0, rel=0.01
    )
    for m in (
        long.output_tokens_per_second,
        long.requests_per_second,
        long.per_replica["h20-model-01"][0],
    ):
        (note,) = [a for a in m.annotations if a.kind == "coverage"]
        assert "50% of the 2 h window" in note.message
    # The window the data fills: nothing is marked.
    marked = [
        m.key for m in short.measurements() if any(a.kind == "coverage" for a in m.annotations)
    ]
    assert marked == []


def test_a_pod_that_starts_mid_window_is_rated_over_its_own_span(tmp_path: Path) -> None:
    dataset = late_dataset(tmp_path)
    source, window = DatasetSource(dataset), dataset.manifest.window.window()
    result = throughput(source, _deployment(source, "H20"), window)
    pod, name = LATE
    late = _span_rate(source, pod, name, window)
    own = result.per_replica[pod][0]
    assert own.value == pytest.approx(late, rel=0.01)  # not halved by the half hour it was absent
    assert any(a.kind == "coverage" and pod in a.message for a in own.annotations)
    on_time = result.per_replica["h20-model-01"][0]
    assert not any(a.kind == "coverage" for a in on_time.annotations)
    # The deployment's span is the window (three replicas cover it): its total is every
    # token over the hour; the per-replica mean is over 3.5 replica-hours, not 4.
    (series,) = [
        s
        for s in source.raw(
            vllm.GENERATION_TOKENS.select(_deployment(source, "H20").matchers), window
        )
        if s.labels["pod"] == pod
    ]
    present = window.end_s - series.timestamps[0]  # from its first scrape: about half an hour
    assert present == pytest.approx(FROM_S, abs=60)
    tokens = generated(tuple(n for _, n in H20_REPLICAS[:3]), 0.0, window.seconds) + generated(
        (name,), window.seconds - present, window.seconds
    )
    assert result.output_tokens_per_second.value == pytest.approx(tokens / window.seconds, rel=0.01)
    replica_seconds = 3 * window.seconds + present
    assert result.output_tokens_per_second_per_replica.value == pytest.approx(
        tokens / replica_seconds, rel=0.01
    )
    assert result.output_tokens_per_gpu_hour.value == pytest.approx(
        tokens / (8 * replica_seconds / 3600), rel=0.01
    )
