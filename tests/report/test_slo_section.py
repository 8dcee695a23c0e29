"""The SLOs section and its report.json keys, from ``inference-obs report --slo``.

On the bundled PRO 5000 vs H20 dataset: 1 s is a bucket bound of its TTFT
histogram, so ``ttft<=1s@99%`` is exact and equals the share of the requests
in ``requests.csv`` that the window's counters hold; 2 s lies between the 1 s
and 2.5 s bounds, so ``ttft<=2s`` is bounded and shown with its interval.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.cli import main
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.ground_truth import EXACT, truth

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("slo")
    argv = ["report", "--dataset", str(DATASET), "--out", str(out), "--quiet"]
    slos = ["--slo", "ttft<=1s@99%", "--slo", "ttft<=2s"]
    assert main([*argv, *slos, "--format", "md,json"]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    return text, json.loads((out / "report.json").read_text(encoding="utf-8"))


def test_the_section_shows_exact_and_bounded_attainment(
    written: tuple[str, dict[str, Any]],
) -> None:
    text, data = written
    section = text.split("\n## SLOs\n")[1].split("\n## ")[0]
    header, _, *rows = [line for line in section.splitlines() if line.startswith("|")]
    assert header == "| deployment | ttft ≤ 1 s, 99% | ttft ≤ 2 s |"
    h20 = next(r for r in rows if r.startswith("| H20 |"))
    exact, bounded = (c.strip() for c in h20.strip("|").split("|")[1:])
    m = {x["key"]: x for x in data["measurements"]}
    share = m["H20/slo/ttft_le_1s_attainment"]["value"]
    # By hand: the exact share as a percent, and (1 - share) / 1% as the budget spent.
    assert exact.startswith(f"exact {share * 100:.4g}%; budget {(1 - share) * 100 / 0.01:,.3g}")
    assert "lowest h20-model-0" in exact  # two replicas: the lower one is named
    assert bounded.startswith(f"{m['H20/slo/ttft_le_2s_attainment']['value'] * 100:.4g}% [")
    assert "budget" not in bounded  # no objective, no budget


def test_report_json_holds_the_exact_share_of_requests(
    written: tuple[str, dict[str, Any]],
) -> None:
    _, data = written
    source = DatasetSource(DATASET)
    m = {x["key"]: x for x in data["measurements"]}
    for name in ("PRO", "H20"):
        first = truth(source, name, "ttft", "first_token", False)
        share = float(np.mean(first <= 1.0))  # requests.csv: TTFT at or below 1 s
        one = m[f"{name}/slo/ttft_le_1s_attainment"]
        assert math.isclose(one["value"], share, rel_tol=EXACT)
        assert one["bounds"] == {"lower": one["value"], "upper": one["value"]}
        assert one["unit"] == "ratio"
        assert one["provenance"]["promql"]
        between = m[f"{name}/slo/ttft_le_2s_attainment"]
        assert between["bounds"]["lower"] <= float(np.mean(first <= 2.0))
        assert float(np.mean(first <= 2.0)) <= between["bounds"]["upper"]
        assert f"{name}/slo/ttft_le_1s_budget_spent" in m
        assert f"{name}/slo/ttft_le_2s_budget_spent" not in m
