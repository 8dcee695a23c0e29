"""What the report's money and token rates count, said where they are shown: the SLA behind
"useful" output tokens, the unit of a cost, and two different tokens-per-GPU-hour rates
under two different labels.

Reports are those ``inference-obs report`` writes for the bundled PRO 5000 vs H20 dataset,
with its defaults and with prices and a latency SLA; numbers are read back from
report.json, never formatted by the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import main

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
PRICED = ("--gpu-hour-price", "PRO=2.5", "--gpu-hour-price", "H20=1.8")
SLA = ("--set", "cost.sla_ttft_s=2", "--set", "cost.sla_e2e_s=30")


def _write(out: Path, *options: str) -> tuple[str, dict[str, Any]]:
    argv = ["report", "--dataset", str(DATASET), "--out", str(out), "--quiet", *options]
    assert main([*argv, "--format", "md,json"]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    return text, json.loads((out / "report.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    return _write(tmp_path_factory.mktemp("plain"))


@pytest.fixture(scope="module")
def priced(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    return _write(tmp_path_factory.mktemp("priced"), *PRICED, *SLA)


def _section(text: str, heading: str) -> str:
    return text.split(f"\n## {heading}\n")[1].split("\n## ")[0]


def _value(data: dict[str, Any], key: str) -> float:
    (value,) = [m["value"] for m in data["measurements"] if m["key"] == key]
    assert isinstance(value, float)
    return value


def _row(section: str, first: str) -> list[str]:
    (line,) = [line for line in section.splitlines() if line.startswith(f"| {first} |")]
    return [c.strip() for c in line.strip("|").split("|")]


def test_useful_tokens_name_the_sla_the_cost_analysis_used(
    plain: tuple[str, dict[str, Any]], priced: tuple[str, dict[str, Any]]
) -> None:
    # Without a setting no SLA applies: every token of a request that finished on stop or
    # length is useful, and the Cost section says so even with no price given.
    cost = _section(plain[0], "Cost")
    assert "Useful output tokens: the output tokens of requests that finished on stop or " in (cost)
    assert "no latency SLA was set (cost.sla_ttft_s, cost.sla_e2e_s)" in cost
    # With --set cost.sla_ttft_s=2 and cost.sla_e2e_s=30: the targets, in the body.
    cost = _section(priced[0], "Cost")
    assert "met TTFT ≤ 2 s and E2E ≤ 30 s (cost.sla_ttft_s, cost.sla_e2e_s;" in cost


def test_every_cost_shown_says_its_unit_is_the_price_given(
    priced: tuple[str, dict[str, Any]],
) -> None:
    # No currency is recorded: 2.5 per GPU-hour is 2.5 of whatever the price was in.
    text = priced[0]
    cost = _section(text, "Cost")
    assert "Costs are per unit of the price you gave (no currency named: --currency)." in cost
    # PRO: 8 GPUs x 1 hour x 2.5 = 20 units.
    assert _row(cost, "PRO")[2] == "20"
    summary = _section(text, "Summary")
    (sentence,) = [line for line in summary.splitlines() if "Cost per million useful" in line]
    assert "(GPU-hour rent only, in units of the price you gave)" in sentence
    verdicts = _section(text, "Comparison verdicts")
    assert _row(verdicts, "cost_per_token")[4] == "price units/million useful tokens"
    assert "cost_per_token is in units of the GPU-hour price you gave" in verdicts


def test_a_currency_given_is_named_in_the_cost_section_and_the_units(
    tmp_path: Path,
) -> None:
    text, data = _write(tmp_path / "eur", *PRICED, *SLA, "--currency", "EUR")
    cost = _section(text, "Cost")
    assert "Costs are in EUR (--currency)." in cost
    # The useful tokens still name the SLA they count by.
    assert "met TTFT ≤ 2 s and E2E ≤ 30 s (cost.sla_ttft_s, cost.sla_e2e_s;" in cost
    units = {m["key"]: m["unit"] for m in data["measurements"]}
    assert units["PRO/cost/cost"] == "EUR"
    assert units["PRO/cost/cost_per_million_useful_output_tokens"] == "EUR/million tokens"
    # PRO: 8 GPUs x 1 hour x 2.5 EUR = 20 EUR, whatever the currency is called.
    assert _value(data, "PRO/cost/cost") == 20.0
    summary = _section(text, "Summary")
    (sentence,) = [line for line in summary.splitlines() if "Cost per million useful" in line]
    assert "(GPU-hour rent only, in EUR)" in sentence
    verdicts = _section(text, "Comparison verdicts")
    assert _row(verdicts, "cost_per_token")[4] == "EUR/million useful tokens"
    assert "cost_per_token is in EUR (--currency)." in verdicts


def test_the_two_tokens_per_gpu_hour_rates_have_two_labels(
    plain: tuple[str, dict[str, Any]],
) -> None:
    # The stage boundaries divide the output-token counter's increase by the declared
    # GPU-hours; Cost and the verdicts divide the useful output tokens, estimated as the
    # stop/length requests x their mean output length: two numbers (193,982 and 193,959 for
    # H20), so two labels.
    text, data = plain
    every = _value(data, "H20/boundaries/tokens_per_gpu_hour")
    ((useful,),) = [
        [v["values"]["H20"] for v in pair["verdicts"] if v["comparison"] == "tokens_per_gpu_hour"]
        for pair in data["comparisons"]
    ]
    assert round(every) != round(useful)
    stages = _section(text, "Stage boundaries: what the GPUs wait on")
    header = [line for line in stages.splitlines() if line.startswith("| deployment |")]
    assert header == [
        "| deployment | reading | duty cycle | output tokens per GPU-hour | boundary finding |"
    ]
    assert _row(stages, "H20")[3] == f"{round(every):,}"
    assert "Output tokens per GPU-hour: every output token over the declared GPUs" in stages
    verdicts = _section(text, "Comparison verdicts")
    row = _row(verdicts, "tokens_per_gpu_hour")
    assert row[3] == f"{round(useful):,}"
    assert row[4] == "useful tokens/GPU-hour"
    assert "tokens_per_gpu_hour counts useful output tokens (defined under Cost)" in verdicts
    # No bare "tokens per GPU-hour" label is left in the body.
    body = text[: text.index("## Appendix")]
    assert "| tokens per GPU-hour |" not in body
    assert "| tokens/GPU-hour |" not in body
