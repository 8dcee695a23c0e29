"""Retired families, renamed ones and the router's families do not collide with the catalogue."""

from __future__ import annotations

import re

import pytest

from inference_obs.errors import ConfigurationError
from inference_obs.metrics import FAMILIES, family, retired, vllm, vllm_router
from inference_obs.metrics.family import MetricType

CATALOGUE_NAMES = {name for f in FAMILIES for name in f.names}


def test_retired_names_are_not_families_and_replacements_name_real_ones() -> None:
    for gone in retired.RETIRED:
        assert gone.name not in CATALOGUE_NAMES
        for name in re.findall(r"(?:vllm|sglang):[a-z_]+", gone.replacement):
            assert family(name), name
        assert retired.version_key(gone.absent_from)


def test_vllm_renames_say_when_they_left() -> None:
    removed = {a.name: a for f in vllm.FAMILIES for a in f.aliases if a.removed_in}
    assert set(removed) == {
        "vllm:gpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:time_per_output_token_seconds",
        "vllm:time_in_queue_requests",
    }
    tpot = removed["vllm:time_per_output_token_seconds"]
    assert (tpot.hidden_in, tpot.removed_in) == ("0.12.0", "0.15.0")
    for alias in removed.values():
        assert alias.hidden_in is None or retired.version_key(
            alias.hidden_in
        ) < retired.version_key(alias.removed_in or "")


def test_router_families_share_names_only_where_the_router_does() -> None:
    shared = {f.name for f in vllm_router.ROUTER_FAMILIES} & CATALOGUE_NAMES
    assert shared == {
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_queries_total",
    }
    healthy = vllm_router.router_family("vllm:healthy_pods_total")
    assert healthy is not None
    assert healthy.type is MetricType.GAUGE
    latency = vllm_router.router_family("vllm:request_latency_seconds_bucket")
    assert latency is vllm_router.REQUEST_LATENCY
    assert vllm_router.router_family("vllm:kv_cache_usage_perc") is None


@pytest.mark.parametrize(
    ("text", "key"), [("0.12.0", (0, 12)), ("vLLM 0.9.2", (0, 9, 2)), ("1", (1,))]
)
def test_version_key(text: str, key: tuple[int, ...]) -> None:
    assert retired.version_key(text) == key


def test_version_key_refuses_words() -> None:
    with pytest.raises(ConfigurationError, match="version 'latest': expected numbers separated"):
        retired.version_key("latest")
