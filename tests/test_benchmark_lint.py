"""The lint benchmark runs at a size of a second and prints its medians (timings not checked)."""

from __future__ import annotations

import pytest

from benchmarks import lint


def test_lint_benchmark_prints_medians_and_its_goal(capsys: pytest.CaptureFixture[str]) -> None:
    lint.main(["--panels", "20", "--repeats", "1", "--warmup", "0"])
    out = capsys.readouterr().out
    assert out.startswith("dashboard: 20 panels, 60 queries")
    assert "ours: lint, end to end" in out
    assert "(goal < 1000 ms)" in out
    assert "peer: promql-parser (Rust) parse" in out


def test_the_generated_dashboard_has_the_panels_asked_for() -> None:
    model = lint.dashboard(200)
    panels = [p for p in model["panels"] if p["type"] != "row"]
    assert len(panels) == 200
    assert sum(len(p["targets"]) for p in panels) == 600
