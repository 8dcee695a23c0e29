"""Families read under the name the data holds (metrics.renames)."""

from __future__ import annotations

from inference_obs.metrics import vllm
from inference_obs.metrics.renames import rename, rename_text, renames
from inference_obs.query import Selector, histogram_quantile, increase, to_promql

ITL = vllm.INTER_TOKEN_LATENCY.name
OLD_ITL = "vllm:time_per_output_token_seconds"


def test_an_older_name_is_read_only_where_the_newest_is_absent() -> None:
    assert renames({f"{OLD_ITL}_bucket", f"{OLD_ITL}_count"}) == {ITL: OLD_ITL}
    # Both present (vLLM 0.10.2 to 0.11 export both): the newest is read.
    assert renames({f"{OLD_ITL}_count", f"{ITL}_count"}) == {}
    assert renames({"vllm:num_requests_waiting"}) == {}


def test_every_histogram_part_follows_its_family() -> None:
    buckets = Selector(f"{ITL}_bucket").over(300)
    asked = histogram_quantile(0.9, increase(buckets).sum(by=("le",)))
    assert to_promql(rename(asked, {ITL: OLD_ITL})) == (
        f"histogram_quantile(0.9, sum by (le) (increase({OLD_ITL}_bucket[5m])))"
    )


def test_text_is_renamed_by_whole_names() -> None:
    names = {"vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc", ITL: OLD_ITL}
    text = f"max(vllm:kv_cache_usage_perc) + rate({ITL}_sum[1m]) + vllm:kv_cache_usage_perc_x"
    assert rename_text(text, names) == (
        f"max(vllm:gpu_cache_usage_perc) + rate({OLD_ITL}_sum[1m]) + vllm:kv_cache_usage_perc_x"
    )
