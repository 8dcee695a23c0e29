"""cost(): GPU-hours, cost per useful output token and break-even against the bundled datasets."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from inference_obs.analyses.cost import CostResult, CostSettings, TokenPrices, cost
from inference_obs.analyses.latency import share_within
from inference_obs.analyses.shapes import shapes
from inference_obs.analyses.throughput import throughput
from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import builders as b, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Matcher
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Measurement, Status
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

from .ground_truth import EXACT, truth
from .late_pod import FROM_S, late_dataset, long_window

DATASETS = Path(__file__).parents[2] / "datasets"
PRICE = 2.5
PRICES = TokenPrices(
    input_per_million=0.14, cached_input_per_million=0.028, output_per_million=0.28
)


def _open(name: str) -> tuple[DatasetSource, Window]:
    source = DatasetSource(DATASETS / name)
    window = source.dataset.manifest.window
    return source, Window(window.start, window.end)


@pytest.fixture(scope="module", params=["pro5000-vs-h20", "h100-vs-h200"])
def opened(request: pytest.FixtureRequest) -> tuple[DatasetSource, Window]:
    return _open(request.param)


def _value(m: Measurement) -> float:
    assert m.status is Status.OK, m
    assert m.value is not None
    return m.value


def _deployments(source: DatasetSource) -> tuple[Deployment, ...]:
    return source.dataset.manifest.deployments


def test_gpu_hours_and_cost_are_exact(opened: tuple[DatasetSource, Window]) -> None:
    source, window = opened
    for d in _deployments(source):
        result = cost(source, d.with_facts(gpu_hour_price=PRICE), window)
        replicas = _value(throughput(source, d, window).replicas_seen)
        assert replicas == round(replicas) >= 1
        gpus = d.hardware.gpus_per_replica * replicas
        assert _value(result.gpus) == gpus
        assert _value(result.gpu_hours) == gpus * window.seconds / 3600.0
        assert _value(result.cost) == PRICE * gpus * window.seconds / 3600.0
        assert result.cost.unit == "currency"
        assert result.gpu_hours.unit == "GPU-hours"
        assert any("Excludes CPU" in c for c in result.cost.caveats)
        assert result.sla_share is None
        assert result.sla_shares == ()
        assert result.revenue is None
        assert result.break_even_gpu_hour_price is None


def test_known_gpu_hours_of_the_bundled_deployments() -> None:
    source, window = _open("h100-vs-h200")
    hours = {
        d.name: cost(source, d.with_facts(gpu_hour_price=1.0), window) for d in _deployments(source)
    }
    # H100: two 4-GPU replicas; H200: one 8-GPU replica; 30 minutes.
    assert _value(hours["H100"].gpu_hours) == 4.0
    assert _value(hours["H200"].gpu_hours) == 4.0


def test_cost_per_useful_token_from_the_other_analyses(
    opened: tuple[DatasetSource, Window],
) -> None:
    source, window = opened
    for d in _deployments(source):
        sla = 10.0
        result = cost(source, d.with_facts(gpu_hour_price=PRICE), window, sla_e2e_s=sla)
        shape = shapes(source, d, window)
        replicas = _value(throughput(source, d, window).replicas_seen)
        share = _value(
            share_within(Reading(source, d, window, "latency"), vllm.E2E_REQUEST_LATENCY, sla)
        )
        completed = sum(_value(shape.finish_counts[r]) for r in ("stop", "length"))
        useful = share * completed * _value(shape.output_tokens_mean)
        total = PRICE * d.hardware.gpus_per_replica * replicas * window.seconds / 3600.0
        assert _value(result.useful_output_tokens) == pytest.approx(useful, rel=1e-9)
        got = _value(result.cost_per_million_useful_output_tokens)
        assert got == pytest.approx(total / useful * 1e6, rel=1e-9)
        assert result.cost_per_million_useful_output_tokens.unit == "currency/million tokens"
        gpu_hours = _value(result.gpu_hours)
        assert _value(result.useful_output_tokens_per_gpu_hour) == pytest.approx(
            useful / gpu_hours, rel=1e-9
        )
        output = _value(throughput(source, d, window).output_tokens)
        assert _value(result.output_tokens_per_gpu_hour) == pytest.approx(
            output / gpu_hours, rel=1e-9
        )
        # Aborted/errored requests never count, so useful < all output.
        assert _value(result.useful_output_tokens) < output


def test_sla_at_a_bucket_edge_is_exact(opened: tuple[DatasetSource, Window]) -> None:
    source, window = opened
    for d in _deployments(source):
        edge = cost(source, d.with_facts(gpu_hour_price=PRICE), window, sla_ttft_s=1.0)
        share = edge.sla_share
        assert share is not None
        assert share.bounds is not None
        assert share.bounds.lower == share.bounds.upper == _value(share)
        useful = edge.useful_output_tokens
        assert useful.bounds is not None
        assert useful.bounds.lower == useful.bounds.upper == _value(useful)
        # Exact: the ground-truth share of first tokens within 1 s.
        ttft = truth(source, d.name, "ttft", time="first_token", finished=False)
        assert _value(share) == pytest.approx(float((ttft <= 1.0).mean()), rel=EXACT)
        # Off an edge the share is an interval around the estimate.
        off = cost(source, d.with_facts(gpu_hour_price=PRICE), window, sla_ttft_s=0.9).sla_share
        assert off is not None
        assert off.bounds is not None
        assert off.bounds.lower < _value(off) < off.bounds.upper
        per_million = cost(
            source, d.with_facts(gpu_hour_price=PRICE), window, sla_ttft_s=0.9
        ).cost_per_million_useful_output_tokens
        assert per_million.bounds is not None
        assert per_million.bounds.lower <= _value(per_million) <= per_million.bounds.upper


def test_two_slas_take_the_smaller_share_within_frechet_bounds() -> None:
    source, window = _open("h100-vs-h200")
    d = _deployments(source)[0]
    result = cost(
        source, d.with_facts(gpu_hour_price=PRICE), window, sla_ttft_s=1.0, sla_e2e_s=10.0
    )
    ttft, e2e = (_value(m) for m in result.sla_shares)
    share = result.sla_share
    assert share is not None
    assert share.bounds is not None
    assert _value(share) == min(ttft, e2e)
    assert share.bounds.lower == pytest.approx(max(0.0, ttft + e2e - 1.0), rel=1e-12)
    assert share.bounds.upper == min(ttft, e2e)


def increase(
    source: DatasetSource, d: Deployment, window: Window, family: Family, *extra: Matcher
) -> float:
    """``sum(increase(family{d, extra}[w]))`` at the window's end, tokens."""
    expr = b.increase_total(family, (*d.matchers, *extra), window.seconds)
    return float(source.instant(expr, window.end_s).value.values[0])  # type: ignore[union-attr]


def test_break_even_with_prices_by_hand(opened: tuple[DatasetSource, Window]) -> None:
    source, window = opened
    for d in _deployments(source):
        result = cost(source, d.with_facts(gpu_hour_price=PRICE), window, prices=PRICES)

        by_source = vllm.PROMPT_TOKENS_BY_SOURCE
        local = increase(source, d, window, by_source, Matcher.equal("source", "local_compute"))
        cached = increase(
            source, d, window, by_source, Matcher.equal("source", "local_cache_hit")
        ) + increase(source, d, window, by_source, Matcher.equal("source", "external_kv_transfer"))
        output = increase(source, d, window, vllm.GENERATION_TOKENS)
        assert local + cached == pytest.approx(
            increase(source, d, window, vllm.PROMPT_TOKENS), rel=1e-9
        )
        revenue = (local * 0.14 + cached * 0.028 + output * 0.28) / 1e6
        gpu_hours = _value(result.gpu_hours)
        assert result.revenue is not None
        assert result.break_even_gpu_hour_price is not None
        assert _value(result.revenue) == pytest.approx(revenue, rel=1e-9)
        assert _value(result.break_even_gpu_hour_price) == pytest.approx(
            revenue / gpu_hours, rel=1e-9
        )
        assert result.break_even_gpu_hour_price.unit == "currency/GPU-hour"
        blended = result.blended_price_per_million_tokens
        assert blended is not None
        assert _value(blended) == pytest.approx(revenue / (local + cached + output) * 1e6, rel=1e-9)


def test_without_prompt_by_source_falls_back_to_prefix_cache_hits(tmp_path: Path) -> None:
    source, window = _open("h100-vs-h200")
    kept = [s for s in source.samples if s.name != vllm.PROMPT_TOKENS_BY_SOURCE.name]
    reduced = DatasetSource(write_dataset(tmp_path / "no-by-source", source.dataset.manifest, kept))
    d = _deployments(source)[0]
    result = cost(reduced, d.with_facts(gpu_hour_price=PRICE), window, prices=PRICES)
    assert result.prompt_tokens_cached is not None
    assert result.prompt_tokens_uncached is not None
    hits = _value(cache_hits := result.prompt_tokens_cached)
    assert "prefix_cache_hits" in cache_hits.provenance.promql[0]
    prompt = _value(throughput(source, d, window).prompt_tokens)
    assert _value(result.prompt_tokens_uncached) == pytest.approx(prompt - hits, rel=1e-9)
    assert result.revenue is not None
    assert result.revenue.ok


def _result_without(tmp_path: Path, name: str, sla_e2e_s: float | None = None) -> CostResult:
    source, window = _open("pro5000-vs-h20")
    kept = [s for s in source.samples if not s.name.startswith(name)]
    reduced = DatasetSource(write_dataset(tmp_path / "reduced", source.dataset.manifest, kept))
    return cost(
        reduced,
        _deployments(source)[0].with_facts(gpu_hour_price=PRICE),
        window,
        sla_e2e_s=sla_e2e_s,
    )


def _messages(m: Measurement) -> str:
    return " ".join(a.message for a in m.annotations)


def test_missing_output_family_gives_no_data_naming_it(tmp_path: Path) -> None:
    result = _result_without(tmp_path, vllm.GENERATION_TOKENS.name)
    for m in (result.replicas_seen, result.gpu_hours, result.cost, result.output_tokens):
        assert m.status is Status.NO_DATA
        assert m.value is None
        assert vllm.GENERATION_TOKENS.name in _messages(m)
    assert result.cost_per_million_useful_output_tokens.status is Status.NO_DATA
    assert not math.isnan(_value(result.useful_output_tokens))


def test_missing_latency_histogram_gives_no_data_naming_it(tmp_path: Path) -> None:
    result = _result_without(tmp_path, vllm.E2E_REQUEST_LATENCY.name, sla_e2e_s=10.0)
    share = result.sla_share
    assert share is not None
    assert share.status is Status.NO_DATA
    assert f"{vllm.E2E_REQUEST_LATENCY.name}_bucket" in _messages(share)
    for m in (result.useful_output_tokens, result.cost_per_million_useful_output_tokens):
        assert m.status is Status.NO_DATA
        assert m.value is None
        assert vllm.E2E_REQUEST_LATENCY.name in _messages(m)
    assert result.cost.ok
    frame = result.to_frame()
    assert set(frame.loc[frame["status"] == "no_data", "statistic"]) == {
        "e2e_share_le_10",
        "useful_output_tokens",
        "cost_per_million_useful_output_tokens",
        "useful_output_tokens_per_gpu_hour",
    }


def test_without_a_gpu_hour_price_money_is_no_data_and_tokens_per_gpu_hour_stay() -> None:
    source, window = _open("h100-vs-h200")
    for d in _deployments(source):
        priced = cost(
            source, d.with_facts(gpu_hour_price=PRICE), window, sla_e2e_s=10.0, prices=PRICES
        )
        unpriced = cost(source, d, window, sla_e2e_s=10.0, prices=PRICES)
        assert unpriced.gpu_hour_price is None
        for m in (unpriced.cost, unpriced.cost_per_million_useful_output_tokens):
            assert m.status is Status.NO_DATA
            assert m.value is None
            assert m.bounds is None
            assert "no GPU-hour price was given" in _messages(m)
        assert priced.cost.ok
        assert "no GPU-hour price" not in _messages(priced.cost_per_million_useful_output_tokens)
        # Everything that needs no price is the same number, bounds and all.
        same = (
            "gpus",
            "gpu_hours",
            "useful_output_tokens",
            "output_tokens_per_gpu_hour",
            "useful_output_tokens_per_gpu_hour",
            "revenue",
            "break_even_gpu_hour_price",
            "blended_price_per_million_tokens",
        )
        for name in same:
            a, b_ = getattr(priced, name), getattr(unpriced, name)
            assert a.status is b_.status is Status.OK, name
            assert (a.value, a.bounds) == (b_.value, b_.bounds), name
        assert _value(unpriced.useful_output_tokens_per_gpu_hour) > 0


def test_settings_defaults_are_the_former_keyword_defaults() -> None:
    # Before the settings model: sla_ttft_s=None, sla_e2e_s=None, prices=None; no currency
    # named unless one is given.
    assert CostSettings().model_dump() == {
        "sla_ttft_s": None,
        "sla_e2e_s": None,
        "prices": None,
        "currency": None,
    }
    assert cost.settings is CostSettings
    chosen = cost.configure({"sla_e2e_s": 10.0, "prices": PRICES})
    assert (chosen.sla_e2e_s, chosen.prices) == (10.0, PRICES)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("sla_ttft_s", 0.0),
        ("sla_e2e_s", -1.0),
        ("prices", {"input_per_million": 1.0}),
        ("sla_p99_s", 1.0),
    ],
)
def test_bad_settings_raise_a_configuration_error_naming_them(setting: str, value: object) -> None:
    source, window = _open("h100-vs-h200")
    bad: dict[str, Any] = {setting: value}
    with pytest.raises(ConfigurationError, match=f"cost\\.{setting}"):
        cost(source, _deployments(source)[0].with_facts(gpu_hour_price=PRICE), window, **bad)


def test_gpu_hours_are_the_hours_the_replicas_were_there(tmp_path: Path) -> None:
    # H20: 4 replicas of 8 GPUs. Over two hours of which the data holds one, 32
    # GPU-hours, not 64; with one replica scraped only from half-way, about 28.
    source, hour = _open("pro5000-vs-h20")
    (h20,) = [d for d in _deployments(source) if d.name == "H20"]
    long = cost(source, h20.with_facts(gpu_hour_price=PRICE), long_window())
    # A minute's margin: each replica's span reaches half a scrape interval (30 s) before
    # its first scrape, as increase() extrapolates.
    assert _value(long.gpu_hours) == pytest.approx(32.0, abs=8 * 4 / 60)
    assert _value(long.cost) == pytest.approx(PRICE * _value(long.gpu_hours), rel=EXACT)
    assert any(a.kind == "coverage" for a in long.gpu_hours.annotations)
    assert _value(cost(source, h20, hour).gpu_hours) == 32.0
    late = DatasetSource(late_dataset(tmp_path))
    hours = _value(cost(late, h20, hour).gpu_hours)
    assert hours == pytest.approx(8 * (3 + FROM_S / 3600), abs=8 / 60)
