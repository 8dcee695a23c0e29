"""Input files a user hands over end in one clear line and exit 2: never a traceback, never a
silently wrong number.

Deployments files, ``--baseline`` report.json files, dashboards and rule files,
each bent the way a hand edit, a generator gone wrong or a file of another
fleet bends them. Each refusal comes before any work: the report commands name
a dataset directory that does not exist (a check that read it first would fail
naming it instead) unless the check needs the dataset's deployments.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from inference_obs.cli import EXIT_USAGE, main

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT / "datasets" / "r1-decode"
MANIFEST = json.loads((DATASET / "manifest.json").read_text(encoding="utf-8"))
DEEP = 100_000  # far past the interpreter's recursion limit (1000 frames)


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], *named: str) -> str:
    """Exit 2 with one line on stderr naming each of ``named``; no traceback, nothing written."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE, err
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    for text in named:
        assert text in err, (text, err)
    return err


def report(tmp_path: Path, *args: str, dataset: Path | None = None) -> list[str]:
    where = dataset or tmp_path / "no-dataset"
    return ["report", "--dataset", str(where), "--out", str(tmp_path / "o"), *args]


def deployments(tmp_path: Path, *entries: dict[str, Any], name: str = "d.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        yaml.safe_dump({"deployments": list(entries)}, allow_unicode=True), encoding="utf-8"
    )
    return path


def changed(**hardware: object) -> dict[str, Any]:
    entry = copy.deepcopy(MANIFEST["deployments"][0])
    entry["hardware"].update(hardware)
    return dict(entry)


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real report.json of the r1-decode dataset, to bend."""
    out = tmp_path_factory.mktemp("previous")
    assert main(["report", "--dataset", str(DATASET), "--out", str(out), "--format", "json"]) == 0
    data: dict[str, Any] = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return data


def baseline(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data), encoding="utf-8")  # NaN written bare, as Python does
    return str(path)


# --- nesting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("d.json", '{"deployments": ' + "[" * DEEP + "]" * DEEP + "}"),
        ("d.yaml", "deployments: " + "[" * DEEP + "]" * DEEP + "\n"),
    ],
)
def test_a_deeply_nested_deployments_file_is_2_not_a_recursion_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    argv = report(tmp_path, "--deployments", str(path))
    refused(argv, capsys, str(path), "nested deeper than 64 objects or lists")


def test_a_deeply_nested_baseline_is_2_not_a_recursion_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "report.json"
    path.write_text('{"format": "inference-obs-report/1", "x": ' + "[" * DEEP + "]" * DEEP + "}")
    argv = report(tmp_path, "--baseline", str(path))
    refused(argv, capsys, f"--baseline {path}", "nested deeper than 64")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("dashboard.json", '{"panels": ' + "[" * DEEP + "]" * DEEP + "}"),
        ("rules.yml", "groups: " + "[" * DEEP + "]" * DEEP + "\n"),
    ],
)
def test_a_deeply_nested_dashboard_or_rule_file_is_2_not_a_recursion_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    refused(["lint", str(path)], capsys, str(path), "nested more than 64 levels deep")


# --- deployments files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hardware", "field"),
    [
        ({"gpu_memory_gib": float("inf")}, "hardware.gpu_memory_gib: Input should be a finite"),
        ({"gpu_memory_gib": float("nan")}, "hardware.gpu_memory_gib: Input should be a finite"),
        ({"gpus_per_replica": 10**30}, "hardware.gpus_per_replica: Input should be less than"),
        ({"gpu_memory_gib": 1e300}, "hardware.gpu_memory_gib: Input should be less than"),
        ({"gpus_per_replica": True}, "hardware.gpus_per_replica: Value error, expected a number"),
    ],
)
def test_a_non_finite_or_implausible_number_in_a_deployments_file_is_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], hardware: dict[str, object], field: str
) -> None:
    path = deployments(tmp_path, changed(**hardware))  # YAML writes .inf and .nan
    refused(report(tmp_path, "--deployments", str(path)), capsys, str(path), field)


def test_a_json_number_too_large_for_a_float_is_2_not_infinity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = json.dumps({"deployments": [changed(gpu_memory_gib=80.0)]})
    path = tmp_path / "d.json"
    path.write_text(text.replace("80.0", "1e400"), encoding="utf-8")  # Python reads inf
    refused(report(tmp_path, "--deployments", str(path)), capsys, "1e400 is too large")


def test_an_implausible_declared_count_is_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = changed()
    entry["config"] = {**entry.get("config", {}), "max_model_len": 10**30}
    path = deployments(tmp_path, entry)
    refused(report(tmp_path, "--deployments", str(path)), capsys, "config.max_model_len")


def test_a_key_twice_in_a_deployments_file_is_2_naming_both_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = {"name": "R1", **MANIFEST["deployments"][0]}  # the name on the entry's first line
    text = yaml.safe_dump({"deployments": [entry]}, sort_keys=False)
    first = "- name: R1\n"
    assert first in text
    # Today's YAML readers keep the second name silently; the report would call it R2.
    path = tmp_path / "d.yaml"
    path.write_text(text.replace(first, first + "  name: R2\n", 1), encoding="utf-8")
    err = refused(report(tmp_path, "--deployments", str(path)), capsys, f"{path}:3:")
    assert "key 'name' appears twice in one mapping (lines 2 and 3)" in err


def test_a_key_twice_in_a_json_deployments_file_is_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"deployments": [], "deployments": []}', encoding="utf-8")
    refused(report(tmp_path, "--deployments", str(path)), capsys, "key 'deployments' appears twice")


@pytest.mark.parametrize(
    ("second", "shown"),
    [
        ("R\u0399", r"'R\u0399'"),  # a Greek capital Iota
        ("R\u04401", r"'R\u04401'"),  # a Cyrillic er, against "Rp1" below
        ("\uff321", r"'\uff321'"),  # a fullwidth R: NFKC makes it "R1"
        ("R1\u200b", r"'R1\u200b'"),  # a zero-width space, invisible
    ],
)
def test_deployment_names_that_render_alike_are_2_showing_both_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], second: str, shown: str
) -> None:
    first = "Rp1" if second == "R\u04401" else "RI" if second == "R\u0399" else "R1"
    a, b = changed(), changed()
    a["name"], b["name"] = first, second
    path = deployments(tmp_path, a, b)
    err = refused(report(tmp_path, "--deployments", str(path)), capsys, str(path), shown)
    assert err.isascii()  # every name escaped, so the difference shows


def test_names_alike_by_unicode_normalisation_are_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = changed(), changed()
    a["name"], b["name"] = "caf\u00e9", "cafe\u0301"  # composed and decomposed é
    path = deployments(tmp_path, a, b)
    refused(
        report(tmp_path, "--deployments", str(path)),
        capsys,
        r"'caf\xe9' and 'cafe\u0301' look the same",
    )


# --- baselines ---------------------------------------------------------------------------


def test_a_baseline_holding_nan_is_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], previous: dict[str, Any]
) -> None:
    bent = copy.deepcopy(previous)
    bent["measurements"][0]["value"] = float("nan")
    path = baseline(tmp_path, bent)
    refused(report(tmp_path, "--baseline", path), capsys, path, "NaN is not JSON")


@pytest.mark.parametrize(
    ("where", "value", "named"),
    [
        (("deployments", 0, "window"), "2026-01-01", "deployments[0].window: Input should be"),
        (("deployments", 0, "window", "end"), "yesterday", "window.end: expected an ISO 8601"),
        (("measurements", 0, "annotations"), [1], "measurements[0].annotations[0]:"),
        (("measurements", 0, "value"), "1.5", "measurements[0].value: expected a number"),
        (("measurements", 0, "bounds"), {"lower": True}, "measurements[0].bounds.lower"),
        (("deployments", 0, "declared"), [], "deployments[0].declared: Input should be"),
        (("scope", "rules"), None, "scope.rules: Input should be a valid string"),
    ],
)
def test_a_baseline_field_of_the_wrong_type_is_2_naming_its_path(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    previous: dict[str, Any],
    where: tuple[str | int, ...],
    value: object,
    named: str,
) -> None:
    bent = copy.deepcopy(previous)
    parent: Any = bent
    for part in where[:-1]:
        parent = parent[part]
    parent[where[-1]] = value
    path = baseline(tmp_path, bent)
    refused(report(tmp_path, "--baseline", path), capsys, f"--baseline {path}", named)


def test_a_baseline_of_other_deployments_is_2_even_with_fail_on_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], previous: dict[str, Any]
) -> None:
    # Another fleet's report: before, the run passed --fail-on regression with 0, silent.
    bent = copy.deepcopy(previous)
    for d in bent["deployments"]:
        d["name"] = "OTHER"
    for m in bent["measurements"]:
        m["key"] = "OTHER/" + m["key"].split("/", 1)[1]
        m["deployment"] = "OTHER"
    for entry in (*bent["summary"], *bent["cautions"], *bent["timeline"]):
        entry["keys"] = ["OTHER/" + k.split("/", 1)[1] for k in entry["keys"]]
    path = baseline(tmp_path, bent)
    argv = report(tmp_path, "--baseline", path, "--fail-on", "regression", dataset=DATASET)
    refused(argv, capsys, path, "no deployment in common", "'OTHER'", "'R1'")
    assert not (tmp_path / "o").exists()  # refused before the work
