"""report.json against the pydantic models of its documented format (docs/report-json.md),
written from them and read back into them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from inference_obs.cli import main
from inference_obs.errors import DatasetError
from inference_obs.report.baseline import read_report_json
from inference_obs.report.from_source import report
from inference_obs.report.model import Report
from inference_obs.report.report_json import (
    document_bytes,
    document_text,
    json_parts,
    report_document,
    to_json_bytes,
)
from inference_obs.report.report_json_model import MEASURED_APART, ReportDocument
from inference_obs.source.dataset.source import DatasetSource

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ("pro5000-vs-h20", "h100-vs-h200", "r1-decode")


def _written(dataset: str, out: Path) -> dict[str, object]:
    argv = ["report", "--dataset", str(ROOT / "datasets" / dataset), "--format", "json"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    data: dict[str, object] = json.loads((out / "report.json").read_text())
    return data


@pytest.mark.parametrize("dataset", DATASETS)
def test_each_bundled_report_json_reads_back_as_written(dataset: str, tmp_path: Path) -> None:
    data = _written(dataset, tmp_path)
    document = ReportDocument.model_validate(data)
    assert document.summary
    dumped = document.model_dump(mode="json", exclude_none=False)
    assert dumped["summary"] == data["summary"]
    assert dumped["timeline"] == data["timeline"]
    # Read as --baseline reads it (strict, from the text): every field, in its order, with
    # each number as written (an integer stays one), comes back.
    file = tmp_path / "report.json"
    read = read_report_json(file)
    assert document_text(read) == file.read_text(encoding="utf-8")
    first = data["measurements"][0]  # type: ignore[index]
    assert read.measurement(first["key"]) == read.measurements[0]
    assert read.measurement("no/such/key") is None


@pytest.fixture(scope="module")
def r1(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The r1-decode dataset's report.json, as written."""
    data: dict[str, Any] = _written("r1-decode", tmp_path_factory.mktemp("r1"))
    return data


def _bent(data: dict[str, Any], path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    bent = copy.deepcopy(data)
    parent: Any = bent
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return bent


@pytest.mark.parametrize(
    ("where", "value", "named"),
    [
        # Fields the comparison never reads are checked too, each named by its path.
        (("extra_field",), 1, "extra_field: Extra inputs are not permitted"),
        (("summary", 0, "rank"), "1", "summary[0].rank: Input should be a valid integer"),
        (("deployments", 0, "step_seconds"), "60", "deployments[0].step_seconds:"),
        (("deployments", 0, "regime", "reading"), "fine", "deployments[0].regime.reading:"),
        (("deployments", 0, "rolling", 0, "quantiles", 0, "points", 0, "upper"), "9",
         "points[0].upper: expected a number"),
        (("deployments", 0, "gpus_without_samples"), [True], "gpus_without_samples[0]:"),
        (("measurements", 1, "key"), "R1/collection/scrape_interval", "measurement keys repeat"),
    ],
)  # fmt: skip
def test_a_baseline_is_read_whole_against_the_format(
    tmp_path: Path, r1: dict[str, Any], where: tuple[str | int, ...], value: object, named: str
) -> None:
    if where[-1] == "key":
        assert value == r1["measurements"][0]["key"]  # a repeat of the first key
    file = tmp_path / "bent.json"
    file.write_text(json.dumps(_bent(r1, where, value)), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"not a report\.json a report can compare with") as e:
        read_report_json(file)
    assert str(file) in str(e.value)
    assert named in str(e.value), str(e.value)


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


@pytest.fixture(scope="module")
def r1_report() -> Report:
    return report(DatasetSource(ROOT / "datasets" / "r1-decode"))


def test_report_json_written_a_measurement_at_a_time_is_the_whole_documents(
    r1_report: Report,
) -> None:
    whole = document_bytes(report_document(r1_report))
    assert to_json_bytes(r1_report) == whole
    assert whole.count(b'\n      "key": ') > 100  # every measurement, each at its depth


def test_report_json_comes_in_parts_none_holding_more_than_one_measurement(
    r1_report: Report,
) -> None:
    parts = list(json_parts(r1_report))
    measured = r1_report.measurements()
    # The document before the measurements, one part each, and the rest after them.
    assert len(parts) == len(measured) + 2
    assert b"".join(parts) == document_bytes(report_document(r1_report))
    for part, m in zip(parts[1:-1], measured, strict=True):
        assert part.count(b'"key": ') == 1
        assert json.dumps(m.key).encode() in part


def test_a_document_without_its_measurements_is_checked_against_their_keys(
    r1: dict[str, Any],
) -> None:
    keys = [m["key"] for m in r1["measurements"]]
    rest = {**r1, "measurements": []}
    assert ReportDocument.model_validate(rest, context={MEASURED_APART: keys}).measurements == []
    named = r1["summary"][0]["keys"][0]
    others = [k for k in keys if k != named]
    with pytest.raises(ValidationError, match="names keys not in measurements"):
        ReportDocument.model_validate(rest, context={MEASURED_APART: others})
    with pytest.raises(ValidationError, match="measurement keys repeat"):
        ReportDocument.model_validate(rest, context={MEASURED_APART: [*keys, keys[0]]})
    with pytest.raises(ValidationError, match="names keys not in measurements"):
        ReportDocument.model_validate(rest)  # no keys given: the empty list is checked
