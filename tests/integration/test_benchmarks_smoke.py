"""The benchmark runners that start Prometheus or promtool, at a size of seconds: they run,
print their medians, ratios and mode, and the engine agrees with the server (timings
unchecked)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks import dataset_load, engine, fleet_scale, frames, live_link, live_report

pytestmark = pytest.mark.integration

TINY = ["--gpus-per-replica", "1", "--hours", "0.25", "--interval", "15"]
TWO = ["--replicas", "2", *TINY, "--repeats", "1"]


@pytest.mark.parametrize(
    ("run", "argv", "printed"),
    [
        (
            dataset_load.main,
            TWO,
            ["read_dataset, no cache", "read_dataset, cache filled", "promtool backfill (peer)",
             "promtool / read_dataset >= 10x", "x CPU", "mode: 3 sides interleaved",
             "load average"],
        ),
        (
            frames.main,
            TWO,
            ["peer: json.loads + MetricRangeDataFrame", "x) ours", "(goal >= 20x",
             "in CPU time", "(goal <= 1.5x)", "mode: 5 sides interleaved", "load average"],
        ),
        (
            live_report.main,
            ["--sizes", "2,3", *TINY],
            ["=== 2 replicas", "=== 3 replicas", "by analysis (build_report, tagged)",
             "of the raw fetch", "requests grew by", "sampled shares read H100: per scrape",
             "mode: exact counts of requests and bytes, not timed"],
        ),
        (
            live_link.main,
            ["--repeats", "1", "--delay-ms", "5"],
            ["over the link / direct = ", "(goal <= 3x", "recorded run over the link",
             "\nlatency ", "\ncomparison checks ", "whole report", "critical path: "],
        ),
    ],
    ids=["dataset_load", "frames", "live_report", "live_link"],
)  # fmt: skip
def test_runner_prints_its_comparison(
    run: Callable[[list[str]], None],
    argv: list[str],
    printed: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    run(argv)
    out = capsys.readouterr().out
    for phrase in printed:
        assert phrase in out


def test_engine_agrees_with_the_server(capsys: pytest.CaptureFixture[str]) -> None:
    engine.main([*TWO, "--warmup", "0"])
    out = capsys.readouterr().out
    # Both modes, with their goals, and no timed call used a kept answer.
    assert "cold: prometheus / engine median" in out
    assert "(goal >= 5x)" in out
    assert "(goal >= 10x)" in out
    assert "new evaluator: prometheus / engine median" in out
    assert "(goal >= 2x)" in out
    assert "kept answers used by timed calls: cold 0, new evaluator 0" in out
    rows = [line for line in out.splitlines() if line.startswith(("vllm_", "dcgm_"))]
    assert len(rows) == 2 * len(engine.QUERIES)
    assert all(line.endswith("yes") for line in rows), out


def test_fleet_scale_counts_a_live_report_s_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--sizes", "2,3", *TINY, "--repeats", "1", "--largest-repeats", "1"]
    fleet_scale.main([*argv, "--modes", "live,cold", "--fleets", str(tmp_path)])
    out = capsys.readouterr().out
    assert "2 replicas: " in out
    assert "loaded into VictoriaMetrics in" in out
    live = [line.split() for line in out.splitlines() if line.split()[2:3] == ["live"]]
    assert [row[0] for row in live] == ["2", "3"]
    # The store counted the report's queries: a report asks dozens at least.
    assert all(int(row[7]) > 10 for row in live)
    assert "live client peak MiB by replicas: 2: " in out
