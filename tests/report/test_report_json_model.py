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
