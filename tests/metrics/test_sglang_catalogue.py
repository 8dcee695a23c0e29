"""The SGLang catalogue and its mapping to vLLM families.

Expected buckets, labels, versions and mappings are written out from the released
SGLang wheels (0.5.23's ``metrics_collector.py``; 0.5.1 to 0.5.22 for the first
release of each name), independently of the catalogue code.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest

from inference_obs.metrics import sglang, sglang_kv, sglang_vllm, vllm
from inference_obs.metrics.family import Family, MetricType

SGLANG_NAMES = {f.name for f in sglang.FAMILIES}
VLLM_NAMES = {f.name for f in vllm.FAMILIES}


def test_families_lists_every_module_constant_once() -> None:
    constants = {v for m in (sglang, sglang_kv) for v in vars(m).values() if isinstance(v, Family)}
    assert len(set(sglang.FAMILIES)) == len(sglang.FAMILIES)
    assert constants == set(sglang.FAMILIES)
    assert set(sglang_kv.FAMILIES) < set(sglang.FAMILIES)


def test_no_two_families_share_a_name_or_alias() -> None:
    counts = Counter(n for f in sglang.FAMILIES for n in f.names)
    assert [n for n, c in counts.items() if c > 1] == []


@pytest.mark.parametrize("family", sglang.FAMILIES, ids=lambda f: f.name)
def test_family_is_well_formed(family: Family) -> None:
    assert family.exporter == "sglang"
    assert family.name.startswith("sglang:")
    assert family.help.strip()
    assert family.unit.strip()
    assert family.condition is not None
    assert "--enable-metrics" in family.condition
    if family.labels[0] == "storage_backend":
        assert family.labels == sglang.STORAGE_LABELS
    elif family.labels[0] == "cache_type":
        assert family.labels[:4] == sglang.CACHE_LABELS
    else:
        assert family.labels[:2] == ("model_name", "engine_type")
    if family.type is MetricType.COUNTER:
        assert family.name.endswith("_total")
    if family.type is MetricType.HISTOGRAM:
        assert not family.name.endswith(("_bucket", "_sum", "_count"))
        assert family.buckets is not None
        if not family.buckets:
            assert any("le" in t for t in family.traps), "unlisted buckets need a trap"
    if family.already_rate:
        assert family.type is MetricType.GAUGE
    if family.unit == "ratio":
        assert family.value_range == (0, 1)
    for trap in family.traps:
        assert trap.strip()
        assert len(trap) <= 200


def test_label_sets() -> None:
    assert sglang.SCHEDULER_LABELS == (
        "model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "dp_rank",
    )  # fmt: skip
    # "name": the model's label in SGLang 0.3 (tests/fixtures/real/sglang_0_3_name_label.prom).
    assert sglang.STREAMING_LABELS == ("model_name", "engine_type", "name", "is_streaming")
    for family in (
        sglang.TIME_TO_FIRST_TOKEN,
        sglang.E2E_REQUEST_LATENCY,
        sglang.REQUEST_TIME_PER_OUTPUT_TOKEN,
        sglang.PROMPT_TOKENS,
        sglang.GENERATION_TOKENS,
        sglang.NUM_REQUESTS,
    ):
        assert family.labels == sglang.STREAMING_LABELS, family.name
    for family in (sglang.NUM_RUNNING_REQS, sglang.NUM_QUEUE_REQS, sglang.TOKEN_USAGE):
        assert family.labels == sglang.SCHEDULER_LABELS, family.name
    assert "cache_source" in sglang.CACHED_TOKENS.labels
    assert "stage" in sglang.PER_STAGE_REQ_LATENCY.labels


def test_storage_and_cache_label_sets() -> None:
    # StorageMetricsCollector labels (set by the cache controller), then the radix
    # cache's: neither carries model_name.
    ranks = ("tp_rank", "dp_rank", "pp_rank", "pp_size", "attn_cp_rank", "attn_cp_size")
    assert ("storage_backend", *ranks) == sglang.STORAGE_LABELS
    assert sglang.PREFETCHED_TOKENS.labels == sglang.STORAGE_LABELS
    assert sglang.BACKUPED_TOKENS.labels == sglang.STORAGE_LABELS
    assert sglang.LOAD_BACK_TOKENS.labels == ("cache_type", "tp_rank", "pp_rank", "dp_rank", "pool")
    for family in (sglang.PREFETCHED_TOKENS, sglang.BACKUPED_TOKENS, sglang.LOAD_BACK_TOKENS):
        assert "model_name" not in family.labels, family.name
    # The transfer histograms come from the scheduler.
    assert sglang.KV_TRANSFER_LATENCY_MS.labels == sglang.SCHEDULER_LABELS
    assert sglang_kv._SCHEDULER_LABELS == sglang.SCHEDULER_LABELS


def test_gauges_without_multiprocess_mode_have_pid() -> None:
    assert sglang.NUM_RETRACTED_REQS.labels == (*sglang.SCHEDULER_LABELS, "pid")
    assert sglang.NUM_PAUSED_REQS.labels == (*sglang.SCHEDULER_LABELS, "pid")


def test_ratios_and_rates() -> None:
    assert sglang.TOKEN_USAGE.value_range == (0, 1)
    assert sglang.CACHE_HIT_RATE.value_range == (0, 1)
    assert sglang.GEN_THROUGHPUT.already_rate
    assert sglang.KV_TRANSFER_LATENCY_MS.unit == "milliseconds"
    assert sglang.KV_TRANSFER_SPEED_GB_S.unit == "gigabytes_per_second"
    assert not sglang.KV_TRANSFER_SPEED_GB_S.already_rate  # a histogram of speeds
    assert sglang.NUM_RETRACTED_REQS.type is MetricType.GAUGE
    assert sglang.NUM_RETRACTED_REQUESTS.type is MetricType.COUNTER
    assert sglang.NUM_RETRACTED_REQUESTS.name == "sglang:num_retracted_requests_total"
    assert sglang.NUM_RETRACTED_REQUESTS.labels == sglang.SCHEDULER_LABELS
    assert any("num_retracted_requests_total" in t for t in sglang.NUM_RETRACTED_REQS.traps)
    assert any("average" in t for t in sglang.CACHE_HIT_RATE.traps)


# --- buckets (numbers copied from the released SGLang sources) ----------------------------


def test_ttft_buckets() -> None:
    assert sglang.TIME_TO_FIRST_TOKEN.buckets == (
        0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
    )  # fmt: skip


def test_inter_token_latency_buckets() -> None:
    assert sglang.INTER_TOKEN_LATENCY.buckets == (
        0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
        0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0,
    )  # fmt: skip


def test_e2e_buckets() -> None:
    buckets = sglang.E2E_REQUEST_LATENCY.buckets
    assert buckets is not None
    assert buckets[:6] == (0.1, 0.2, 0.4, 0.6, 0.8, 1)
    assert buckets[-5:] == (400, 600, 1200, 1800, 2400)
    assert len(buckets) == 22


def test_queue_time_buckets() -> None:
    buckets = sglang.QUEUE_TIME.buckets
    assert buckets is not None
    assert buckets[:14] == (0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10)
    assert 600 in buckets
    assert buckets[-1] > 600


def test_kv_transfer_families_are_histograms() -> None:
    # Gauges until 0.5.9; histograms with these defaults from 0.5.10.
    latency, speed = sglang.KV_TRANSFER_LATENCY_MS, sglang.KV_TRANSFER_SPEED_GB_S
    assert latency.type is MetricType.HISTOGRAM
    assert speed.type is MetricType.HISTOGRAM
    assert latency.buckets == (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
    assert speed.buckets == (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400)
    assert latency.series_name("bucket") == "sglang:kv_transfer_latency_ms_bucket"
    for family in (latency, speed):
        assert any("0.5.2-0.5.9" in t and "gauge" in t for t in family.traps), family.name
        assert any("last chunk" in t for t in family.traps), family.name


def test_tpot_shares_the_itl_buckets() -> None:
    assert sglang.REQUEST_TIME_PER_OUTPUT_TOKEN.buckets == sglang.INTER_TOKEN_LATENCY.buckets


def test_token_length_buckets() -> None:
    expected = (
        *(100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000),
        *(10000, 12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000),
        *(60000, 80000, 100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000),
    )
    for family in (
        sglang.PROMPT_TOKENS_HISTOGRAM,
        sglang.UNCACHED_PROMPT_TOKENS_HISTOGRAM,
        sglang.GENERATION_TOKENS_HISTOGRAM,
    ):
        assert family.buckets == expected, family.name


def test_per_stage_buckets_are_exponential() -> None:
    buckets = sglang.PER_STAGE_REQ_LATENCY.buckets
    assert buckets is not None
    assert len(buckets) == 30
    assert buckets[0] == pytest.approx(0.001)
    for low, high in itertools.pairwise(buckets):
        assert high / low == pytest.approx(1.62)
    assert math.isfinite(buckets[-1])


# --- versions (first released wheel exporting the name) ----------------------------------


@pytest.mark.parametrize(
    ("family", "since"),
    [
        (sglang.KV_TRANSFER_LATENCY_MS, "SGLang 0.5.10"),
        (sglang.KV_TRANSFER_SPEED_GB_S, "SGLang 0.5.10"),
        (sglang.NUM_RETRACTED_REQUESTS, "SGLang 0.5.7"),
        (sglang.NUM_RETRACTED_INPUT_TOKENS, "SGLang 0.5.7"),
        (sglang.NUM_RETRACTED_OUTPUT_TOKENS, "SGLang 0.5.7"),
        (sglang.NUM_RETRACTED_REQS, "SGLang 0.5.2"),
        (sglang.NUM_PAUSED_REQS, "SGLang 0.5.3"),
        (sglang.PREFETCHED_TOKENS, "SGLang 0.5.2"),
        (sglang.BACKUPED_TOKENS, "SGLang 0.5.2"),
        (sglang.LOAD_BACK_TOKENS, "SGLang 0.5.6"),
        (sglang.HICACHE_HOST_USED_TOKENS, "SGLang 0.5.10"),
        (sglang.QUEUE_TIME, "SGLang 0.5.3"),
        (sglang.PER_STAGE_REQ_LATENCY, "SGLang 0.5.3"),
        (sglang.REQUEST_TIME_PER_OUTPUT_TOKEN, "SGLang 0.5.22"),
        (sglang.NUM_PREFILL_BOOTSTRAP_QUEUE_REQS, "SGLang 0.5.12"),
        (sglang.NUM_PREFILL_INFLIGHT_QUEUE_REQS, "SGLang 0.5.2"),
        (sglang.KV_USED_TOKENS, "SGLang 0.5.11"),
        (sglang.MAX_TOTAL_NUM_TOKENS, "SGLang 0.5.6"),
        (sglang.SPEC_ACCEPT_RATE, "SGLang 0.5.4"),
        (sglang.ESTIMATED_FLOPS_PER_GPU, "SGLang 0.5.10"),
        (sglang.UNCACHED_PROMPT_TOKENS_HISTOGRAM, "SGLang 0.5.12"),
        # In 0.5.1 already; no earlier wheel was read.
        (sglang.NUM_GRAMMAR_QUEUE_REQS, None),
        (sglang.NUM_TRANSFER_FAILED_REQS, None),
    ],
    ids=lambda v: v.name if isinstance(v, Family) else str(v),
)
def test_since(family: Family, since: str | None) -> None:
    assert family.since == since


def test_old_prefill_queue_names_are_aliases() -> None:
    (bootstrap,) = sglang.NUM_PREFILL_BOOTSTRAP_QUEUE_REQS.aliases
    assert (bootstrap.name, bootstrap.removed_in) == (
        "sglang:num_prefill_prealloc_queue_reqs",
        "0.5.12",
    )
    (inflight,) = sglang.NUM_PREFILL_INFLIGHT_QUEUE_REQS.aliases
    assert (inflight.name, inflight.removed_in) == (
        "sglang:num_prefill_infight_queue_reqs",
        "0.5.2",
    )


# --- ranks that repeat a count ------------------------------------------------------------


def test_per_rank_copies() -> None:
    assert {
        "sglang:num_retracted_requests_total",
        "sglang:num_retracted_input_tokens_total",
        "sglang:num_retracted_output_tokens_total",
        "sglang:prefetched_tokens_total",
        "sglang:load_back_tokens_total",
    } == sglang.PER_RANK_COPIES
    assert sglang.RANK_LABELS == ("tp_rank", "pp_rank", "moe_ep_rank", "attn_cp_rank")
    assert "dp_rank" not in sglang.RANK_LABELS  # DP ranks serve different requests
    for family in sglang.FAMILIES:
        if family.name in sglang.PER_RANK_COPIES:
            assert family.type is MetricType.COUNTER, family.name
            assert any("never sum" in t for t in family.traps), family.name


# --- mapping to vLLM ----------------------------------------------------------------------


def test_every_equivalent_is_a_real_pair() -> None:
    assert len(sglang_vllm.VLLM_EQUIVALENTS) >= 20
    for ours, (theirs, why) in sglang_vllm.VLLM_EQUIVALENTS.items():
        assert ours in SGLANG_NAMES, ours
        assert theirs in VLLM_NAMES, theirs
        assert why.endswith("."), why
        assert ". " not in why, why  # one sentence


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        ("sglang:time_to_first_token_seconds", "vllm:time_to_first_token_seconds"),
        ("sglang:inter_token_latency_seconds", "vllm:inter_token_latency_seconds"),
        (
            "sglang:request_time_per_output_token_seconds",
            "vllm:request_time_per_output_token_seconds",
        ),
        ("sglang:e2e_request_latency_seconds", "vllm:e2e_request_latency_seconds"),
        ("sglang:queue_time_seconds", "vllm:request_queue_time_seconds"),
        ("sglang:num_running_reqs", "vllm:num_requests_running"),
        ("sglang:num_queue_reqs", "vllm:num_requests_waiting"),
        ("sglang:num_retracted_reqs", "vllm:num_preemptions_total"),
        ("sglang:num_retracted_requests_total", "vllm:num_preemptions_total"),
        ("sglang:token_usage", "vllm:kv_cache_usage_perc"),
        ("sglang:prompt_tokens_total", "vllm:prompt_tokens_total"),
        ("sglang:generation_tokens_total", "vllm:generation_tokens_total"),
        ("sglang:num_requests_total", "vllm:request_success_total"),
        ("sglang:cached_tokens_total", "vllm:prompt_tokens_cached_total"),
        ("sglang:prompt_tokens_histogram", "vllm:request_prompt_tokens"),
        ("sglang:uncached_prompt_tokens_histogram", "vllm:request_prefill_kv_computed_tokens"),
        ("sglang:generation_tokens_histogram", "vllm:request_generation_tokens"),
        ("sglang:estimated_flops_per_gpu_total", "vllm:estimated_flops_per_gpu_total"),
    ],
)
def test_known_equivalents(ours: str, theirs: str) -> None:
    assert sglang_vllm.VLLM_EQUIVALENTS[ours][0] == theirs


def test_differences_name_the_trap() -> None:
    itl = sglang_vllm.VLLM_EQUIVALENTS["sglang:inter_token_latency_seconds"][1]
    assert "per token" in itl
    assert "step" in itl
    tpot = sglang_vllm.VLLM_EQUIVALENTS["sglang:request_time_per_output_token_seconds"][1]
    assert "0" in tpot
    assert "skips" in tpot
    assert "is_streaming" in sglang_vllm.VLLM_EQUIVALENTS["sglang:time_to_first_token_seconds"][1]
    retractions = sglang_vllm.VLLM_EQUIVALENTS["sglang:num_retracted_requests_total"][1]
    assert "TP rank" in retractions
    assert "not the sum" in retractions
    transfer = sglang_vllm.VLLM_EQUIVALENTS["sglang:kv_transfer_latency_ms"][1]
    assert "ms" in transfer
    assert "gauge" not in transfer
