"""``inference-obs lint`` and ``dashboards export``: formats, exit statuses, errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from inference_obs.cli import main
from inference_obs.errors import ConfigurationError
from inference_obs.lint import CODES
from inference_obs.lint.context import Options

FIXTURES = Path(__file__).parent / "lint" / "fixtures"
WRONG_QUANTILE = FIXTURES / "OBS103-quantile-averaged" / "wrong.yml"
RIGHT_QUANTILE = FIXTURES / "OBS103-quantile-averaged" / "right.yml"
WARNING_ONLY = FIXTURES / "OBS101-quantile-per-series" / "wrong.yml"


def test_exit_1_on_an_error_finding_0_otherwise(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(WRONG_QUANTILE)]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == str(WRONG_QUANTILE)
    assert lines[1] == "  VllmSlowRequests"
    assert lines[2].startswith(
        "    error   OBS103 quantile-averaged line 5 [alert]: avg() of quantiles"
    )
    assert " -> histogram_quantile(0.99, sum by (le) (" in lines[2]
    assert lines[-1] == "2 findings in 1 file: 2 errors, 0 warnings, 0 infos"
    assert main(["lint", str(RIGHT_QUANTILE)]) == 0
    assert main(["lint", str(WARNING_ONLY)]) == 0


def test_json_lists_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--format", "json", str(WRONG_QUANTILE)]) == 1
    findings = json.loads(capsys.readouterr().out)
    assert [f["code"] for f in findings] == ["OBS103", "OBS103"]
    first = findings[0]
    assert set(first) == {
        "code", "name", "severity", "file", "where", "ref", "line", "expression", "message",
        "explanation", "fix",
    }  # fmt: skip
    assert first["severity"] == "error"
    assert first["expression"].startswith("avg(histogram_quantile(0.99")
    assert first["fix"].startswith("histogram_quantile(0.99, sum by (le)")


def test_sarif_is_a_2_1_0_log(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--format", "sarif", str(WRONG_QUANTILE), str(WARNING_ONLY)]) == 1
    log = json.loads(capsys.readouterr().out)
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == [c.id for c in CODES]
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels == {"OBS103": "error", "OBS101": "warning"}
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"].endswith(".yml")
        assert location["physicalLocation"]["region"]["startLine"] >= 1
        assert location["logicalLocations"][0]["name"]
        assert result["message"]["text"]


def test_exit_2_with_one_line_naming_file_and_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"panels": [}', encoding="utf-8")
    assert main(["lint", str(WRONG_QUANTILE), str(broken)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert f"{broken}:1:13: not JSON" in captured.err
    rules = tmp_path / "rules.yml"
    rules.write_text("groups:\n  - name: [\n", encoding="utf-8")
    assert main(["lint", str(rules)]) == 2
    assert f"{rules}:3:1: not YAML" in capsys.readouterr().err


def test_version_options(capsys: pytest.CaptureFixture[str]) -> None:
    removed = FIXTURES / "OBS401-family-removed" / "wrong.yml"
    assert main(["lint", str(removed)]) == 1
    assert main(["lint", "--vllm-version", "0.10.0", str(removed)]) == 0
    assert "OBS403" in capsys.readouterr().out
    assert main(["lint", "--sglang-version", "latest", str(removed)]) == 2
    assert (
        "inference-obs: sglang_version (--sglang-version): version 'latest': expected numbers "
        "separated by dots, e.g. 0.12.0" in capsys.readouterr().err
    )


def test_a_version_that_is_no_version_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"vllm_version \(--vllm-version\): version 'v'"):
        Options(vllm_version="v")
    assert Options(vllm_version="vLLM 0.10.1").vllm_version == "vLLM 0.10.1"


def test_help_explains_the_codes_and_exit_statuses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["lint", "--help"])
    text = capsys.readouterr().out
    assert "docs/lint.md" in text
    assert "Exit status: 0 no error-level finding, 1 at least one, 2 a file" in text
    assert "--vllm-version" in text


def test_dashboards_export_writes_checks_and_lints_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "dashboards"
    assert main(["dashboards", "export", "--out", str(out), "--check"]) == 1
    assert main(["dashboards", "export", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["dcgm.json", "sglang.json", "vllm.json"]
    assert main(["dashboards", "export", "--out", str(out), "--check"]) == 0
    capsys.readouterr()
    assert main(["lint", str(out)]) == 0
    assert capsys.readouterr().out == "0 findings in 3 files: 0 errors, 0 warnings, 0 infos\n"


def test_sarif_uris_are_valid_uri_references_of_the_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    names = ["dash boards/p99 #1.json", "what?.yml", "100%.yml", "tableau/débit ü.yml"]
    text = WRONG_QUANTILE.read_text()
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text if name.endswith(".yml") else "{}")
    (tmp_path / names[0]).write_text(
        json.dumps({"panels": [{"title": "p", "libraryPanel": {"uid": "u", "name": "n"}}]})
    )
    assert main(["lint", "--format", "sarif", *names]) == 1
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]
    }
    assert len(uris) == len(names)
    for uri in uris:
        parts = urlsplit(uri)
        # A relative reference: no scheme, no query, no fragment; only unreserved
        # characters, "/" and %XX escapes (RFC 3986), and it decodes to a name given.
        assert (parts.scheme, parts.netloc, parts.query, parts.fragment) == ("", "", "", "")
        assert re.fullmatch(r"(?:[A-Za-z0-9._~/-]|%[0-9A-F]{2})+", uri), uri
        assert unquote(parts.path) in names
    assert {unquote(u) for u in uris} == set(names)
