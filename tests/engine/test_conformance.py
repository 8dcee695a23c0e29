"""Prometheus's own cases through the conformance runner, and the runner's interface."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inference_obs.conformance import evaluate, load_cases, main
from inference_obs.engine.rules import Rules
from inference_obs.errors import DatasetError, NotSupportedOffline
from inference_obs.samples import Labels

REPO = Path(__file__).resolve().parents[2]
COPY = REPO / "tests" / "fixtures" / "conformance" / "promql-cases.json"
#: The copy in this repository, so CI does not depend on a sibling folder.
CASES = COPY


@pytest.mark.parametrize("rules", ["prometheus-2", "prometheus-3"])
def test_every_public_case_passes(rules: str, capsys: pytest.CaptureFixture[str]) -> None:
    status = main([str(CASES), "--rules", rules])
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "203 passed, 0 failed", out
    assert status == 0


def test_the_bundled_case_file_is_complete() -> None:
    # The suite runs on the copy in this repository; it must hold every case
    # its own header counts, each once.
    document = json.loads(COPY.read_text(encoding="utf-8"))
    ids = [case["id"] for case in document["cases"]]
    assert len(ids) == len(set(ids)) == sum(document["counts"].values()) == 203


def _document(*cases: dict[str, Any]) -> dict[str, Any]:
    return {"format": "promql-conformance/1", "cases": list(cases)}


def _case(case_id: str, expected: list[dict[str, Any]]) -> dict[str, Any]:
    # increase over [0, 120] of 0 10 20 (2.42: 20; 3.x: 10 20 over 60 s,
    # start gap 60 s in full: 10 * 120/60 = 20).
    return {
        "id": case_id,
        "function": "increase",
        "args": {"range_s": 120.0, "offset_s": 0.0},
        "series": [
            {"labels": {"__name__": "x", "pod": "a"}, "samples": [[0, 0], [60, 10], [120, 20]]}
        ],
        "range": {"start": 0, "end": 120},
        "eval_time": 120,
        "expected": expected,
        "expected_v3": expected,
        "tolerance": {"relative": 1e-6},
    }


def _write(tmp_path: Path, document: object, name: str = "cases.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def test_failing_cases_are_listed_with_a_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _case("good", [{"labels": {"pod": "a"}, "value": 20}])
    off = _case("off-by-one", [{"labels": {"pod": "a"}, "value": 21}])
    labels = _case("wrong-labels", [{"labels": {"pod": "b"}, "value": 20}])
    path = _write(tmp_path, _document(good, off, labels))
    status = main([str(path), "--rules", "prometheus-3"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 1
    assert lines[-1] == "1 passed, 2 failed"
    assert lines[0].startswith("FAIL off-by-one: ")
    assert "expected 21" in lines[0]
    assert "got 20" in lines[0]
    assert lines[1].startswith("FAIL wrong-labels: label sets differ")


def test_tolerance_is_relative(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # |20 - 20.00001| / 40.00001 = 2.5e-7 < 1e-6.
    close = _case("close", [{"labels": {"pod": "a"}, "value": 20.00001}])
    assert main([str(_write(tmp_path, _document(close)))]) == 0
    assert capsys.readouterr().out == "1 passed, 0 failed\n"


def test_several_files_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = _write(tmp_path, _document(_case("a", [{"labels": {"pod": "a"}, "value": 20}])), "a.json")
    two = _write(tmp_path, _document(_case("b", [{"labels": {"pod": "a"}, "value": 20}])), "b.json")
    assert main([str(one), str(two)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 passed, 0 failed"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "not a JSON file"),
        ('{"format": "other/1", "cases": []}', "format is 'other/1'"),
        ('{"format": "promql-conformance/1"}', "'cases' list"),
        (json.dumps(_document({"id": "broken", "function": "rate"})), "case broken: missing"),
        (
            json.dumps(
                _document({**_case("word", []), "expected": [{"labels": {}, "value": "x"}]})
            ),
            "case word: 'x' is not a number, 'NaN', '+Inf' or '-Inf'",
        ),
        (
            json.dumps(
                _document({**_case("flag", []), "expected": [{"labels": {}, "value": True}]})
            ),
            "case flag: True is not a number",
        ),
    ],
)
def test_bad_files_exit_2_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    status = main([str(path)])
    err = capsys.readouterr().err
    assert status == 2
    assert str(path) in err
    assert message in err


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"function": "holt_winters"}, NotSupportedOffline, "function 'holt_winters' is not one"),
        ({"range": None}, DatasetError, "increase needs a 'range' with 'start' and 'end' seconds"),
    ],
)
def test_a_case_the_runner_cannot_evaluate_says_why(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, Any],
    error: type[Exception],
    message: str,
) -> None:
    path = _write(tmp_path, _document({**_case("odd", []), **change}))
    (case,) = load_cases(path)
    with pytest.raises(error, match=message):
        evaluate(case, Rules.PROMETHEUS_3)
    # The runner lists it as failed, with the same reason, and goes on.
    assert main([str(path)]) == 1
    assert f"FAIL odd: cannot evaluate: {error.__name__}: {message}" in capsys.readouterr().out


def test_runs_as_a_module(tmp_path: Path) -> None:
    path = _write(tmp_path, _document(_case("a", [{"labels": {"pod": "a"}, "value": 20}])))
    done = subprocess.run(
        [sys.executable, "-m", "inference_obs.conformance", str(path), "--rules", "prometheus-2"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0
    assert done.stdout == "1 passed, 0 failed\n"


def test_evaluate_keeps_the_name_only_for_selectors() -> None:
    cases = {case.id: case for case in load_cases(CASES)}
    selector = evaluate(cases["v2.42.0-staleness-L10-instant_selector"], Rules.PROMETHEUS_2)
    assert selector == [(Labels({"__name__": "metric"}), 2.0)]
    rate = evaluate(cases["v2.42.0-functions-L108-rate"], Rules.PROMETHEUS_2)
    assert rate == [(Labels({}), 0.0)]
