"""A figure's file name holds any deployment name, and two names never share one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from inference_obs.report.figure_plan import figure_name


def _named(name: str) -> str:
    run = cast("Any", SimpleNamespace(deployment=SimpleNamespace(name=name)))
    return figure_name(run, "gpu-heatmap")


@pytest.mark.parametrize(
    ("deployment", "expected"),
    [
        ("H20", "H20-gpu-heatmap"),
        ("H20/tp8", "H20%2Ftp8-gpu-heatmap"),  # a path separator cannot be in a file name
        ("100%", "100%25-gpu-heatmap"),  # '%' is encoded too, so the decoding is unique
        (".hidden", "%2Ehidden-gpu-heatmap"),  # not a hidden file
        ("a.b", "a.b-gpu-heatmap"),  # a dot inside is a file name's own
    ],
)
def test_a_deployment_name_becomes_one_file_name(deployment: str, expected: str) -> None:
    assert _named(deployment) == expected
    assert "/" not in _named(deployment)


def test_names_that_differ_give_figures_that_differ() -> None:
    names = ["a/b", "a%2Fb", "a%b", "a%25b", ".a", "%2Ea"]
    assert len({_named(n) for n in names}) == len(names)
