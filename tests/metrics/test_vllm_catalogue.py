"""The vLLM catalogue against released bucket sets (published expositions: test_expositions).

Expected numbers are written out from vLLM 0.33.0's ``vllm/v1/metrics/buckets.py``
and the connector sources, independently of the catalogue code.
"""

from __future__ import annotations

import itertools
from collections import Counter
from types import ModuleType

import pytest

import inference_obs.metrics as catalogue
from inference_obs.metrics import vllm, vllm_connectors, vllm_optional
from inference_obs.metrics.family import Family, MetricType

MODULES = (vllm, vllm_optional, vllm_connectors)


def _module_families(module: ModuleType) -> list[Family]:
    return [value for value in vars(module).values() if isinstance(value, Family)]


# --- structure ----------------------------------------------------------------------------


def test_families_lists_every_module_constant_once() -> None:
    assert len(set(vllm.FAMILIES)) == len(vllm.FAMILIES)
    for module in MODULES:
        for family in _module_families(module):
            assert family in vllm.FAMILIES, family.name
    own = set(_module_families(vllm_optional)) | set(_module_families(vllm_connectors))
    assert set(vllm.FAMILIES) == set(_module_families(vllm)) | own


def test_no_two_families_share_a_name_or_alias() -> None:
    counts = Counter(n for f in catalogue.FAMILIES for n in f.names)
    assert [n for n, c in counts.items() if c > 1] == []


@pytest.mark.parametrize("family", vllm.FAMILIES, ids=lambda f: f.name)
def test_family_is_well_formed(family: Family) -> None:
    assert family.exporter == "vllm"
    assert family.help.strip()
    assert family.unit.strip()
    assert family.name.startswith(("vllm:", "http_"))
    if family.type is MetricType.COUNTER:
        assert family.name.endswith("_total")
    if family.type is MetricType.HISTOGRAM:
        assert not family.name.endswith(("_bucket", "_sum", "_count"))
        assert family.buckets, "every vLLM histogram has known default bounds"
    for alias in family.aliases:
        assert alias.name.startswith("vllm:")
        assert alias.versions.strip()
        if family.type is MetricType.COUNTER:
            assert alias.name.endswith("_total")
    for trap in family.traps:
        assert trap.strip()
        assert len(trap) <= 200
    if family.value_range is not None:
        assert family.value_range[0] <= family.value_range[1]
    assert not family.already_rate


def test_standard_labels() -> None:
    assert vllm.STANDARD_LABELS == ("model_name", "engine")
    exceptions = {
        vllm.CACHE_CONFIG_INFO,
        vllm.LORA_REQUESTS_INFO,
        vllm.ADMISSION_REJECTIONS,
        vllm_optional.TOOL_CALL_PARSER_INVOCATIONS,
        vllm_optional.WEBSOCKET_CONNECTIONS_ACTIVE,
        vllm_optional.WEBSOCKET_CONNECTIONS,
    }
    for family in vllm.FAMILIES:
        if family in exceptions or family.name.startswith("http_"):
            continue
        assert family.labels[:2] == ("model_name", "engine"), family.name
    assert "engine" not in vllm.ADMISSION_REJECTIONS.labels
    assert "model_name" not in vllm.LORA_REQUESTS_INFO.labels
    assert "model_name" not in vllm.CACHE_CONFIG_INFO.labels
    assert "engine" in vllm.CACHE_CONFIG_INFO.labels
    assert "num_gpu_blocks" in vllm.CACHE_CONFIG_INFO.labels


@pytest.mark.parametrize(
    ("family", "label"),
    [
        (vllm.REQUEST_SUCCESS, "finished_reason"),
        (vllm.NUM_REQUESTS_WAITING_BY_REASON, "reason"),
        (vllm.PROMPT_TOKENS_BY_SOURCE, "source"),
        (vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS, "position"),
        (vllm.MOONCAKE_STORE_OPERATION_TIME, "operation"),
        (vllm.MOONCAKE_STORE_OPERATION, "status"),
        (vllm.MOONCAKE_STORE_OPERATION_FAILED_KEYS, "operation"),
        (vllm.WATERMARK_REQUESTS, "status"),
    ],
)
def test_extra_labels(family: Family, label: str) -> None:
    assert label in family.labels


# --- semantics ----------------------------------------------------------------------------


def test_iteration_tokens_is_a_histogram_named_total() -> None:
    assert vllm.ITERATION_TOKENS.name == "vllm:iteration_tokens_total"
    assert vllm.ITERATION_TOKENS.type is MetricType.HISTOGRAM
    assert vllm.ITERATION_TOKENS.series_name("count") == "vllm:iteration_tokens_total_count"


def test_kv_cache_usage_is_a_fraction_with_its_old_name() -> None:
    family = vllm.KV_CACHE_USAGE
    assert family.name == "vllm:kv_cache_usage_perc"
    assert family.unit == "ratio"
    assert family.value_range == (0, 1)
    assert "vllm:gpu_cache_usage_perc" in family.names
    assert family.since is not None
    assert "0.9.2" in family.since
    old = family.resolve({"vllm:gpu_cache_usage_perc", "vllm:num_requests_running"})
    assert old.name == "vllm:gpu_cache_usage_perc"


def test_prefix_cache_renames_note_blocks_versus_tokens() -> None:
    for family, old in (
        (vllm.PREFIX_CACHE_QUERIES, "vllm:gpu_prefix_cache_queries_total"),
        (vllm.PREFIX_CACHE_HITS, "vllm:gpu_prefix_cache_hits_total"),
    ):
        assert family.unit == "tokens"
        (alias,) = family.aliases
        assert alias.name == old
        assert "block" in alias.note


def test_time_per_output_token_is_an_alias_of_itl_only() -> None:
    assert "vllm:time_per_output_token_seconds" in vllm.INTER_TOKEN_LATENCY.names
    assert "vllm:time_per_output_token_seconds" not in vllm.REQUEST_TIME_PER_OUTPUT_TOKEN.names
    (alias,) = vllm.INTER_TOKEN_LATENCY.aliases
    assert "request_time_per_output_token_seconds" in alias.note
    assert vllm.REQUEST_TIME_PER_OUTPUT_TOKEN.buckets == vllm.INTER_TOKEN_LATENCY.buckets


def test_queue_time_has_its_v0_name() -> None:
    assert "vllm:time_in_queue_requests" in vllm.REQUEST_QUEUE_TIME.names


def test_request_success_counts_every_reason() -> None:
    assert any("whatever the reason" in t for t in vllm.REQUEST_SUCCESS.traps)


@pytest.mark.parametrize(
    ("family", "words"),
    [
        (vllm.REQUEST_TIME_PER_OUTPUT_TOKEN, "record 0"),  # T1
        (vllm.INTER_TOKEN_LATENCY, "not per token"),  # T2
        (vllm.KV_CACHE_USAGE, "0-1 fraction"),  # T3
        (vllm.PREFIX_CACHE_QUERIES, "last prompt token"),  # T4
        (vllm.PROMPT_TOKENS, "restart"),  # T5
        (vllm.REQUEST_SUCCESS, "whatever the reason"),  # T6
        (vllm.REQUEST_PROMPT_TOKENS, "max_model_len"),  # T7
        (vllm.REQUEST_QUEUE_TIME, "0.3 s"),  # T8
        (vllm.E2E_REQUEST_LATENCY, "abandoned"),  # T9
        (vllm.TIME_TO_FIRST_TOKEN, "tokenisation"),  # T10
        (vllm.REQUEST_QUEUE_TIME, "preemption"),  # T11
        (vllm.ITERATION_TOKENS, "engine steps per second"),  # T12
        (vllm.PROMPT_TOKENS, "local_compute"),  # T13
        (vllm.NUM_REQUESTS_WAITING, "sample"),  # T14
        (vllm.ITERATION_TOKENS, "several API servers"),  # T15
        (vllm.LORA_REQUESTS_INFO, "largest"),  # T16
    ],
)
def test_traps_are_attached(family: Family, words: str) -> None:
    assert any(words in trap for trap in family.traps), (family.name, words)


@pytest.mark.parametrize(
    ("family", "flag"),
    [
        (vllm.SPEC_DECODE_NUM_DRAFTS, "--speculative-config"),
        (vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS, "--speculative-config"),
        (vllm.KV_BLOCK_LIFETIME, "--kv-cache-metrics"),
        (vllm.ESTIMATED_FLOPS_PER_GPU, "--enable-mfu-metrics"),
        (vllm.NIXL_XFER_TIME, "--kv-transfer-config"),
        (vllm.MOONCAKE_STORE_OPERATION, "--kv-transfer-config"),
        (vllm.KV_OFFLOAD_LOAD_BYTES, "--kv-transfer-config"),
        (vllm.EXTERNAL_PREFIX_CACHE_HITS, "--kv-transfer-config"),
        (vllm.LORA_REQUESTS_INFO, "--enable-lora"),
        (vllm.CORRUPTED_REQUESTS, "VLLM_COMPUTE_NANS_IN_LOGITS"),
    ],
)
def test_optional_families_say_when_they_exist(family: Family, flag: str) -> None:
    assert family.condition is not None
    assert flag in family.condition


def test_core_families_are_unconditional() -> None:
    for family in (vllm.PROMPT_TOKENS, vllm.TIME_TO_FIRST_TOKEN, vllm.KV_CACHE_USAGE):
        assert family.condition is None


@pytest.mark.parametrize(
    ("family", "version"),
    [
        (vllm.NUM_REQUESTS_WAITING_BY_REASON, "0.20.0"),
        (vllm.PROMPT_TOKENS_BY_SOURCE, "0.16.0"),
        (vllm.PROMPT_TOKENS_CACHED, "0.16.0"),
        (vllm.PROMPT_TOKENS_RECOMPUTED, "0.16.0"),
        (vllm.REQUEST_PREFILL_KV_COMPUTED_TOKENS, "0.13.0"),
        (vllm.REQUEST_NUM_PREEMPTIONS, "0.30.0"),
        (vllm.INTER_TOKEN_LATENCY, "0.10.2"),
        (vllm.REQUEST_TIME_PER_OUTPUT_TOKEN, "0.11.0"),
        (vllm.ESTIMATED_FLOPS_PER_GPU, "0.17.0"),
        (vllm.ESTIMATED_READ_BYTES_PER_GPU, "0.17.0"),
        (vllm.ESTIMATED_WRITE_BYTES_PER_GPU, "0.17.0"),
    ],
)
def test_since(family: Family, version: str) -> None:
    assert family.since is not None
    assert version in family.since


def test_prompt_tokens_recomputed_says_when_it_was_removed() -> None:
    # Present from 0.16.0 through the 0.19 releases; vllm-project/vllm#38709 removed it.
    condition = vllm.PROMPT_TOKENS_RECOMPUTED.condition or ""
    assert "0.16.0 to 0.19.x" in condition
    assert "0.20.0" in condition


def test_unit_words() -> None:
    assert vllm.NUM_PREEMPTIONS.unit == "events"
    assert vllm.REQUEST_SUCCESS.unit == "requests"
    assert vllm.SPEC_DECODE_NUM_DRAFTS.unit == "steps"
    assert vllm.LORA_REQUESTS_INFO.unit == "unixtime"
    assert vllm.CACHE_CONFIG_INFO.type is MetricType.INFO
    assert vllm.KV_OFFLOAD_LOAD_TIME.unit == "seconds"
    assert vllm.KV_OFFLOAD_STORE_BYTES.unit == "bytes"
    for family in vllm.FAMILIES:
        if family.name.endswith("_seconds"):
            assert family.unit == "seconds", family.name


# --- buckets (numbers copied from the released vLLM sources) -------------------------------


def test_ttft_buckets() -> None:
    assert vllm.TTFT_BUCKETS == (
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
        7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
    )  # fmt: skip
    assert vllm.TIME_TO_FIRST_TOKEN.buckets == vllm.TTFT_BUCKETS


def test_inter_token_latency_buckets() -> None:
    assert vllm.INTER_TOKEN_LATENCY_BUCKETS == (
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
        10.0, 20.0, 40.0, 80.0,
    )  # fmt: skip


def test_request_latency_buckets() -> None:
    buckets = vllm.REQUEST_LATENCY_BUCKETS
    assert len(buckets) == 21
    assert buckets[:4] == (0.3, 0.5, 0.8, 1.0)
    assert buckets[-3:] == (960.0, 1920.0, 7680.0)
    for family in (
        vllm.E2E_REQUEST_LATENCY,
        vllm.REQUEST_QUEUE_TIME,
        vllm.REQUEST_PREFILL_TIME,
        vllm.REQUEST_DECODE_TIME,
        vllm.REQUEST_INFERENCE_TIME,
    ):
        assert family.buckets == buckets, family.name


def test_token_count_buckets() -> None:
    assert vllm.ITERATION_TOKENS_BUCKETS == (
        1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
    )  # fmt: skip
    assert vllm.REQUEST_PARAMS_N_BUCKETS == (1, 2, 5, 10, 20)
    assert vllm.REQUEST_NUM_PREEMPTIONS_BUCKETS == (1, 2, 3, 4, 5, 10, 20)
    assert vllm.KV_CACHE_RESIDENCY_BUCKETS[:3] == (0.001, 0.002, 0.005)
    assert vllm.KV_CACHE_RESIDENCY_BUCKETS[-3:] == (600, 1200, 1800)
    assert len(vllm.KV_CACHE_RESIDENCY_BUCKETS) == 21


def test_request_tokens_buckets_follow_max_model_len() -> None:
    assert vllm.REQUEST_TOKENS_BUCKETS == (
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000,
    )  # fmt: skip
    assert vllm.request_tokens_buckets(4096) == (
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000,
    )  # fmt: skip
    assert vllm.request_tokens_buckets(8192)[-1] == 5000
    assert vllm.request_tokens_buckets(32768)[-2:] == (10000, 20000)
    assert vllm.request_tokens_buckets(131072) == vllm.REQUEST_TOKENS_BUCKETS
    for family in (
        vllm.REQUEST_PROMPT_TOKENS,
        vllm.REQUEST_GENERATION_TOKENS,
        vllm.REQUEST_MAX_NUM_GENERATION_TOKENS,
        vllm.REQUEST_PARAMS_MAX_TOKENS,
        vllm.REQUEST_PREFILL_KV_COMPUTED_TOKENS,
    ):
        assert family.buckets == vllm.REQUEST_TOKENS_BUCKETS
        assert any("max_model_len" in t for t in family.traps)


def test_connector_buckets() -> None:
    assert vllm_connectors.NIXL_XFER_TIME_BUCKETS == (
        0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0,
    )  # fmt: skip
    assert vllm_connectors.NIXL_POST_TIME_BUCKETS[0] == 0.001
    transfer = vllm_connectors.KV_TRANSFER_BYTES_BUCKETS
    assert transfer[0] == 2048
    assert transfer[-1] == 8589934592
    assert len(transfer) == 12
    assert all(b / a == 4 for a, b in itertools.pairwise(transfer))
    assert vllm.MOONCAKE_STORE_OPERATION_TIME.buckets == (
        0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0,
    )  # fmt: skip
    assert vllm_connectors.KV_OFFLOAD_SIZE_BUCKETS[0] == 1e6
    assert vllm_connectors.KV_OFFLOAD_SIZE_BUCKETS[-1] == 200e6
    assert vllm.NIXL_XFER_TIME.buckets == vllm_connectors.NIXL_XFER_TIME_BUCKETS


def test_required_connector_and_mfu_families() -> None:
    names = {f.name for f in vllm.FAMILIES}
    for name in (
        "vllm:mooncake_store_operation_time_seconds",
        "vllm:mooncake_store_operation_total",
        "vllm:mooncake_store_operation_keys_total",
        "vllm:mooncake_store_operation_bytes_total",
        "vllm:mooncake_store_operation_failed_keys_total",
        "vllm:nixl_xfer_time_seconds",
        "vllm:nixl_num_failed_transfers_total",
        "vllm:kv_offload_load_bytes_total",
        "vllm:kv_offload_load_time_total",
        "vllm:kv_offload_store_bytes_total",
        "vllm:kv_offload_store_time_total",
        "vllm:estimated_flops_per_gpu_total",
        "vllm:estimated_read_bytes_per_gpu_total",
        "vllm:estimated_write_bytes_per_gpu_total",
    ):
        assert name in names
    assert vllm.MOONCAKE_STORE_OPERATION_TIME.type is MetricType.HISTOGRAM


def test_cache_config_info_carries_the_kv_capacity_inputs() -> None:
    info = vllm.CACHE_CONFIG_INFO
    assert info.type is MetricType.INFO
    assert info.value_range == (1, 1)
    for label in ("block_size", "num_gpu_blocks", "cache_dtype", "enable_prefix_caching"):
        assert label in info.labels
    # Capacity is per engine and never multiplied by TP: the trap must say both.
    (capacity,) = [t for t in info.traps if "num_gpu_blocks x block_size" in t]
    assert "never multiply by TP" in capacity
    by_source = vllm.PROMPT_TOKENS_BY_SOURCE
    assert by_source.type is MetricType.COUNTER
    assert by_source.unit == "tokens"
    assert any("admission" in t for t in by_source.traps)
