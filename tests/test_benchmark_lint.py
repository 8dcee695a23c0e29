"""The lint benchmark runs at a size of a second and prints its medians (timings not checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import lint
from inference_obs.lint import lint_text
from inference_obs.lint.resolve import _resolve


def test_lint_benchmark_prints_medians_and_its_goal(capsys: pytest.CaptureFixture[str]) -> None:
    lint.main(["--panels", "20", "--repeats", "1", "--warmup-rounds", "0"])
    out = capsys.readouterr().out
    assert out.startswith("dashboard: 20 panels, 60 queries")
    assert "ours: lint, end to end" in out
    assert "(goal < 1000 ms)" in out
    assert "peer: promql-parser (Rust) parse" in out
    # What a user pays: the command in a fresh process, against the peer in one.
    assert "ours: inference-obs lint, a fresh process" in out
    assert "peer: python + promql-parser, a fresh process" in out
    assert "mode: 5 sides interleaved in one process" in out
    assert "lookups kept per process emptied before each lint" in out


def test_each_timed_lint_starts_with_no_lookup_kept(tmp_path: Path) -> None:
    # A command looks each name up once; a lint timed after others in one process
    # would find every name looked up already and flatter the command.
    text = json.dumps(lint.dashboard(20))
    _resolve.cache_clear()
    lint_text(text, "dashboard")
    one_lint = _resolve.cache_info()
    lint_text(text, "dashboard")  # the lookups kept: each name found again
    assert _resolve.cache_info().hits > one_lint.hits
    lint.sides(text, [], tmp_path)["lint"]()
    assert _resolve.cache_info() == one_lint  # emptied first, then filled by one lint


def test_the_generated_dashboard_has_the_panels_asked_for() -> None:
    model = lint.dashboard(200)
    panels = [p for p in model["panels"] if p["type"] != "row"]
    assert len(panels) == 200
    assert sum(len(p["targets"]) for p in panels) == 600
