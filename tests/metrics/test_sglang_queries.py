"""The SGLang standard queries: well-formed, reading only the catalogue, right on real text.

The data are nine scrapes, 15 s apart, of one SGLang server: the real scheduler
gauges of an SGLang 0.5.1 ``/metrics`` answer
(``tests/fixtures/real/sglang_0_5_tp_rank.prom``) with their values set per
scrape, and the tokenizer counters and histograms SGLang exports beside them,
written with the same labels (``is_streaming`` and ``cache_source`` splits
included) and advanced by known amounts each scrape. The retraction counter is
written as SGLang 0.5.7+ writes it on a server with two DP ranks of two TP
ranks each: every TP rank of a DP rank counts the same retractions. Each query
is evaluated over the 120 s from the first scrape to the last, so every counter
changes by exactly eight steps; each expected value is worked out by hand in
the comment beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import promql_parser
import pytest

from inference_obs.engine.rules import Rules
from inference_obs.metrics import STANDARD_QUERIES, family, sglang
from inference_obs.metrics.family import Family
from inference_obs.metrics.sglang_queries import SGLANG_QUERIES
from inference_obs.metrics.standard_query import StandardQuery
from inference_obs.query import Aggregate, Expr, Matcher, Range, parse, to_promql
from inference_obs.query.walk import children, selectors
from inference_obs.samples import Vector
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.scrape_files import dataset_from_scrapes
from tests import exposition
from tests.source.fake_exporters import real_text

T0 = 1_777_636_800  # 2026-05-01T12:00:00Z
STEP_S = 15
SCRAPES = 9  # eight steps
WINDOW_S = 120.0
END = T0 + STEP_S * (SCRAPES - 1)
REAL = real_text("sglang_0_5_tp_rank.prom")
SCHED = 'engine_type="unified",model_name="Qwen-32B",pp_rank="0"'
TOK = 'engine_type="unified",model_name="Qwen-32B"'
STREAM, BATCH = f'{TOK},is_streaming="true"', f'{TOK},is_streaming="false"'

# Scheduler gauges per scrape; the real answer has running 1.0 and token_usage 0.0 first.
# No maximum sits on the first scrape, which Prometheus 3's left-open window leaves out.
RUNNING = (1, 4, 2, 6, 3, 2, 1, 2, 3)
WAITING = (0, 3, 7, 1, 0, 2, 0, 0, 1)
TOKEN_USAGE = (0.0, 0.2, 0.55, 0.3, 0.1, 0.4, 0.2, 0.1, 0.0)

# Histogram observations added each scrape, as (value, how many), per labelled series.
TTFT = ((STREAM, ((0.05, 6), (0.3, 3))), (BATCH, ((0.7, 1),)))
ITL = ((TOK, ((0.005, 30), (0.03, 10))),)
E2E = ((STREAM, ((1.5, 5),)), (BATCH, ((3.0, 3),)))
QUEUE = ((f'{SCHED},tp_rank="0"', ((0.0, 4), (0.003, 4), (0.07, 2))),)

# (DP rank, TP rank, retractions a step): each TP rank of a DP rank counts that DP rank's.
RETRACTIONS = ((0, 0, 3), (0, 1, 3), (1, 2, 1), (1, 3, 1))


def _gauges(n: int) -> list[str]:
    """The real gauge lines, with scrape ``n``'s values, and the queue gauge beside them."""
    out = []
    for line in REAL.splitlines():
        if line.startswith("sglang:num_running_reqs{"):
            line = line.replace("} 1.0", f"}} {RUNNING[n]}.0")
        elif line.startswith("sglang:token_usage{"):
            line = line.replace("} 0.0", f"}} {TOKEN_USAGE[n]!r}")
        out.append(line)
    return [
        *out,
        "# TYPE sglang:num_queue_reqs gauge",
        f'sglang:num_queue_reqs{{{SCHED},tp_rank="0"}} {WAITING[n]}.0',
    ]


def _scrape(n: int) -> str:
    lines = _gauges(n)
    lines += exposition.counter(
        "sglang:prompt_tokens_total", [(STREAM, 1e5, 2400), (BATCH, 5e4, 600)], n
    )
    lines += exposition.counter(
        "sglang:generation_tokens_total", [(STREAM, 4e4, 900), (BATCH, 2e4, 300)], n
    )
    lines += exposition.counter("sglang:num_requests_total", [(STREAM, 900, 8), (BATCH, 400, 2)], n)
    lines += exposition.counter(
        "sglang:cached_tokens_total",
        [(f'{TOK},cache_source="device"', 3e4, 1200), (f'{TOK},cache_source="host"', 9e3, 300)],
        n,
    )
    lines += exposition.counter(
        "sglang:num_retracted_requests_total",
        [(f'{SCHED},dp_rank="{dp}",tp_rank="{tp}"', 5, step) for dp, tp, step in RETRACTIONS],
        n,
    )
    lines += _histogram(sglang.TIME_TO_FIRST_TOKEN, TTFT, n)
    lines += _histogram(sglang.INTER_TOKEN_LATENCY, ITL, n)
    lines += _histogram(sglang.E2E_REQUEST_LATENCY, E2E, n)
    lines += _histogram(sglang.QUEUE_TIME, QUEUE, n)
    return "\n".join(lines) + "\n"


def _histogram(
    family_: Family, series: Sequence[tuple[str, Sequence[tuple[float, int]]]], n: int
) -> list[str]:
    """``family_`` on its default buckets after ``n`` scrapes."""
    return exposition.histogram(family_.name, family_.buckets or (), series, n)


@pytest.fixture(scope="module")
def scrapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sglang-queries")
    saved = folder / "scrapes.prom"
    saved.write_text(
        "".join(
            f"# SCRAPE {T0 + STEP_S * n} sglang=http://10.0.0.1:30000/metrics\n" + _scrape(n)
            for n in range(SCRAPES)
        )
    )
    dataset_from_scrapes([saved], folder / "ds")
    return folder / "ds"


# Worked out by hand from the steps above (eight of them in the window).
EXPECTED = {
    # TTFT: 48 at 0.05 s, 24 at 0.3 s (streamed), 8 at 0.7 s (not streamed): 80 requests.
    "sglang_ttft_mean_seconds": (48 * 0.05 + 24 * 0.3 + 8 * 0.7) / 80,
    # rank 40 of the 48 in (0, 0.1]: 0.1 * 40 / 48.
    "sglang_ttft_p50_seconds": 0.1 * 40 / 48,
    # rank 76 in (0.6, 0.8] (72 below, 8 in it): 0.6 + 0.2 * 4 / 8.
    "sglang_ttft_p95_seconds": 0.7,
    # rank 79.2: 0.6 + 0.2 * 7.2 / 8.
    "sglang_ttft_p99_seconds": 0.78,
    # ITL: 240 tokens at 5 ms, 80 at 30 ms.
    "sglang_itl_mean_seconds": (240 * 0.005 + 80 * 0.03) / 320,
    # rank 160 in (4, 6] ms (240 in it): 4 + 2 * 160 / 240 ms.
    "sglang_itl_p50_seconds": 0.004 + 0.002 * 160 / 240,
    # rank 304 in (25, 30] ms (240 below, 80 in it): 25 + 5 * 64 / 80 ms.
    "sglang_itl_p95_seconds": 0.029,
    # rank 316.8: 25 + 5 * 76.8 / 80 ms.
    "sglang_itl_p99_seconds": 0.0298,
    # E2E: 40 at 1.5 s (streamed), 24 at 3 s (not streamed).
    "sglang_e2e_mean_seconds": (40 * 1.5 + 24 * 3.0) / 64,
    # rank 32 in (1, 2] (40 in it): 1 + 32 / 40.
    "sglang_e2e_p50_seconds": 1.8,
    # rank 60.8 in (2, 4] (40 below, 24 in it): 2 + 2 * 20.8 / 24.
    "sglang_e2e_p95_seconds": 2 + 2 * 20.8 / 24,
    # rank 63.36: 2 + 2 * 23.36 / 24.
    "sglang_e2e_p99_seconds": 2 + 2 * 23.36 / 24,
    # Queue: 32 at 0 s, 32 at 3 ms, 16 at 70 ms.
    "sglang_queue_mean_seconds": (32 * 0.003 + 16 * 0.07) / 80,
    # rank 40 in (1, 5] ms (32 below, 32 in it): 1 + 4 * 8 / 32 ms.
    "sglang_queue_p50_seconds": 0.002,
    # rank 76 in (50, 100] ms (64 below, 16 in it): 50 + 50 * 12 / 16 ms.
    "sglang_queue_p95_seconds": 0.0875,
    # rank 79.2: 50 + 50 * 15.2 / 16 ms.
    "sglang_queue_p99_seconds": 0.0975,
    # Both is_streaming series: 8 * (2400 + 600) prompt tokens in 120 s.
    "sglang_prompt_tokens_per_second": 8 * 3000 / 120,
    # 8 * (900 + 300) output tokens in 120 s.
    "sglang_generation_tokens_per_second": 8 * 1200 / 120,
    # 8 * (8 + 2) finished requests.
    "sglang_finished_requests_increase": 80,
    # Every tier: (1200 device + 300 host) over 3000 prompt tokens a step.
    "sglang_prefix_cache_hit_ratio": 0.5,
    # The GPU radix cache alone: 1200 over 3000.
    "sglang_device_prefix_cache_hit_ratio": 0.4,
    "sglang_running_requests_max": 6,
    "sglang_waiting_requests_max": 7,
    "sglang_kv_cache_usage_max": 0.55,
    # Once per DP rank: 8 * (3 + 1) = 32; summing the TP ranks' copies would give 64.
    "sglang_retractions_increase": 32,
}


def test_every_sglang_query_is_standard_and_has_a_worked_value() -> None:
    assert set(SGLANG_QUERIES) <= set(STANDARD_QUERIES)
    assert {q.key for q in SGLANG_QUERIES} == set(EXPECTED)
    assert all(q.key.startswith("sglang_") for q in SGLANG_QUERIES)


@pytest.mark.parametrize("query", SGLANG_QUERIES, ids=lambda q: q.key)
def test_renders_to_promql_both_parsers_accept(query: StandardQuery) -> None:
    deployment = [Matcher.equal("namespace", "inference"), Matcher.prefix("pod", "qwen-")]
    for matchers, by in (((), query.default_by), (deployment, ())):
        text = to_promql(query.expr(matchers, 300.0, by))
        promql_parser.parse(text)  # raises on a syntax error
        assert to_promql(parse(text)) == text


@pytest.mark.parametrize("query", SGLANG_QUERIES, ids=lambda q: q.key)
def test_reads_only_its_catalogue_families(query: StandardQuery) -> None:
    names = {s.metric for s in selectors(query.expr())}
    assert names
    # family() raises for a name outside the catalogue; a histogram part finds its family.
    read = {family(str(name)) for name in names}
    assert all(f.exporter == "sglang" for f in read)
    assert read == set(query.families)


def _per_rank_sums(expr: Expr, collapsed: bool = False) -> list[str]:
    """Per-rank counters under a ``sum`` with no ``max without`` the rank labels between."""
    if isinstance(expr, Range) and expr.selector.metric in sglang.PER_RANK_COPIES:
        return [] if collapsed else [str(expr.selector.metric)]
    if isinstance(expr, Aggregate):
        if expr.op == "max" and set(sglang.RANK_LABELS) <= set(expr.without or ()):
            collapsed = True
        elif expr.op == "sum":
            collapsed = False
    return [name for child in children(expr) for name in _per_rank_sums(child, collapsed)]


def test_per_rank_walk_finds_a_plain_sum() -> None:
    plain = parse("sum(increase(sglang:num_retracted_requests_total[5m]))")
    assert _per_rank_sums(plain) == [sglang.NUM_RETRACTED_REQUESTS.name]
    tp_only = parse("sum(max without (tp_rank) (increase(sglang:prefetched_tokens_total[5m])))")
    assert _per_rank_sums(tp_only) == [sglang.PREFETCHED_TOKENS.name]


@pytest.mark.parametrize("query", SGLANG_QUERIES, ids=lambda q: q.key)
def test_never_sums_a_per_rank_counter_over_ranks(query: StandardQuery) -> None:
    for by in (query.default_by, (), ("model_name", "dp_rank")):
        assert _per_rank_sums(query.expr(by=by)) == []


def _value(source: DatasetSource, query: StandardQuery) -> float:
    answer = source.instant(query.expr(window=WINDOW_S), END).value
    assert isinstance(answer, Vector)
    (value,) = answer.as_dict().items()
    labels, number = value
    assert dict(labels) == {"model_name": "Qwen-32B"}
    return number


@pytest.mark.parametrize("rules", [Rules.PROMETHEUS_2, Rules.PROMETHEUS_3])
def test_values_on_real_sglang_text(scrapes: Path, rules: Rules) -> None:
    source = DatasetSource(scrapes, rules=rules)
    got = {q.key: _value(source, q) for q in SGLANG_QUERIES}
    assert got == pytest.approx(EXPECTED, rel=1e-9)
