"""A bad option is a ConfigurationError; the CLI never raises the bare base class.

The base :class:`InferenceObsError` says "something in inference_obs"; a caller
driving the CLI's option checks from Python (a scheduler, a notebook) should be
able to tell a bad setting from a source failure by class, as the exit status does.
"""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

import inference_obs.cli
from inference_obs.cli import options, times
from inference_obs.errors import ConfigurationError, InferenceObsError

CLI = Path(inference_obs.cli.__file__).parent


def _bare_base_errors(path: Path) -> list[int]:
    """Lines of ``path`` that build the base class itself (``InferenceObsError(...)``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "InferenceObsError"
    ]


def test_no_cli_module_builds_the_bare_base_error() -> None:
    found = {p.name: lines for p in sorted(CLI.glob("*.py")) if (lines := _bare_base_errors(p))}
    assert found == {}


def test_the_scan_sees_a_bare_base_error(tmp_path: Path) -> None:
    # The scan above would pass on any text if it never matched: show that it does.
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    raise InferenceObsError('x')\n", encoding="utf-8")
    assert _bare_base_errors(sample) == [2]


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda: times.moment("yesterday-ish", "--end", datetime(2026, 1, 1, tzinfo=UTC)), "--end"),
        (lambda: options.prices(["H100"]), "--gpu-hour-price"),
        (lambda: options.topologies(["H100"]), "--topology"),
        (lambda: options.positive_seconds("-3", "--time-budget"), "--time-budget"),
        (lambda: options.resolution("every-now-and-then"), "--resolution"),
    ],
)
def test_bad_options_raise_configuration_errors_naming_the_option(call: object, named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        call()  # type: ignore[operator]
    assert named in str(caught.value)
    # Still caught by the base class, as every caller of the library expects.
    assert isinstance(caught.value, InferenceObsError)
