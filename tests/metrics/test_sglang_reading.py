"""The SGLang stand-ins of vLLM families: same meaning and unit, and how a question is rewritten."""

from __future__ import annotations

from inference_obs.metrics import sglang, vllm
from inference_obs.metrics.sglang_reading import (
    STAND_INS,
    UNIT_READINGS,
    read_as_sglang,
    without_splits,
)
from inference_obs.metrics.sglang_vllm import VLLM_EQUIVALENTS
from inference_obs.query import Matcher, count_over_time, increase, rate, to_promql
from inference_obs.samples import Labels


def test_each_stand_in_has_the_type_and_unit_of_the_family_it_replaces() -> None:
    for name, one in STAND_INS.items():
        assert one.asked.name == name
        assert one.read.exporter == "sglang"
        assert one.read.type is one.asked.type, name
        assert one.read.unit == one.asked.unit or name in UNIT_READINGS, name
    # The one unit read across: a retraction is one preemption event.
    assert set(UNIT_READINGS) == {vllm.NUM_PREEMPTIONS.name}


def test_stand_ins_come_from_the_equivalence_table_with_its_text() -> None:
    # The two local prefix-cache counters are the only pair the table does not give.
    extra = {vllm.PREFIX_CACHE_HITS.name, vllm.PREFIX_CACHE_QUERIES.name}
    for name, one in STAND_INS.items():
        if name in extra:
            continue
        assert VLLM_EQUIVALENTS[one.read.name] == (name, one.differs)


def test_precomputed_ratios_and_stage_latencies_stand_in_for_nothing() -> None:
    read = {one.read.name for one in STAND_INS.values()}
    for family in (
        sglang.CACHE_HIT_RATE,
        sglang.GEN_THROUGHPUT,
        sglang.SPEC_ACCEPT_RATE,
        sglang.PER_STAGE_REQ_LATENCY,
        sglang.NUM_ABORTED_REQUESTS,
        sglang.NUM_GRAMMAR_QUEUE_REQS,
    ):
        assert family.name not in read
    assert vllm.REQUEST_PREFILL_TIME.name not in STAND_INS


def test_histogram_parts_read_the_stand_in_and_unmapped_families_stay() -> None:
    m = (Matcher.equal("model_name", "q"),)
    asked = vllm.TIME_TO_FIRST_TOKEN.select(m, "bucket")
    assert to_promql(read_as_sglang(asked)) == (
        'sglang:time_to_first_token_seconds_bucket{model_name="q"}'
    )
    prefill = vllm.REQUEST_PREFILL_TIME.select(m, "count")
    assert read_as_sglang(prefill) is prefill


def test_split_series_are_summed_where_the_function_adds_up() -> None:
    asked = rate(vllm.PROMPT_TOKENS.select().over(60)).sum()
    assert to_promql(read_as_sglang(asked)) == (
        "sum(sum without (is_streaming, cache_source) (rate(sglang:prompt_tokens_total[1m])))"
    )
    # Counting samples does not add up over a split: left as asked.
    counted = count_over_time(vllm.PROMPT_TOKENS.select().over(60))
    assert to_promql(read_as_sglang(counted)) == "count_over_time(sglang:prompt_tokens_total[1m])"


def test_local_cache_hits_read_the_device_tier() -> None:
    asked = increase(vllm.PREFIX_CACHE_HITS.select().over(60))
    assert to_promql(read_as_sglang(asked)) == (
        "sum without (is_streaming, cache_source) "
        '(increase(sglang:cached_tokens_total{cache_source=~"device|"}[1m]))'
    )


def test_series_labels_lose_the_splits_of_stand_ins_only() -> None:
    streamed = Labels({"__name__": "sglang:prompt_tokens_total", "is_streaming": "true"})
    assert without_splits(streamed) == Labels({"__name__": "sglang:prompt_tokens_total"})
    other = Labels({"__name__": "sglang:num_queue_reqs", "is_streaming": "true"})
    assert without_splits(other) == other
