"""The README's Python examples run as written, from the repository root."""

from __future__ import annotations

import itertools
import re
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(
    r"```python\n(.*?)```", (REPO / "README.md").read_text(encoding="utf-8"), re.DOTALL
)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(
    code: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    # As a module of its own, as a reader's file would be: pydantic finds a model's
    # annotations through the module that defines it.
    module = types.ModuleType("readme_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(code, "README.md", "exec"), module.__dict__)
    printed = capsys.readouterr().out
    # A comment right after a print() line is the output the README promises.
    lines = code.splitlines()
    expected = [
        after.removeprefix("# ")
        for before, after in itertools.pairwise(lines)
        if before.startswith("print(") and after.startswith("# ")
    ]
    for line in expected:
        assert line in printed
