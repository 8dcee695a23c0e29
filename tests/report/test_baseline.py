"""``report --baseline``: the same data finds no regression; a heavier week finds the real ones.

The heavier week is the same scenario (``steady.yaml``) with 1.5x the
traffic: its replicas queue, so TTFT and queue time regress. Quantiles that
moved inside their bucket must not be called regressions, and every
regression with bounds must have disjoint buckets then and now.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import EXIT_REGRESSION, main
from inference_obs.report.baseline import (
    Side,
    Tolerances,
    _classify,
    compare_reports,
    headlines,
)
from inference_obs.report.report_json_model import ReportDocument
from inference_obs.simulate import load_scenario, simulate, with_load

SCENARIO = Path(__file__).with_name("steady.yaml")


def _report(dataset: Path, out: Path, *extra: str) -> dict[str, Any]:
    argv = ["report", "--dataset", str(dataset), "--out", str(out), "--quiet", *extra]
    main([*argv, "--format", "md,json"])
    data: dict[str, Any] = json.loads((out / "report.json").read_text())
    return data


def document(data: dict[str, Any]) -> ReportDocument:
    """report.json data (edited by a test) as the comparison reads it."""
    return ReportDocument.model_validate(data, strict=True)


@pytest.fixture(scope="module")
def weeks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("weeks")
    scenario = load_scenario(SCENARIO)
    simulate(scenario, root / "last")
    simulate(with_load(scenario, 1.5), root / "heavier")
    _report(root / "last", root / "last-report")
    return {"last": root / "last", "heavier": root / "heavier", "report": root / "last-report"}


def test_the_same_data_finds_no_regression(weeks: dict[str, Path], tmp_path: Path) -> None:
    baseline = str(weeks["report"] / "report.json")
    data = _report(weeks["last"], tmp_path / "again", "--baseline", baseline)
    b = data["baseline"]
    assert b["regressions"] == []
    assert b["findings"] == []
    assert {c["change"] for c in b["compared"]} <= {"unchanged", "not_comparable", "context"}
    present = {m["key"].split("/", 1)[1] for m in data["measurements"]}
    assert {c["statistic"] for c in b["compared"]} == set(headlines(document(data))) & present
    # The default SLO targets' attainment is among them.
    assert "slo/e2e_le_30s_attainment" in {c["statistic"] for c in b["compared"]}
    text = (tmp_path / "again" / "report.md").read_text()
    assert "No regression: no headline number got worse beyond its bounds." in text


def test_a_heavier_week_finds_ttft_and_queue_regressions_and_nothing_inside_a_bucket(
    weeks: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = ["--baseline", str(weeks["report"] / "report.json")]
    argv = ["report", "--dataset", str(weeks["heavier"]), "--out", str(tmp_path / "now")]
    code = main([*argv, "--quiet", "--format", "md,json", *baseline, "--fail-on", "regression"])
    assert code == EXIT_REGRESSION
    assert "regression: STEADY latency/ttft_p95" in capsys.readouterr().err
    b = json.loads((tmp_path / "now" / "report.json").read_text())["baseline"]
    found = {r["statistic"] for r in b["regressions"]}
    for statistic in ("ttft_mean", "ttft_p95", "queue_mean", "queue_p95"):
        assert f"latency/{statistic}" in found
    assert "throughput/waiting_sample_share" in found
    # The queueing also pushes TTFT past the default 2 s target (between buckets 1 s and
    # 2.5 s): the attainment's interval now lies wholly below last week's.
    assert "slo/ttft_le_2s_attainment" in found
    for r in b["regressions"]:
        then, now = r["previous"], r["current"]
        if r["statistic"].endswith("_attainment"):  # worse lower: the interval fell below
            assert now["upper"] <= then["lower"], r
        elif then["lower"] is not None and now["lower"] is not None:  # a quantile: disjoint
            assert now["lower"] >= then["upper"], r
        assert r["verdict"] == "regression", r  # 1.5x traffic is within the volume threshold
    within = [c for c in b["compared"] if c["change"] == "within_bucket"]
    assert within  # the per-token quantiles moved, but inside their buckets
    assert not {c["statistic"] for c in within} & found
    for c in within:
        assert c["current"]["value"] != c["previous"]["value"]
    assert not any(c["change"] == "regression" and c["worse"] is None for c in b["compared"])
    text = (tmp_path / "now" / "report.md").read_text()
    assert "## Against the baseline" in text
    assert "| STEADY | latency/ttft_p95 |" in text


def test_a_workload_change_caveats_every_regression(weeks: dict[str, Path], tmp_path: Path) -> None:
    now = _report(weeks["heavier"], tmp_path / "now")
    then = json.loads((weeks["report"] / "report.json").read_text())
    shorter = copy.deepcopy(then)
    for m in shorter["measurements"]:
        if m["key"] == "STEADY/shapes/output_tokens_mean":
            m["value"] /= 2  # last week's requests generated half as much
    b = compare_reports(document(shorter), document(now), source="then")
    assert [(f.code, f.deployment) for f in b.findings] == [("output_length_differs", "STEADY")]
    assert b.regressions
    assert {r.verdict for r in b.regressions} == {"caveated"}
    assert all("output_length_differs" in r.findings for r in b.regressions)


def test_few_requests_caveat_a_tail(weeks: dict[str, Path], tmp_path: Path) -> None:
    now = _report(weeks["heavier"], tmp_path / "now")
    then = json.loads((weeks["report"] / "report.json").read_text())
    for report in (then, now):
        for m in report["measurements"]:
            if m["key"] == "STEADY/throughput/finished_requests":
                m["value"] = 500.0  # enough for a P95 (200), not for a P99 (1000)
    b = compare_reports(document(then), document(now), source="then")
    verdicts = {r.statistic: r for r in b.regressions}
    assert verdicts["latency/ttft_p99"].findings == ("too_few_observations",)
    assert verdicts["latency/ttft_p95"].verdict == "regression"


def test_slo_attainment_is_compared_exact_by_tolerance_and_bounded_by_interval(
    weeks: dict[str, Path],
) -> None:
    then = json.loads((weeks["report"] / "report.json").read_text())
    now = copy.deepcopy(then)
    by_key = {m["key"]: m for m in now["measurements"]}
    # Exact attainment (bounds a point): 0.99 then, 0.80 now is 19% lower, past the 10%
    # tolerance; its budget spent, 1 then (0.01 / 0.01), 20 now (0.2 / 0.01), is higher.
    for m, value in ((by_key["STEADY/slo/e2e_le_30s_attainment"], 0.80),):
        m.update(value=value, status="ok", bounds={"lower": value, "upper": value})
    for m in then["measurements"]:
        if m["key"] == "STEADY/slo/e2e_le_30s_attainment":
            m.update(value=0.99, status="ok", bounds={"lower": 0.99, "upper": 0.99})
        if m["key"] == "STEADY/slo/e2e_le_30s_budget_spent":
            m.update(value=1.0, status="ok", bounds={"lower": 1.0, "upper": 1.0})
    by_key["STEADY/slo/e2e_le_30s_budget_spent"].update(
        value=20.0, status="ok", bounds={"lower": 20.0, "upper": 20.0}
    )
    b = compare_reports(document(then), document(now), source="then")
    changes = {c.statistic: c.change for c in b.compared}
    assert changes["slo/e2e_le_30s_attainment"] == "regression"
    assert changes["slo/e2e_le_30s_budget_spent"] == "regression"
    assert {r.statistic for r in b.regressions} >= {"slo/e2e_le_30s_attainment"}
    # Per-replica attainment is never a headline.
    assert not any("[" in c.statistic for c in b.compared)


def side(value: float, lower: float | None = None, upper: float | None = None) -> Side:
    return Side(value=value, lower=lower, upper=upper, status="ok")


@pytest.mark.parametrize(
    ("then", "now", "worse", "unit", "change"),
    [
        # Same bucket, far apart: the buckets cannot tell them apart.
        (side(0.3, 0.25, 0.5), side(0.49, 0.25, 0.5), "higher", "seconds", "within_bucket"),
        # Adjacent buckets: (0.25, 0.5] then and (0.5, 1] now is a real increase.
        (side(0.49, 0.25, 0.5), side(0.51, 0.5, 1.0), "higher", "seconds", "regression"),
        (side(0.51, 0.5, 1.0), side(0.49, 0.25, 0.5), "higher", "seconds", "improvement"),
        # Both in the +Inf bucket: unresolved however large.
        (side(90, 80, math.inf), side(900, 80, math.inf), "higher", "seconds", "within_bucket"),
        # Exact numbers: 10% and the unit's floor.
        (side(1.0), side(1.05), "higher", "seconds", "within_tolerance"),
        (side(1.0), side(1.2), "higher", "seconds", "regression"),
        (side(0.0), side(0.0005), "higher", "seconds", "within_tolerance"),  # under 1 ms
        (side(0.0), side(0.5), "higher", "seconds", "regression"),
        (side(0.5), side(0.4), "lower", "ratio", "regression"),  # a hit rate fell
        (side(100.0), side(10.0), None, "tokens/s", "context"),
    ],
)
def test_changes_are_classified_by_bounds_then_tolerance(
    then: Side, now: Side, worse: str | None, unit: str, change: str
) -> None:
    assert _classify(worse, unit, then, now, Tolerances())[0] == change  # type: ignore[arg-type]


def test_no_data_is_never_a_regression() -> None:
    nothing = Side(value=None, status="no_data")
    change, reason = _classify("higher", "seconds", side(1.0), nothing, Tolerances())
    assert (change, reason) == ("not_comparable", "status ok then, no_data now")


def test_the_baseline_tables_show_buckets_as_the_other_tables_do(tmp_path: Path) -> None:
    bundled = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"
    _report(bundled, tmp_path / "then")
    _report(bundled, tmp_path / "now", "--baseline", str(tmp_path / "then" / "report.json"))
    text = (tmp_path / "now" / "report.md").read_text()
    section = text[text.index("## Against the baseline") :]
    pro = section[section.index("### PRO") :]
    rows = {
        cells[0]: cells
        for line in pro[: pro.index("###", 3)].splitlines()
        if line.startswith("| latency/")
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    # requests.csv: PRO's true TTFT median is 0.106 s, in the lowest bucket (0, 0.25] s: known
    # only as at most 250 ms; its true P99, 40.45 s, lies in (40, 80] s.
    assert rows["latency/ttft_p50"][1:4] == ["≤ 250 ms", "≤ 250 ms", "ms or s (in cell)"]
    assert rows["latency/ttft_p99"][1].endswith(" s [40, 80]")
    assert rows["latency/ttft_p99"][2] == rows["latency/ttft_p99"][1]
