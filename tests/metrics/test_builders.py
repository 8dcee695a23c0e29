"""Exact PromQL of every builder, and the type rules they enforce."""

from __future__ import annotations

import pytest

from inference_obs.errors import ConfigurationError, QueryError
from inference_obs.metrics import FAMILIES, builders as b, dcgm, family as find_family, vllm
from inference_obs.metrics.family import Family, MetricType
from inference_obs.query import Matcher, to_promql

PRO = [Matcher.regex("pod_name", "pro-model-.*")]
SEL = '{pod_name=~"pro-model-.*"}'


def test_published_recheck_queries() -> None:
    """The three queries a published PRO 5000 vs H20 observation gives for rechecking."""
    p95 = b.histogram_quantile_merged(vllm.TIME_TO_FIRST_TOKEN, 0.95, PRO, 3600)
    assert to_promql(p95) == (
        "histogram_quantile(0.95, sum by (le) "
        f"(increase(vllm:time_to_first_token_seconds_bucket{SEL}[1h])))"
    )
    mean_output = b.histogram_mean(vllm.REQUEST_GENERATION_TOKENS, PRO, 3600)
    assert to_promql(mean_output) == (
        f"sum(increase(vllm:request_generation_tokens_sum{SEL}[1h])) / "
        f"sum(increase(vllm:request_generation_tokens_count{SEL}[1h]))"
    )
    utilisation = b.sample_mean(dcgm.GPU_UTIL, PRO, 3600)
    assert to_promql(utilisation) == (
        f"sum(sum_over_time(DCGM_FI_DEV_GPU_UTIL{SEL}[1h])) / "
        f"sum(count_over_time(DCGM_FI_DEV_GPU_UTIL{SEL}[1h]))"
    )


def test_grouping_is_kept_on_both_sides_and_le_added_for_quantiles() -> None:
    by = ("model_name",)
    assert to_promql(b.histogram_quantile_merged(vllm.E2E_REQUEST_LATENCY, 0.5, [], 300, by)) == (
        "histogram_quantile(0.5, sum by (le, model_name) "
        "(increase(vllm:e2e_request_latency_seconds_bucket[5m])))"
    )
    assert to_promql(b.per_second(vllm.GENERATION_TOKENS, [], 300, by)) == (
        "sum by (model_name) (rate(vllm:generation_tokens_total[5m]))"
    )
    assert to_promql(b.sample_mean(vllm.NUM_REQUESTS_RUNNING, [], 60, by)) == (
        "sum by (model_name) (sum_over_time(vllm:num_requests_running[1m])) / "
        "sum by (model_name) (count_over_time(vllm:num_requests_running[1m]))"
    )


def test_counter_and_gauge_builders() -> None:
    assert to_promql(b.increase_total(vllm.GENERATION_TOKENS, [], 3600)) == (
        "sum(increase(vllm:generation_tokens_total[1h]))"
    )
    assert to_promql(b.resets_total(vllm.GENERATION_TOKENS, [], 3600, ("instance",))) == (
        "sum by (instance) (resets(vllm:generation_tokens_total[1h]))"
    )
    assert to_promql(b.histogram_count(vllm.TIME_TO_FIRST_TOKEN, [], 3600)) == (
        "sum(increase(vllm:time_to_first_token_seconds_count[1h]))"
    )
    assert to_promql(b.maximum(vllm.NUM_REQUESTS_WAITING, [], 3600)) == (
        "max(max_over_time(vllm:num_requests_waiting[1h]))"
    )
    assert to_promql(b.maximum(vllm.NUM_REQUESTS_WAITING, [], 3600, ("pod",))) == (
        "max by (pod) (max_over_time(vllm:num_requests_waiting[1h]))"
    )
    assert to_promql(b.sample_count(dcgm.GPU_UTIL, [], 3600, ("gpu",))) == (
        "sum by (gpu) (count_over_time(DCGM_FI_DEV_GPU_UTIL[1h]))"
    )
    assert to_promql(b.sample_count(vllm.TIME_TO_FIRST_TOKEN, [], 3600)) == (
        "sum(count_over_time(vllm:time_to_first_token_seconds_count[1h]))"
    )
    assert to_promql(b.last_value(dcgm.XID_ERRORS, [], 3600, ("gpu",))) == (
        "max by (gpu) (last_over_time(DCGM_FI_DEV_XID_ERRORS[1h]))"
    )


def test_share_at_or_below_matches_every_spelling_of_the_bound() -> None:
    share = b.share_at_or_below(vllm.REQUEST_PARAMS_MAX_TOKENS, 20, PRO, 3600)
    bucket = "vllm:request_params_max_tokens_bucket"
    assert to_promql(share) == (
        f'sum(increase({bucket}{{pod_name=~"pro-model-.*",le=~"20\\\\.0|20"}}[1h])) / '
        f'sum(increase({bucket}{{pod_name=~"pro-model-.*",le="+Inf"}}[1h]))'
    )


@pytest.mark.parametrize(
    ("bound", "spellings"),
    [
        (0.001, ("0.001",)),
        (1, ("1.0", "1")),
        (2560, ("2560.0", "2560")),
        (100000, ("100000.0", "100000")),
        (1e6, ("1e+06", "1000000", "1000000.0")),
        (8589934592, ("8.589934592e+09", "8589934592", "8589934592.0")),
        (float("inf"), ("+Inf",)),
    ],
)
def test_bucket_bound_spellings(bound: float, spellings: tuple[str, ...]) -> None:
    # The first spelling is prometheus_client's floatToGoString, as vLLM exposes it.
    assert b.bucket_bound_spellings(bound) == spellings


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: b.increase_total(vllm.NUM_REQUESTS_RUNNING, [], 60), "needs a counter"),
        (lambda: b.per_second(dcgm.PROF_PCIE_TX_BYTES, [], 60), "already a per-second rate"),
        (lambda: b.increase_total(dcgm.NVLINK_BANDWIDTH_TOTAL, [], 60), "never rate()"),
        (lambda: b.histogram_mean(vllm.GENERATION_TOKENS, [], 60), "needs a histogram"),
        (lambda: b.sample_mean(vllm.GENERATION_TOKENS, [], 60), "needs a gauge"),
        (lambda: b.sample_mean(vllm.TIME_TO_FIRST_TOKEN, [], 60), "needs a gauge"),
        (lambda: b.histogram_quantile_merged(vllm.TIME_TO_FIRST_TOKEN, 95, [], 60), "[0, 1]"),
        (lambda: b.histogram_quantile_merged(vllm.TIME_TO_FIRST_TOKEN, 0.9, [], -1), "positive"),
        (lambda: b.bucket_bound_spellings(float("-inf")), "not an upper bound"),
        (lambda: vllm.TIME_TO_FIRST_TOKEN.select(), "select part"),
        (lambda: vllm.GENERATION_TOKENS.select(part="sum"), "has no 'sum' part"),
    ],
)
def test_wrong_family_types_are_refused(build: object, message: str) -> None:
    assert callable(build)
    with pytest.raises(QueryError) as info:
        build()
    assert message in str(info.value)


RATE_GAUGES = [f for f in FAMILIES if f.already_rate]


def test_rate_gauges_of_the_catalogue_are_marked() -> None:
    # Rates DCGM exposes as bytes/s or MiB/s gauges, whatever type the exporter declares.
    for family in (dcgm.PROF_PCIE_TX_BYTES, dcgm.PROF_PCIE_RX_BYTES, dcgm.NVLINK_BANDWIDTH_TOTAL):
        assert family in RATE_GAUGES
        assert family.type is MetricType.GAUGE
        assert family.unit.endswith("_per_second")
    assert dcgm.NVLINK_BANDWIDTH_TOTAL.declared_type == "counter"


@pytest.mark.parametrize("family", RATE_GAUGES, ids=lambda f: f.name)
@pytest.mark.parametrize("builder", [b.increase_total, b.per_second, b.resets_total])
def test_counter_builders_refuse_rate_gauges_naming_them(family: Family, builder: object) -> None:
    assert callable(builder)
    with pytest.raises(QueryError) as info:
        builder(family, PRO, 300)
    assert family.name in str(info.value)
    assert "already a per-second rate" in str(info.value)
    # The right reduction of a rate gauge is its sample mean: no rate() anywhere.
    assert "rate(" not in to_promql(b.sample_mean(family, PRO, 300))


def test_family_resolves_against_available_names() -> None:
    legacy = {"vllm:gpu_cache_usage_perc", "vllm:num_requests_running"}
    assert vllm.KV_CACHE_USAGE.resolve(legacy).name == "vllm:gpu_cache_usage_perc"
    both = legacy | {"vllm:kv_cache_usage_perc"}
    assert vllm.KV_CACHE_USAGE.resolve(both) is vllm.KV_CACHE_USAGE
    old_itl = {"vllm:time_per_output_token_seconds_bucket"}
    assert vllm.INTER_TOKEN_LATENCY.resolve(old_itl).name == "vllm:time_per_output_token_seconds"


def test_family_resolution_failure_names_what_was_tried() -> None:
    from inference_obs.errors import NoDataError

    with pytest.raises(NoDataError) as info:
        vllm.KV_CACHE_USAGE.resolve({"something_else"})
    assert "vllm:kv_cache_usage_perc" in str(info.value)
    assert "vllm:gpu_cache_usage_perc" in str(info.value)


def test_label_schemes_resolve_against_available_labels() -> None:
    from inference_obs.metrics import resolve_label

    assert resolve_label(dcgm.HOSTNAME_LABELS, {"gpu", "hostname"}) == "hostname"
    assert resolve_label(dcgm.HOSTNAME_LABELS, {"gpu", "Hostname"}) == "Hostname"
    assert resolve_label(dcgm.POD_LABELS, {"exported_pod", "pod"}) == "pod"
    assert resolve_label(dcgm.POD_LABELS, {"exported_pod"}) == "exported_pod"


def test_family_rules() -> None:
    # A family is a definition, not a query: a bad one is a ConfigurationError.
    with pytest.raises(ConfigurationError, match=r"only histograms .* \(it is gauge\)"):
        Family("x", MetricType.GAUGE, "ratio", "h", "vllm", buckets=(1.0,))
    with pytest.raises(ConfigurationError, match=r"vllm exposes counters .*; name it vllm:x_total"):
        Family("vllm:x", MetricType.COUNTER, "tokens", "h", "vllm")
    with pytest.raises(ConfigurationError, match=r"buckets \(2\.0, 1\.0\) must be strictly"):
        Family("x", MetricType.HISTOGRAM, "s", "h", "vllm", buckets=(2.0, 1.0))


def test_an_unknown_family_name_is_a_configuration_error() -> None:
    assert find_family("vllm:e2e_request_latency_seconds_bucket").name == (
        "vllm:e2e_request_latency_seconds"
    )
    with pytest.raises(ConfigurationError, match="'vllm:nope' is not a family of the catalogue"):
        find_family("vllm:nope")


def _every_builder(family: Family) -> list[object]:
    matchers = [Matcher.prefix("pod", "pro-"), Matcher.not_equal("namespace", 'x"y')]
    if family.type is MetricType.COUNTER and not family.already_rate:
        return [
            b.increase_total(family, matchers, 3600, ("model_name",)),
            b.per_second(family, matchers, 300),
            b.resets_total(family, matchers, 3600),
        ]
    if family.type is MetricType.HISTOGRAM:
        return [
            b.histogram_mean(family, matchers, 3600, ("pod",)),
            b.histogram_count(family, matchers, 3600),
            b.histogram_quantile_merged(family, 0.99, matchers, 3600, ("pod",)),
            b.share_at_or_below(family, 1e6, matchers, 3600),
            b.sample_count(family, matchers, 3600),
        ]
    return [
        b.sample_mean(family, matchers, 3600, ("pod",)),
        b.maximum(family, matchers, 60),
        b.sample_count(family, matchers, 3600),
        b.last_value(family, matchers, 60, ("pod",)),
    ]


def test_every_builder_of_every_family_parses() -> None:
    import promql_parser

    from inference_obs.metrics import FAMILIES
    from inference_obs.query import Expr

    rendered = 0
    for family in FAMILIES:
        for expr in _every_builder(family):
            assert isinstance(expr, Expr)
            promql_parser.parse(to_promql(expr))
            rendered += 1
    assert rendered >= 3 * len(FAMILIES)
