"""An SGLang deployment gets the report's numbers, read through the SGLang families.

The data are nine scrapes, 15 s apart, of one SGLang server (TP 2): the real
scheduler gauges of an SGLang 0.5.1 ``/metrics`` answer
(``tests/fixtures/real/sglang_0_5_tp_rank.prom``) with their values set per
scrape, and the tokenizer counters and histograms SGLang exports beside them,
written with the same labels and advanced by known amounts each scrape. The
window (the dataset's, 120 s) runs from the first scrape to the last, so each
counter's change over it is exactly eight steps; every expected value below is
worked out by hand from those steps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.cli import main
from inference_obs.deployment import Deployment, Engine, Hardware
from inference_obs.metrics import sglang
from inference_obs.report import Report
from inference_obs.report.from_source import report
from inference_obs.report.markdown import to_markdown
from inference_obs.report.sections import sections
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.scrape_files import dataset_from_scrapes
from tests import exposition
from tests.source.fake_exporters import real_text

T0 = 1_777_636_800  # 2026-05-01T12:00:00Z
STEP_S = 15
SCRAPES = 9  # eight steps: 120 s
REAL = real_text("sglang_0_5_tp_rank.prom")
SCHED = 'engine_type="unified",model_name="Qwen-32B",pp_rank="0"'
TOK = 'engine_type="unified",model_name="Qwen-32B"'

# Scheduler gauges per scrape (the real answer has running 1.0 and token_usage 0.0 first).
RUNNING = (1, 3, 2, 4, 2, 3, 1, 2, 5)
WAITING = (0, 2, 5, 1, 0, 3, 0, 0, 1)
TOKEN_USAGE = (0.0, 0.1, 0.3, 0.2, 0.5, 0.4, 0.2, 0.1, 0.0)

# Histograms: observations added each scrape, as (value, how many).
TTFT = ((0.05, 10), (0.15, 10), (0.3, 10))
ITL = ((0.005, 50), (0.015, 50))
E2E = ((0.5, 10), (1.5, 20))
QUEUE = ((0.002, 20), (0.03, 10))


def _gauges(n: int) -> str:
    """The real gauge lines, with scrape ``n``'s running requests and KV usage."""
    out = []
    for line in REAL.splitlines():
        if line.startswith("sglang:num_running_reqs{"):
            line = line.replace("} 1.0", f"}} {RUNNING[n]}.0")
        elif line.startswith("sglang:token_usage{"):
            line = line.replace("} 0.0", f"}} {TOKEN_USAGE[n]!r}")
        out.append(line)
    out += [
        "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.",
        "# TYPE sglang:num_queue_reqs gauge",
        f'sglang:num_queue_reqs{{{SCHED},tp_rank="0"}} {WAITING[n]}.0',
    ]
    return "\n".join(out)


def _scrape(n: int) -> str:
    lines = [_gauges(n)]
    stream, batch = f'{TOK},is_streaming="true"', f'{TOK},is_streaming="false"'
    lines += exposition.counter(
        "sglang:prompt_tokens_total", [(stream, 1e5, 2000), (batch, 5e4, 1000)], n
    )
    lines += exposition.counter(
        "sglang:generation_tokens_total", [(stream, 4e4, 1000), (batch, 2e4, 500)], n
    )
    lines += exposition.counter(
        "sglang:num_requests_total", [(stream, 900, 20), (batch, 400, 10)], n
    )
    lines += exposition.counter(
        "sglang:cached_tokens_total",
        [(f'{TOK},cache_source="device"', 3e4, 1200), (f'{TOK},cache_source="host"', 9e3, 300)],
        n,
    )
    # Both TP ranks count every retraction (SGLang 0.5.7 and later).
    lines += exposition.counter(
        "sglang:num_retracted_requests_total",
        [(f'{SCHED},tp_rank="0"', 7, 2), (f'{SCHED},tp_rank="1"', 7, 2)],
        n,
    )
    ttft, e2e = sglang.TIME_TO_FIRST_TOKEN.name, sglang.E2E_REQUEST_LATENCY.name
    lines += exposition.histogram(ttft, sglang.TTFT_BUCKETS, [(stream, TTFT)], n)
    lines += exposition.histogram(
        sglang.INTER_TOKEN_LATENCY.name, sglang.INTER_TOKEN_LATENCY_BUCKETS, [(TOK, ITL)], n
    )
    lines += exposition.histogram(e2e, sglang.E2E_REQUEST_LATENCY_BUCKETS, [(stream, E2E)], n)
    lines += exposition.histogram(
        sglang.QUEUE_TIME.name, sglang.QUEUE_TIME_BUCKETS, [(f'{SCHED},tp_rank="0"', QUEUE)], n
    )
    return "\n".join(lines) + "\n"


def _saved(folder: Path) -> Path:
    saved = folder / "scrapes.prom"
    saved.write_text(
        "".join(
            f"# SCRAPE {T0 + STEP_S * n} sglang=http://10.0.0.1:30000/metrics\n" + _scrape(n)
            for n in range(SCRAPES)
        )
    )
    return saved


QWEN = Deployment(
    name="QWEN",
    selector={"model_name": "Qwen-32B"},
    hardware=Hardware(gpu_model="NVIDIA H100", gpus_per_replica=2),
    engine=Engine(name="sglang", version="0.5.7"),
    config={"tensor_parallel_size": 2},
)


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """The report of a dataset whose deployments file declares the engine SGLang."""
    folder = tmp_path_factory.mktemp("sglang")
    dataset = dataset_from_scrapes([_saved(folder)], folder / "ds", deployments=[QWEN])
    return report(DatasetSource(dataset))


def _values(rep: Report) -> dict[str, float | None]:
    """Each value by key; a latency quantile's is what Prometheus's ``histogram_quantile``
    returns (``promql_value``, hand-derivable), after checking that the value shown, an
    estimate, lies in the bucket that must hold the quantile."""
    out: dict[str, float | None] = {}
    for m in rep.measurements():
        out[m.key] = m.value
        if m.provenance.promql_value is not None:
            assert m.bounds is not None
            assert m.value is not None
            assert m.bounds.lower <= m.value <= m.bounds.upper, m.key
            out[m.key] = m.provenance.promql_value
    return out


def test_latency_from_the_sglang_histograms(declared: Report) -> None:
    v = _values(declared)
    # TTFT: 240 observations, 80 each at 0.05, 0.15, 0.3 s.
    assert v["QWEN/latency/ttft_mean"] == pytest.approx(80 * (0.05 + 0.15 + 0.3) / 240)
    # rank 120 in (0.1, 0.2] (80 below): 0.1 + 0.1 * 40 / 80.
    assert v["QWEN/latency/ttft_p50"] == pytest.approx(0.15)
    # rank 216 in (0.2, 0.4] (160 below): 0.2 + 0.2 * 56 / 80.
    assert v["QWEN/latency/ttft_p90"] == pytest.approx(0.34)
    # ITL: 400 at 5 ms, 400 at 15 ms: mean 10 ms; rank 720 in (10, 15] ms (400 below).
    assert v["QWEN/latency/itl_mean"] == pytest.approx(0.010)
    assert v["QWEN/latency/itl_p90"] == pytest.approx(0.010 + 0.005 * 320 / 400)
    # E2E: 80 at 0.5 s, 160 at 1.5 s; rank 120 in (1, 2] (80 below): 1 + 40 / 160.
    assert v["QWEN/latency/e2e_mean"] == pytest.approx((80 * 0.5 + 160 * 1.5) / 240)
    assert v["QWEN/latency/e2e_p50"] == pytest.approx(1.25)
    # Queue: 160 at 2 ms, 80 at 30 ms; rank 120 in (1, 5] ms (none below): 1 + 4 * 120 / 160 ms.
    assert v["QWEN/latency/queue_mean"] == pytest.approx((160 * 0.002 + 80 * 0.03) / 240)
    assert v["QWEN/latency/queue_p50"] == pytest.approx(0.004)


def test_throughput_from_the_sglang_counters(declared: Report) -> None:
    v = _values(declared)
    # Both is_streaming series: 8 * (1000 + 500) output, 8 * (2000 + 1000) prompt tokens.
    assert v["QWEN/throughput/output_tokens"] == pytest.approx(12_000)
    assert v["QWEN/throughput/prompt_tokens"] == pytest.approx(24_000)
    assert v["QWEN/throughput/finished_requests"] == pytest.approx(8 * 30)
    assert v["QWEN/throughput/output_tokens_per_second"] == pytest.approx(12_000 / 120)
    assert v["QWEN/throughput/requests_per_second"] == pytest.approx(240 / 120)


def test_cache_from_the_sglang_counters(declared: Report) -> None:
    v = _values(declared)
    # The GPU radix cache's hits only (1200 a step, not the host tier's 300) over all prompt
    # tokens (3000 a step).
    assert v["QWEN/cache/prefix_cache_hit_rate"] == pytest.approx(1200 / 3000)
    # Two TP ranks count each retraction: 8 * 2 once, not 32.
    assert v["QWEN/cache/preemptions"] == pytest.approx(16)


def test_queueing_from_the_sglang_gauges(declared: Report) -> None:
    v = _values(declared)
    assert v["QWEN/queueing/peak_waiting"] == max(WAITING)
    assert v["QWEN/throughput/waiting_max"] == max(WAITING)
    assert v["QWEN/throughput/kv_cache_usage_max"] == pytest.approx(max(TOKEN_USAGE))


def test_families_without_an_sglang_equivalent_read_no_data(declared: Report) -> None:
    by_key = {m.key: m for m in declared.measurements()}
    # SGLang's stages are not vLLM's prefill and decode phases: no number rather than a wrong one.
    for key in ("QWEN/latency/prefill_mean", "QWEN/latency/decode_mean"):
        assert by_key[key].value is None
        assert by_key[key].status == "no_data"
        assert all("sglang:" not in text for text in by_key[key].provenance.promql)


def test_each_number_names_the_sglang_family_it_read(declared: Report) -> None:
    by_key = {m.key: m for m in declared.measurements()}
    ttft = by_key["QWEN/latency/ttft_p50"]
    assert any("sglang:time_to_first_token_seconds_bucket" in p for p in ttft.provenance.promql)
    (note,) = [a.message for a in ttft.annotations if a.kind == "engine_equivalent"]
    assert "sglang:time_to_first_token_seconds for vllm:time_to_first_token_seconds" in note
    assert "buckets start at 0.1 s" in note  # what differs, from the equivalence table
    hits = by_key["QWEN/cache/prefix_cache_hit_rate"]
    assert any('cache_source=~"device|"' in p for p in hits.provenance.promql)
    preempted = by_key["QWEN/cache/preemptions"]
    assert "max without (tp_rank, pp_rank, moe_ep_rank" in preempted.provenance.promql[0]
    # The appendix lists what was read, once per deployment and message.
    text = to_markdown(sections(declared))
    assert "QWEN: read SGLang's sglang:num_queue_reqs for vllm:num_requests_waiting" in text


def test_the_cli_path_proposes_sglang(tmp_path: Path) -> None:
    """No deployments file: ``dataset from-scrapes`` proposes the model's deployment."""
    out = tmp_path / "ds"
    assert main(["dataset", "from-scrapes", str(_saved(tmp_path)), "--out", str(out)]) == 0
    rep = report(DatasetSource(read_dataset(out)))
    (name,) = {m.deployment for m in rep.measurements()}
    v = _values(rep)
    assert v[f"{name}/throughput/output_tokens"] == pytest.approx(12_000)
    assert v[f"{name}/latency/ttft_p50"] == pytest.approx(0.15)
    assert v[f"{name}/cache/prefix_cache_hit_rate"] == pytest.approx(0.4)


def test_an_sglang_server_found_from_its_series(tmp_path: Path) -> None:
    """Declared vLLM, but its series are all sglang: ones: read as SGLang."""
    wrong = QWEN.model_copy(update={"engine": Engine(name="vllm")})
    dataset = dataset_from_scrapes([_saved(tmp_path)], tmp_path / "ds", deployments=[wrong])
    v = _values(report(DatasetSource(dataset)))
    assert v["QWEN/throughput/output_tokens"] == pytest.approx(12_000)
    assert v["QWEN/latency/e2e_p50"] == pytest.approx(1.25)
    assert v["QWEN/cache/preemptions"] == pytest.approx(16)
