"""Every number of the bundled datasets' reports, pinned: a change to how the numbers are
asked for (in threads, several questions in one query) must leave each of them as it was.

``tests/fixtures/reports/<dataset>.json`` holds, for each bundled dataset, every number
of the ``report.json`` that ``inference-obs report --dataset datasets/<dataset>`` writes,
and every ``status`` and ``verdict``, keyed by its path in the document (a measurement by
its key, a verdict by its comparison, a finding by its code, anything else by its place).
A change meant to change numbers rewrites them, from the repository root, with::

    python -m tests.report.test_report_numbers
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import main

ROOT = Path(__file__).resolve().parents[2]
DATASETS = ("pro5000-vs-h20", "h100-vs-h200", "r1-decode")
PINNED = ROOT / "tests" / "fixtures" / "reports"
#: Leaves kept besides numbers: what a number means depends on them.
WORDS = ("status", "verdict")


def _name(item: Any, i: int) -> str:
    """A list item's name in a path: its key, comparison or code where it has one."""
    if isinstance(item, dict):
        for field in ("key", "comparison", "code"):
            if isinstance(item.get(field), str):
                return str(item[field])
    return str(i)


def numbers(node: Any, path: str = "") -> dict[str, Any]:
    """Every number (and ``status``, ``verdict``) of a report.json document, by path."""
    out: dict[str, Any] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            if key in WORDS and isinstance(value, str):
                out[f"{path}/{key}"] = value
            else:
                out.update(numbers(value, f"{path}/{key}"))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            out.update(numbers(item, f"{path}/{_name(item, i)}"))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        out[path] = node
    return out


def report_numbers(dataset: str, out: Path) -> dict[str, Any]:
    """The numbers of the report the command line writes for a bundled dataset."""
    argv = ["report", "--dataset", str(ROOT / "datasets" / dataset), "--format", "json"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    return numbers(json.loads((out / "report.json").read_text(encoding="utf-8")))


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_number_of_the_report_is_as_pinned(dataset: str, tmp_path: Path) -> None:
    pinned = json.loads((PINNED / f"{dataset}.json").read_text(encoding="utf-8"))
    got = report_numbers(dataset, tmp_path)
    assert got.keys() == pinned.keys()
    changed = {path: (pinned[path], got[path]) for path in pinned if got[path] != pinned[path]}
    assert not changed, changed
    assert len(got) > 100


if __name__ == "__main__":  # pragma: no cover - rewrites the pinned numbers
    import tempfile

    for name in DATASETS:
        with tempfile.TemporaryDirectory() as tmp:
            found = report_numbers(name, Path(tmp))
        text = json.dumps(found, indent=1, sort_keys=True) + "\n"
        (PINNED / f"{name}.json").write_text(text, encoding="utf-8")
        print(f"{name}: {len(found)} pinned", file=sys.stderr)
