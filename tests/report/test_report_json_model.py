"""report.json against the pydantic models of its documented format (docs/report-json.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from inference_obs.cli import main
from inference_obs.report.report_json_model import ReportDocument

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ("pro5000-vs-h20", "h100-vs-h200", "r1-decode")


def _written(dataset: str, out: Path) -> dict[str, object]:
    argv = ["report", "--dataset", str(ROOT / "datasets" / dataset), "--format", "json"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    data: dict[str, object] = json.loads((out / "report.json").read_text())
    return data


@pytest.mark.parametrize("dataset", DATASETS)
def test_each_bundled_report_json_has_the_documented_format(dataset: str, tmp_path: Path) -> None:
    data = _written(dataset, tmp_path)
    document = ReportDocument.model_validate(data)
    assert document.summary
    dumped = document.model_dump(mode="json", exclude_none=False)
    assert dumped["summary"] == data["summary"]
    assert dumped["timeline"] == data["timeline"]


def test_a_field_the_format_does_not_document_fails(tmp_path: Path) -> None:
    data = _written("r1-decode", tmp_path)
    with pytest.raises(ValidationError, match="extra_field"):
        ReportDocument.model_validate({**data, "extra_field": 1})
    entry = {**data["summary"][0], "keys": ["R1/latency/not_a_key"]}  # type: ignore[index]
    with pytest.raises(ValidationError, match="not_a_key"):
        ReportDocument.model_validate({**data, "summary": [entry]})
    event = {
        "rank": 1, "deployment": "R1", "replicas": [], "start": "2026-01-01T00:00:00+00:00",
        "end": "2026-01-01T00:01:00+00:00", "kind": "stall", "severity": "critical",
        "pieces": ["stall"], "text": "t", "keys": ["R1/queueing/not_a_key"], "promql": [],
    }  # fmt: skip
    with pytest.raises(ValidationError, match="not_a_key"):
        ReportDocument.model_validate({**data, "timeline": [event]})
    with pytest.raises(ValidationError, match="kind"):
        ReportDocument.model_validate({**data, "timeline": [{**event, "kind": "outage"}]})


def _inf(x: float | str) -> float:
    """A JSON number of report.json as a float ("+Inf" as infinity)."""
    return float("inf") if x == "+Inf" else float(x)


def test_rolling_series_carry_each_points_bucket(tmp_path: Path) -> None:
    data = _written("pro5000-vs-h20", tmp_path)
    document = ReportDocument.model_validate(data)
    pro = next(d for d in data["deployments"] if d["name"] == "PRO")  # type: ignore[attr-defined]
    ttft, itl = pro["rolling"]
    assert ttft["family"] == "vllm:time_to_first_token_seconds"
    assert [q["quantile"] for q in ttft["quantiles"]] == [0.5, 0.95, 0.99]
    assert all(not q["points"] for q in itl["quantiles"])  # ITL's _bucket series were dropped
    for q in ttft["quantiles"]:
        assert len(q["points"]) >= 55
        for p in q["points"]:
            lower, value, upper = _inf(p["lower"]), _inf(p["value"]), _inf(p["upper"])
            assert lower <= value <= upper
            assert p["lowest_bucket"] == (lower == 0.0)
    # 18:26-18:29 (+08:00): the requests these intervals hold waited at most 56.6 s
    # (requests.csv); the interpolated P99 reads about 78 s, the bucket [40, 80] s.
    p99 = {p["t"]: p for p in ttft["quantiles"][2]["points"]}
    for minute in (26, 27, 28, 29):
        p = p99[f"2026-10-19T18:{minute}:00+08:00"]
        assert (p["lower"], p["upper"]) == (40.0, 80.0)
        assert p["value"] > 56.6
    assert document.deployments[0].rolling[0].quantiles[2].points


def test_a_rolling_point_outside_its_bucket_fails(tmp_path: Path) -> None:
    data = _written("r1-decode", tmp_path)
    deployment = data["deployments"][0]  # type: ignore[index]
    rolling = deployment["rolling"][0]
    quantile = rolling["quantiles"][0]
    point = {**quantile["points"][0], "value": -1.0}  # below any bucket: they start at 0
    broken = {**rolling, "quantiles": [{**quantile, "points": [point]}]}
    deployments = [{**deployment, "rolling": [broken]}]
    with pytest.raises(ValidationError, match="outside"):
        ReportDocument.model_validate({**data, "deployments": deployments})
