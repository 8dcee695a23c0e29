"""Verifying a dataset: published numbers recomputed from samples, differences reported."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from inference_obs.analyses.published import FIRST_SCHEMA, SCHEMA, published_aggregates
from inference_obs.analyses.verify import (
    FROM_ANALYSES,
    FROM_SAMPLES,
    RowStatus,
    VerifyResult,
)
from inference_obs.analyses.verify_requests import FROM_REQUESTS
from inference_obs.errors import DatasetError, NotSupportedOffline
from inference_obs.report.verify import verify_dataset
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset

DATASETS = sorted(p for p in (Path(__file__).parents[2] / "datasets").iterdir() if p.is_dir())
BUNDLED = DATASETS[1]  # pro5000-vs-h20


def _with_aggregates(source: Path, out: Path, aggregates: Mapping[str, Any] | None) -> Path:
    """A copy of the dataset at ``source`` with other published numbers."""
    dataset = read_dataset(source)
    write_dataset(out, dataset.manifest, dataset.samples, aggregates=aggregates)
    return out


@pytest.fixture(scope="module")
def measured() -> dict[str, Any]:
    """The measurements layout computed from the bundled dataset's samples."""
    source = DatasetSource(BUNDLED)
    manifest = source.dataset.manifest
    return published_aggregates(source, manifest.deployments, manifest.window.window())


@pytest.mark.parametrize("path", DATASETS, ids=lambda p: p.name)
def test_the_simulators_sampled_numbers_are_recomputed_and_agree(path: Path) -> None:
    result = verify_dataset(path)
    assert result.layout == "simulated"
    assert result.passed
    names = [d.name for d in read_dataset(path).manifest.deployments]
    # A both-null number is "absent", never "ok"; ground-truth rows are "truth.*".
    compared = (RowStatus.OK, RowStatus.ABSENT)
    truth = [r for r in result.rows if r.key.startswith("truth.")]
    checked = {r.key for r in result.rows if r.status in compared and r not in truth}
    sampled = {f"realised.{n}.{k}" for n in names for k in (*FROM_ANALYSES, *FROM_SAMPLES)}
    assert sampled <= checked
    # Everything else checked is a request figure, recomputed from requests.csv.
    assert all(k.split(".")[2] in FROM_REQUESTS for k in checked - sampled)
    assert all(
        (r.status is RowStatus.ABSENT) == (r.published is None and r.recomputed is None)
        for r in result.rows
        if r.key in checked
    )
    rest = [r for r in result.rows if r.status is RowStatus.NOT_RECOMPUTABLE and r not in truth]
    assert truth
    assert len(rest) + len(checked) + len(truth) == len(result.rows)
    assert all(r.reason for r in rest)
    reasons = {r.key: r.reason for r in result.rows}
    assert "target of the scenario" in next(
        v for k, v in reasons.items() if k.startswith("targets")
    )
    assert reasons[f"realised.{names[0]}.ttft_seconds.p95"] == "recomputed from requests.csv"
    assert "engine events" in reasons[f"realised.{names[0]}.generated_tokens"]


def test_without_requests_the_request_figures_say_why_they_are_not_recomputed(
    tmp_path: Path,
) -> None:
    dataset = read_dataset(BUNDLED)
    path = _with_aggregates(BUNDLED, tmp_path / "d", dict(dataset.aggregates or {}))
    assert read_dataset(path).requests is None
    rows = {r.key: r for r in verify_dataset(path).rows}
    row = rows["realised.PRO.ttft_seconds.p95"]
    assert row.status is RowStatus.NOT_RECOMPUTABLE
    assert "does not ship (requests.csv)" in row.reason
    assert not any(k.startswith("truth.") for k in rows)


def test_a_changed_simulated_number_differs(tmp_path: Path) -> None:
    aggregates = copy.deepcopy(dict(read_dataset(BUNDLED).aggregates or {}))
    aggregates["realised"]["PRO"]["max_sampled_running"] += 1  # 11 -> 12
    result = verify_dataset(_with_aggregates(BUNDLED, tmp_path / "d", aggregates))
    assert not result.passed
    (wrong,) = result.failures
    assert wrong.key == "realised.PRO.max_sampled_running"
    assert wrong.status is RowStatus.DIFFERS
    assert (wrong.published, wrong.recomputed, wrong.difference) == (12.0, 11.0, -1.0)


@pytest.mark.parametrize(("published", "status"), [(15.6146, "ok"), (15.6147, "differs")])
def test_simulated_numbers_are_equal_to_their_six_significant_digits(
    tmp_path: Path, published: float, status: str
) -> None:
    # Recomputed: 15.614583..., which the simulator wrote as 15.6146 (within 0.00005).
    aggregates = copy.deepcopy(dict(read_dataset(BUNDLED).aggregates or {}))
    aggregates["realised"]["PRO"]["gpu_util_mean_percent"] = published
    result = verify_dataset(_with_aggregates(BUNDLED, tmp_path / "d", aggregates))
    (row,) = [r for r in result.rows if r.key == "realised.PRO.gpu_util_mean_percent"]
    assert row.status.value == status
    assert row.tolerance == pytest.approx(0.00005, rel=1e-3)


def test_published_measurements_are_recomputed_exactly(
    tmp_path: Path, measured: dict[str, Any]
) -> None:
    result = verify_dataset(_with_aggregates(BUNDLED, tmp_path / "d", measured))
    assert result.layout == "measurements"
    assert measured["schema"] == SCHEMA
    assert result.rules == "prometheus-2"
    assert result.passed
    entries = measured["measurements"]
    bounds = sum(
        b is not None for e in entries.values() for b in (e["bounds"] or [None, None])
    )  # fmt: skip
    rows = [r for r in result.rows if not r.key.startswith("truth.")]
    assert len(rows) == len(entries) + bounds
    # Both null is "absent", never "ok".
    assert all(
        r.status is (RowStatus.ABSENT if r.published is None else RowStatus.OK) for r in rows
    )
    assert all(r.difference == 0 for r in rows if r.difference is not None)


def test_changed_missing_and_restated_measurements_fail(
    tmp_path: Path, measured: dict[str, Any]
) -> None:
    changed = copy.deepcopy(measured)
    entries = changed["measurements"]
    entries["H20/latency/ttft_p95"]["value"] *= 1.001
    entries["PRO/latency/ttft_mean"]["value"] = None
    entries["PRO/latency/made_up"] = {"value": 1.0, "unit": "seconds", "status": "ok"}
    entries["PRO/cache/preemptions"]["status"] = "partial"
    entries["PRO/latency/ttft_p50"] = 0.5
    result = verify_dataset(_with_aggregates(BUNDLED, tmp_path / "d", changed))
    failures = {r.key: r for r in result.failures}
    assert set(failures) == {
        "H20/latency/ttft_p95",
        "PRO/latency/ttft_mean",
        "PRO/latency/made_up",
        "PRO/cache/preemptions",
        "PRO/latency/ttft_p50",
    }
    p95 = failures["H20/latency/ttft_p95"]
    assert p95.status is RowStatus.DIFFERS
    recomputed = measured["measurements"]["H20/latency/ttft_p95"]["value"]
    assert p95.recomputed == recomputed
    assert p95.difference == pytest.approx(-0.001 * recomputed)
    assert failures["PRO/latency/ttft_mean"].status is RowStatus.MISSING
    assert failures["PRO/latency/made_up"].reason == "no such measurement is recomputed"
    assert failures["PRO/latency/ttft_p50"].reason == "not an object with a value"
    assert failures["PRO/cache/preemptions"].reason == (
        "status published 'partial', recomputed 'ok'"
    )


def test_an_infinite_bound_is_read_as_prometheus_writes_it_and_compared_exactly(
    tmp_path: Path, measured: dict[str, Any]
) -> None:
    entry = measured["measurements"]["H20/latency/ttft_p99"]
    upper = entry["bounds"]["upper"]
    assert isinstance(upper, float)
    changed = copy.deepcopy(measured)
    changed["measurements"]["H20/latency/ttft_p99"]["bounds"]["upper"] = "+Inf"
    result = verify_dataset(_with_aggregates(BUNDLED, tmp_path / "d", changed))
    (failure,) = result.failures
    assert failure.key == "H20/latency/ttft_p99.upper"
    assert failure.status is RowStatus.DIFFERS
    assert failure.published == math.inf
    assert failure.recomputed == upper


def test_the_rule_set_named_in_the_aggregates_is_the_one_used(
    tmp_path: Path, measured: dict[str, Any]
) -> None:
    three = verify_dataset(
        _with_aggregates(BUNDLED, tmp_path / "3", {**measured, "rules": "prometheus-3"})
    )
    assert three.rules == "prometheus-3"
    # The local engine has no VictoriaMetrics histogram_quantile: proof it was asked to use it.
    path = _with_aggregates(BUNDLED, tmp_path / "vm", {**measured, "rules": "victoriametrics"})
    with pytest.raises(NotSupportedOffline, match="VictoriaMetrics"):
        verify_dataset(path)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"rules": "prometheus-9"}, r"rules 'prometheus-9' is not one of prometheus-2"),
        ({"window": {"start": "2026-10-19T17:40:00"}}, r"window must be"),
        ({"window": {"start": "yesterday", "end": "today"}}, r"window must be .*Invalid"),
    ],
)
def test_a_bad_measurements_header_names_the_file(
    tmp_path: Path, measured: dict[str, Any], change: dict[str, Any], problem: str
) -> None:
    path = _with_aggregates(BUNDLED, tmp_path / "d", {**measured, **change})
    with pytest.raises(DatasetError, match=rf"aggregates\.json: {problem}"):
        verify_dataset(path)


def test_an_unknown_layout_lists_its_numbers_as_not_recomputable(tmp_path: Path) -> None:
    published = {"headline": {"p95": 1.5, "flag": True, "name": "x", "n": [1, None]}}
    result = verify_dataset(_with_aggregates(BUNDLED, tmp_path / "d", published))
    assert result.layout == "unknown"
    assert [(r.key, r.published) for r in result.rows] == [
        ("headline.n[0]", 1.0),
        ("headline.n[1]", None),
        ("headline.p95", 1.5),
    ]
    assert {r.status for r in result.rows} == {RowStatus.NOT_RECOMPUTABLE}
    assert not result.passed  # nothing was checked


def test_a_dataset_without_aggregates_has_nothing_to_verify(tmp_path: Path) -> None:
    result = verify_dataset(_with_aggregates(BUNDLED, tmp_path / "d", None))
    assert (result.layout, result.rows, result.passed) == ("none", (), False)


def test_views_hold_every_row() -> None:
    result = verify_dataset(DATASETS[2])
    frame = result.to_frame()
    assert list(frame.columns) == [
        "key", "published", "recomputed", "difference", "tolerance", "status", "reason",
    ]  # fmt: skip
    assert len(frame) == len(result.rows)
    # r1-decode: 8 sampled numbers, 35 request figures recomputed from requests.csv (6
    # summaries of 4, 11 single numbers), 22 report numbers checked against it (TTFT, TPOT,
    # E2E, decode: 4 bounds each; 6 means, ITL's not checkable).
    assert (frame["status"] == "ok").sum() == 8 + 35 + 22
    page = result._repr_html_()
    assert page.count("<tr>") == len(result.rows) + 1
    assert "realised.R1.max_sampled_running" in page
    empty = VerifyResult(path="x", layout="none", rules="", rows=())
    assert list(empty.to_frame().columns) == list(frame.columns)


def test_the_first_layout_with_bounds_as_pairs_is_still_read(
    tmp_path: Path, measured: dict[str, Any]
) -> None:
    first = copy.deepcopy(measured)
    first["schema"] = FIRST_SCHEMA
    for entry in first["measurements"].values():
        if entry["bounds"] is not None:
            entry["bounds"] = [entry["bounds"]["lower"], entry["bounds"]["upper"]]
    assert verify_dataset(_with_aggregates(BUNDLED, tmp_path / "d", first)).passed
    first["measurements"]["H20/latency/ttft_p99"]["bounds"][0] = 0.0
    (failure,) = verify_dataset(_with_aggregates(BUNDLED, tmp_path / "e", first)).failures
    assert failure.key == "H20/latency/ttft_p99.lower"
