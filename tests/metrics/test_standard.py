"""Every standard query renders to PromQL that an independent parser accepts."""

from __future__ import annotations

import promql_parser
import pytest

from inference_obs.errors import QueryError
from inference_obs.metrics import FAMILIES, STANDARD_QUERIES, standard_query
from inference_obs.metrics.family import MetricType
from inference_obs.query import Matcher, to_promql

DEPLOYMENT = [Matcher.prefix("pod", 'pro"model\n'), Matcher.equal("namespace", "inference")]


@pytest.mark.parametrize("query", STANDARD_QUERIES, ids=lambda q: q.key)
def test_standard_query_parses(query: object) -> None:
    from inference_obs.metrics import StandardQuery

    assert isinstance(query, StandardQuery)
    for matchers, window in (([], 3600.0), (DEPLOYMENT, 300.0)):
        text = to_promql(query.expr(matchers, window))
        promql_parser.parse(text)  # raises on a syntax error
        for family in query.families:
            assert family.name in text


def test_standard_query_keys_are_unique_and_documented() -> None:
    keys = [q.key for q in STANDARD_QUERIES]
    assert len(keys) == len(set(keys))
    for query in STANDARD_QUERIES:
        assert query.title
        assert query.unit
        assert query.description
        assert query.families


def test_every_standard_query_family_is_in_the_catalogue() -> None:
    for query in STANDARD_QUERIES:
        for family in query.families:
            assert family in FAMILIES


def test_grouping_can_be_overridden() -> None:
    query = standard_query("vllm_ttft_p95_seconds")
    assert to_promql(query.expr([], 3600, ())) == (
        "histogram_quantile(0.95, sum by (le) "
        "(increase(vllm:time_to_first_token_seconds_bucket[1h])))"
    )
    assert to_promql(query.expr([], 3600)) == (
        "histogram_quantile(0.95, sum by (le, model_name) "
        "(increase(vllm:time_to_first_token_seconds_bucket[1h])))"
    )


def test_acceptance_length_and_energy() -> None:
    assert to_promql(
        standard_query("vllm_spec_decode_mean_acceptance_length").expr([], 60, ())
    ) == (
        "1 + sum(increase(vllm:spec_decode_num_accepted_tokens_total[1m])) / "
        "sum(increase(vllm:spec_decode_num_drafts_total[1m]))"
    )
    assert to_promql(standard_query("dcgm_energy_joules").expr([], 60, ())) == (
        "sum(increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[1m])) * 0.001"
    )


def test_no_standard_query_rates_a_gauge() -> None:
    for query in STANDARD_QUERIES:
        text = to_promql(query.expr())
        for family in query.families:
            if family.type is MetricType.GAUGE:
                assert f"rate({family.name}" not in text
                assert f"increase({family.name}" not in text


def test_unknown_key_lists_known_ones() -> None:
    with pytest.raises(QueryError, match="vllm_ttft_p95_seconds"):
        standard_query("nope")
