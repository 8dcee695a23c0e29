"""A bent baseline ends in DatasetError or in a comparison: never another exception.

A real report.json of the bundled r1-decode dataset is bent in one place at a
time, in a field the comparison reads (:data:`READ`: the format, the title,
the rule set, each deployment's name, window and declared setup, the fields of
the headline measurements and of those the comparability rules read): deleted, or replaced by a
value of another JSON type, NaN, an infinity, or text that looks like a
number. Each bent file is read as ``--baseline`` reads it and compared with
the real report; only :class:`~inference_obs.errors.DatasetError` or a
:class:`~inference_obs.report.baseline.Baseline` may come out. Before the
baseline was checked against its format, such files raised ``AttributeError``,
``TypeError`` or ``KeyError`` from inside the comparison, or compared text as
if it were a number.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from inference_obs.cli import main
from inference_obs.errors import DatasetError
from inference_obs.report.baseline import HEADLINES, Baseline, compare_reports, read_report_json
from inference_obs.report.report_json_model import ReportDocument

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "r1-decode"
# Measurements the comparability rules read besides the headlines.
_RULES_READ = ("throughput/finished_requests", "throughput/replicas_seen")

#: Values of every JSON type and the numbers JSON has no room for.
ODD = st.sampled_from(
    [
        *(None, True, 0, -1, 1.5, 1e308, "", "1.5", "+Inf", "NaN", "2026-13-01"),
        *([], [1], {}, {"a": 1}),
        *(float("nan"), float("inf"), float("-inf")),
    ]
).map(copy.deepcopy)  # a fresh list or dict each time: one example cannot change the next


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real report.json, trimmed to what the comparison reads (each example is then quick):
    the other measurements, and the summary, cautions and events that name them.

    A path, not the data: hypothesis shows a failing example's arguments, and the
    data would fill screens.
    """
    out = tmp_path_factory.mktemp("real")
    argv = ["report", "--dataset", str(DATASET), "--out", str(out), "--format", "json", "--quiet"]
    assert main(argv) == 0
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    wanted = {*HEADLINES, *_RULES_READ}
    data["measurements"] = [m for m in data["measurements"] if m["key"].split("/", 1)[1] in wanted]
    data.update(summary=[], cautions=[], timeline=[])  # their keys must be in measurements
    ReportDocument.model_validate(data, strict=True)  # still a whole report.json
    trimmed = out / "trimmed.json"
    trimmed.write_text(json.dumps(data), encoding="utf-8")
    return trimmed


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path into ``value``, the value itself (the empty path) included."""
    found: list[tuple[str | int, ...]] = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


#: The fields the comparison reads, "*" for any index (docs/report-json.md names them).
READ = [
    ("format",),
    ("title",),
    ("scope",),
    ("scope", "rules"),
    ("deployments",),
    ("deployments", "*"),
    *(("deployments", "*", f) for f in ("name", "window", "declared")),
    *(("deployments", "*", "window", f) for f in ("start", "end")),
    ("measurements",),
    ("measurements", "*"),
    *(
        ("measurements", "*", f)
        for f in ("key", "deployment", "unit", "status", "value", "bounds", "annotations")
    ),
    *(("measurements", "*", "bounds", f) for f in ("lower", "upper")),
    ("measurements", "*", "annotations", "*"),
    ("measurements", "*", "annotations", "*", "kind"),
]


def _read_paths(value: dict[str, Any]) -> list[tuple[str | int, ...]]:
    """The paths into ``value`` that match a :data:`READ` pattern."""

    def matches(path: tuple[str | int, ...], pattern: tuple[str, ...]) -> bool:
        return len(path) == len(pattern) and all(
            isinstance(p, int) if q == "*" else p == q for p, q in zip(path, pattern, strict=True)
        )

    return [p for p in _paths(value) if any(matches(p, q) for q in READ)]


def _bend(data: dict[str, Any], path: tuple[str | int, ...], value: object, drop: bool) -> None:
    parent: Any = data
    for part in path[:-1]:
        parent = parent[part]
    if drop:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value


@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,  # the same 200 files on every run
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
# The path is picked by index, so the strategy depends on nothing the fixture computes.
@given(pick=st.integers(min_value=0, max_value=2**16), drop=st.booleans(), value=ODD)
def test_a_bent_baseline_is_refused_or_compared(
    real: Path, tmp_path: Path, pick: int, drop: bool, value: object
) -> None:
    current: dict[str, Any] = json.loads(real.read_text(encoding="utf-8"))
    paths = _read_paths(current)
    path = paths[pick % len(paths)]
    event(f"field {'.'.join(str(p) for p in path if isinstance(p, str))}")
    bent = copy.deepcopy(current)
    _bend(bent, path, value, drop)
    file = tmp_path / "report.json"
    file.write_text(json.dumps(bent), encoding="utf-8")  # NaN and Infinity written bare
    try:
        previous = read_report_json(file)
        result = compare_reports(previous, ReportDocument.model_validate(current), source=str(file))
    except DatasetError as exc:
        event("refused")
        message = str(exc)
        assert str(file) in message
        assert "\n" not in message
        return
    event("compared")
    assert isinstance(result, Baseline)
    # No NaN came through: report.json writes infinities as "+Inf", but a NaN has no form.
    bare: list[str] = []  # the bare NaN and Infinity tokens json writes for such floats
    json.loads(json.dumps(result.model_dump()), parse_constant=bare.append)
    assert "NaN" not in bare
