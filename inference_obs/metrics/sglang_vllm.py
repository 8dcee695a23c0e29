"""SGLang families mapped to the nearest vLLM family, with what differs.

Kept apart from :mod:`.sglang` because it is a relation between two
catalogues, not part of either: comparing an SGLang deployment with a vLLM
one starts here, and each entry says why the two numbers are not the same.
The report reads an SGLang deployment through
:mod:`~inference_obs.metrics.sglang_reading`, which takes from this table the
entries whose two families have one meaning and unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from inference_obs.metrics import vllm as v
from inference_obs.metrics.family import Family
from inference_obs.metrics.sglang import (
    BACKUPED_TOKENS,
    CACHE_HIT_RATE,
    CACHED_TOKENS,
    E2E_REQUEST_LATENCY,
    ESTIMATED_FLOPS_PER_GPU,
    ESTIMATED_READ_BYTES_PER_GPU,
    ESTIMATED_WRITE_BYTES_PER_GPU,
    GEN_THROUGHPUT,
    GENERATION_TOKENS,
    GENERATION_TOKENS_HISTOGRAM,
    INTER_TOKEN_LATENCY,
    KV_AVAILABLE_TOKENS,
    KV_EVICTABLE_TOKENS,
    KV_TRANSFER_LATENCY_MS,
    KV_USED_TOKENS,
    LOAD_BACK_TOKENS,
    MAX_TOTAL_NUM_TOKENS,
    NUM_ABORTED_REQUESTS,
    NUM_DECODE_PREALLOC_QUEUE_REQS,
    NUM_DECODE_TRANSFER_QUEUE_REQS,
    NUM_GRAMMAR_QUEUE_REQS,
    NUM_PREFILL_BOOTSTRAP_QUEUE_REQS,
    NUM_PREFILL_INFLIGHT_QUEUE_REQS,
    NUM_QUEUE_REQS,
    NUM_REQUESTS,
    NUM_RETRACTED_INPUT_TOKENS,
    NUM_RETRACTED_OUTPUT_TOKENS,
    NUM_RETRACTED_REQS,
    NUM_RETRACTED_REQUESTS,
    NUM_RUNNING_REQS,
    NUM_TRANSFER_FAILED_REQS,
    NUM_USED_TOKENS,
    PER_STAGE_REQ_LATENCY,
    PROMPT_TOKENS,
    PROMPT_TOKENS_HISTOGRAM,
    QUEUE_TIME,
    REQUEST_TIME_PER_OUTPUT_TOKEN,
    SPEC_ACCEPT_LENGTH,
    SPEC_ACCEPT_RATE,
    SPEC_VERIFY_CALLS,
    TIME_TO_FIRST_TOKEN,
    TOKEN_USAGE,
    UNCACHED_PROMPT_TOKENS_HISTOGRAM,
)

__all__ = ["VLLM_EQUIVALENTS"]

_SEPARATE_QUEUE = (
    "A queue SGLang keeps apart from num_queue_reqs: compare it only with the matching part "
    "of vLLM's waiting requests."
)
_KV_TOKENS = "Absolute tokens, while vLLM only exposes the used fraction of its block pool."
_SAME_ESTIMATE = "The same estimate, from SGLang's own cost model."
_EQUIVALENTS: dict[Family, tuple[Family, str]] = {
    TIME_TO_FIRST_TOKEN: (
        v.TIME_TO_FIRST_TOKEN,
        "SGLang's buckets start at 0.1 s (vLLM's at 1 ms) and it splits by is_streaming.",
    ),
    INTER_TOKEN_LATENCY: (
        v.INTER_TOKEN_LATENCY,
        "SGLang spreads each streamed gap over its tokens and observes once per token; vLLM "
        "observes once per engine step.",
    ),
    REQUEST_TIME_PER_OUTPUT_TOKEN: (
        v.REQUEST_TIME_PER_OUTPUT_TOKEN,
        "Same formula, but SGLang skips requests with at most one output token, aborted ones "
        "and prefill workers, where vLLM records 0 for short requests.",
    ),
    E2E_REQUEST_LATENCY: (
        v.E2E_REQUEST_LATENCY,
        "Buckets 0.1-2400 s against vLLM's 0.3-7680 s, and split by is_streaming.",
    ),
    QUEUE_TIME: (v.REQUEST_QUEUE_TIME, "Buckets from 0 s against vLLM's 0.3 s lowest bound."),
    PER_STAGE_REQ_LATENCY: (
        v.REQUEST_PREFILL_TIME,
        "SGLang's stages do not map one-to-one to vLLM's prefill, decode and inference times.",
    ),
    NUM_RUNNING_REQS: (v.NUM_REQUESTS_RUNNING, "Per scheduler report rather than per step."),
    NUM_QUEUE_REQS: (
        v.NUM_REQUESTS_WAITING,
        "Excludes the grammar and disaggregation queues, which SGLang reports separately.",
    ),
    NUM_GRAMMAR_QUEUE_REQS: (v.NUM_REQUESTS_WAITING, _SEPARATE_QUEUE),
    NUM_PREFILL_BOOTSTRAP_QUEUE_REQS: (v.NUM_REQUESTS_WAITING, _SEPARATE_QUEUE),
    NUM_PREFILL_INFLIGHT_QUEUE_REQS: (v.NUM_REQUESTS_WAITING, _SEPARATE_QUEUE),
    NUM_DECODE_PREALLOC_QUEUE_REQS: (v.NUM_REQUESTS_WAITING, _SEPARATE_QUEUE),
    NUM_DECODE_TRANSFER_QUEUE_REQS: (
        v.NUM_REQUESTS_KV_FETCH_BY_STAGE,
        "One queue, where vLLM splits KV-loading requests by stage.",
    ),
    NUM_RETRACTED_REQS: (v.NUM_PREEMPTIONS, "Retractions in the last report, not a counter."),
    NUM_RETRACTED_REQUESTS: (
        v.NUM_PREEMPTIONS,
        "Counted once by every TP rank, where vLLM counts once per engine: take the max over "
        "ranks, not the sum.",
    ),
    NUM_RETRACTED_INPUT_TOKENS: (v.NUM_PREEMPTIONS, "Counts tokens, not preemption events."),
    NUM_RETRACTED_OUTPUT_TOKENS: (v.NUM_PREEMPTIONS, "Counts tokens, not preemption events."),
    TOKEN_USAGE: (
        v.KV_CACHE_USAGE,
        "Both are 0-1, but SGLang counts tokens (fullest pool) and vLLM counts blocks.",
    ),
    NUM_USED_TOKENS: (v.KV_CACHE_USAGE, _KV_TOKENS),
    KV_USED_TOKENS: (v.KV_CACHE_USAGE, _KV_TOKENS),
    KV_AVAILABLE_TOKENS: (v.KV_CACHE_USAGE, _KV_TOKENS),
    KV_EVICTABLE_TOKENS: (v.KV_CACHE_USAGE, "vLLM counts evictable prefix blocks as free."),
    MAX_TOTAL_NUM_TOKENS: (
        v.CACHE_CONFIG_INFO,
        "Capacity in tokens; vLLM gives num_gpu_blocks and block_size as labels.",
    ),
    CACHE_HIT_RATE: (
        v.PREFIX_CACHE_HITS,
        "A precomputed per-interval ratio; vLLM gives hit and query counters to divide.",
    ),
    GEN_THROUGHPUT: (v.GENERATION_TOKENS, "A rate over the last log interval, not a counter."),
    SPEC_ACCEPT_LENGTH: (
        v.SPEC_DECODE_NUM_ACCEPTED_TOKENS,
        "A precomputed per-interval mean; vLLM gives counters (1 + accepted / drafts).",
    ),
    SPEC_ACCEPT_RATE: (
        v.SPEC_DECODE_NUM_ACCEPTED_TOKENS,
        "A precomputed per-interval ratio; vLLM gives accepted and draft token counters.",
    ),
    SPEC_VERIFY_CALLS: (
        v.SPEC_DECODE_NUM_DRAFTS,
        "Verification calls; vLLM counts the verification steps that carried a draft.",
    ),
    ESTIMATED_FLOPS_PER_GPU: (v.ESTIMATED_FLOPS_PER_GPU, _SAME_ESTIMATE),
    ESTIMATED_READ_BYTES_PER_GPU: (v.ESTIMATED_READ_BYTES_PER_GPU, _SAME_ESTIMATE),
    ESTIMATED_WRITE_BYTES_PER_GPU: (v.ESTIMATED_WRITE_BYTES_PER_GPU, _SAME_ESTIMATE),
    PROMPT_TOKENS: (v.PROMPT_TOKENS, "Counted at request completion, not prefill completion."),
    GENERATION_TOKENS: (v.GENERATION_TOKENS, "Counted at request completion."),
    NUM_REQUESTS: (v.REQUEST_SUCCESS, "No finished_reason label in SGLang."),
    NUM_ABORTED_REQUESTS: (v.REQUEST_SUCCESS, 'vLLM counts engine aborts as reason "abort".'),
    CACHED_TOKENS: (
        v.PROMPT_TOKENS_CACHED,
        "Counted per finished request; cache_source names tiers, not local vs external.",
    ),
    PROMPT_TOKENS_HISTOGRAM: (v.REQUEST_PROMPT_TOKENS, "Different default buckets."),
    UNCACHED_PROMPT_TOKENS_HISTOGRAM: (
        v.REQUEST_PREFILL_KV_COMPUTED_TOKENS,
        "Different default buckets.",
    ),
    GENERATION_TOKENS_HISTOGRAM: (v.REQUEST_GENERATION_TOKENS, "Different default buckets."),
    KV_TRANSFER_LATENCY_MS: (
        v.NIXL_XFER_TIME,
        "One observation per request in ms (often only its last chunk), where vLLM's NIXL "
        "histogram observes each transfer in seconds.",
    ),
    NUM_TRANSFER_FAILED_REQS: (v.NIXL_NUM_FAILED_TRANSFERS, "Counts requests, not transfers."),
    BACKUPED_TOKENS: (v.KV_OFFLOAD_STORE_BYTES, "Counts tokens, where vLLM counts bytes."),
    LOAD_BACK_TOKENS: (
        v.KV_OFFLOAD_LOAD_BYTES,
        "Counts tokens once per TP rank, where vLLM counts bytes once per engine.",
    ),
}
VLLM_EQUIVALENTS: Mapping[str, tuple[str, str]] = MappingProxyType(
    {ours.name: (theirs.name, why) for ours, (theirs, why) in _EQUIVALENTS.items()}
)
"""SGLang family name -> (nearest vLLM family name, what differs in one sentence)."""
