"""One wrong and one right file per finding code: the wrong one is found, the right one is clean.

Each folder of ``tests/lint/fixtures`` is named after a code and holds
``wrong.*`` and ``right.*`` (a dashboard, a rule file or a .promql file) and,
where the version in use matters, ``options.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inference_obs.lint import CODES, Options, lint_paths

FIXTURES = Path(__file__).parent / "fixtures"
CASES = sorted(p for p in FIXTURES.iterdir() if p.is_dir())


def _options(case: Path) -> Options:
    path = case / "options.json"
    return Options(**json.loads(path.read_text())) if path.exists() else Options()


def _one(case: Path, label: str) -> Path:
    (found,) = case.glob(f"{label}.*")
    return found


def test_every_code_has_a_case() -> None:
    assert [case.name for case in CASES] == [f"{c.id}-{c.name}" for c in CODES]


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_the_wrong_variant_is_found_with_its_code(case: Path) -> None:
    expected = case.name.split("-")[0]
    findings = lint_paths([_one(case, "wrong")], _options(case))
    assert expected in {f.code for f in findings}, [f.message for f in findings]
    for finding in findings:
        assert finding.message
        assert finding.explanation
        assert finding.file.endswith(_one(case, "wrong").name)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_the_right_variant_is_not_flagged(case: Path) -> None:
    findings = lint_paths([_one(case, "right")], _options(case))
    assert [(f.code, f.message) for f in findings] == []


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_a_fix_is_clean_of_its_own_code(case: Path) -> None:
    """Where a finding carries a corrected expression, that expression no longer has the fault."""
    from inference_obs.lint import lint_text

    expected = case.name.split("-")[0]
    wrong = _one(case, "wrong")
    for finding in lint_paths([wrong], _options(case)):
        if finding.code != expected or finding.fix is None:
            continue
        if wrong.suffix == ".json":
            panel = {
                "title": finding.where,
                "type": "timeseries",
                "targets": [{"expr": finding.fix}],
            }
            again = lint_text(json.dumps({"panels": [panel]}), "dashboard", _options(case))
        else:
            again = lint_text(finding.fix, "promql", _options(case))
        assert expected not in {f.code for f in again}, finding.fix
