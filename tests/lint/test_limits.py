"""lint stays bounded on any input: each limit refuses with a clear error, work grows linearly.

Growth is timed at n and 4n in the same test: a linear reader takes about 4
times as long, a quadratic one 16 times; the bound asserted (8 times) lies
between. Each timing is the best of a few runs, so a busy machine does not
decide the ratio.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from inference_obs.errors import LintInputError
from inference_obs.lint import lint_paths, lint_text
from inference_obs.lint.limits import (
    MAX_ALIAS_NODES,
    MAX_EXPRESSION_CHARS,
    MAX_FILE_BYTES,
    MAX_NESTING,
    MAX_QUERIES,
    MAX_VARIABLES,
)
from inference_obs.query import MAX_DEPTH

LINEAR = 8.0  # the most a 4 times larger input may cost, in times


def _best_seconds(run: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs, the collector off: the least a run costs, which a
    busy machine can only raise (a ratio of single runs of a few ms is noise)."""
    best = float("inf")
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - start)
    finally:
        if collecting:
            gc.enable()
    return best


def _billion_laughs() -> str:
    # 3.3 KB: one rule, 400 aliases of it in a group, 400 aliases of the group:
    # 160,000 rules once expanded.
    rule = "r: &r {record: 'a:b', expr: 'sum(rate(x_total[5m]))'}\n"
    rules = "rs: &rs [" + ", ".join(["*r"] * 400) + "]\n"
    group = "g: &g {name: g, rules: *rs}\n"
    return rule + rules + group + "groups: [" + ", ".join(["*g"] * 400) + "]\n"


def test_a_billion_laughs_rule_file_is_refused_quickly_naming_the_file_and_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "laughs.yml"
    path.write_text(_billion_laughs())
    assert path.stat().st_size < 4000
    start = time.perf_counter()
    with pytest.raises(LintInputError) as info:
        lint_paths([path])
    assert time.perf_counter() - start < 2.0  # on main: minutes, and 517 MiB
    message = str(info.value)
    assert message.startswith(f"{path.as_posix()}:")
    assert f"more than {MAX_ALIAS_NODES:,} nodes" in message


def test_a_billion_laughs_stays_small_in_memory(tmp_path: Path) -> None:
    """The refusal's peak memory, read as VmHWM in a child process of its own."""
    path = tmp_path / "laughs.yml"
    path.write_text(_billion_laughs())
    child = (
        "import sys\n"
        "from inference_obs.errors import LintInputError\n"
        "from inference_obs.lint import lint_paths\n"
        "def peak():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            return int(line.split()[1]) / 1024\n"
        "before = peak()\n"
        "try:\n"
        "    lint_paths([sys.argv[1]])\n"
        "except LintInputError:\n"
        "    pass\n"
        "print(before, peak())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", child, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=Path(__file__).parents[2],
    ).stdout
    before_mib, after_mib = map(float, out.split())
    assert after_mib - before_mib < 50  # expanding it took over 400 MiB more


def test_aliases_for_shared_labels_are_still_read() -> None:
    text = (
        "groups:\n"
        "- name: g\n"
        "  rules:\n"
        "  - alert: A\n"
        "    expr: sum(rate(x_total[5m])) > 1\n"
        "    labels: &labels {team: serving, severity: page}\n"
        "  - alert: B\n"
        "    expr: sum(rate(y_total[5m])) > 1\n"
        "    labels: *labels\n"
    )
    assert [f.code for f in lint_text(text, "rules")] == []


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.json", '{"panels": ' + "[" * 5000 + "]" * 5000 + "}"),
        ("deep.yml", "groups: " + "[" * 5000 + "]" * 5000 + "\n"),
        ("deep-block.yml", "groups:\n" + "".join("  " * i + "- \n" for i in range(1, 300))),
    ],
)
def test_deep_nesting_is_refused_naming_the_file_and_limit(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(LintInputError) as info:  # on main: RecursionError
        lint_paths([path])
    assert str(info.value).startswith(f"{path.as_posix()}:1:") or name == "deep-block.yml"
    assert f"nested more than {MAX_NESTING} levels deep" in str(info.value)


def test_a_dashboard_nested_to_the_limit_is_read() -> None:
    # 12 levels used by the dashboard itself, the rest of the limit in one property.
    value: object = "x"
    for _ in range(MAX_NESTING - 10):
        value = {"v": value}
    panel = {"title": "p", "options": value, "targets": [{"expr": "sum(rate(x_total[5m]))"}]}
    assert list(lint_text(json.dumps({"panels": [panel]}), "dashboard")) == []


def test_a_file_past_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with path.open("wb") as out:
        out.truncate(MAX_FILE_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(LintInputError, match=r"big\.json:1:1: 16\.0 MiB, more than lint reads"):
        lint_paths([path])


def test_too_many_queries_or_variables_are_refused_naming_the_limit() -> None:
    targets = [{"expr": "up"}] * (MAX_QUERIES + 1)
    dashboard = json.dumps({"panels": [{"title": "p", "targets": targets}]})
    with pytest.raises(LintInputError, match=f"{MAX_QUERIES + 1:,} queries, more than lint"):
        lint_text(dashboard, "dashboard")
    variables = [{"name": f"v{i}", "type": "custom"} for i in range(MAX_VARIABLES + 1)]
    dashboard = json.dumps({"panels": [], "templating": {"list": variables}})
    with pytest.raises(LintInputError, match=f"{MAX_VARIABLES + 1:,} template variables"):
        lint_text(dashboard, "dashboard")


def test_an_expression_past_the_length_limit_is_not_read_and_says_why() -> None:
    text = "sum by (" + ", ".join(f"l{i}" for i in range(MAX_EXPRESSION_CHARS // 6)) + ") (x)"
    assert len(text) > MAX_EXPRESSION_CHARS
    (finding,) = lint_text(text)
    assert finding.code == "OBS001"
    assert f"({MAX_EXPRESSION_CHARS:,} per expression)" in finding.message


@pytest.mark.parametrize(
    "text",
    [
        "(" * 500 + "x" + ")" * 500,
        " or ".join(f"x{i}" for i in range(1000)),
        "abs(" * 500 + "x" + ")" * 500,
        "-" * 500 + "x",
    ],
    ids=["parentheses", "or-chain", "calls", "unary-minus"],
)
def test_deep_promql_is_one_finding_naming_the_limit(text: str) -> None:
    (finding,) = lint_text(text)  # on main: RecursionError
    assert finding.code == "OBS001"
    assert f"nests more than {MAX_DEPTH} levels deep" in finding.message


@pytest.mark.parametrize(
    "text",
    [
        "(" * (MAX_DEPTH - 1) + "x" + ")" * (MAX_DEPTH - 1),
        " or ".join(f"x{i}" for i in range(MAX_DEPTH)),
        "sum(" * (MAX_DEPTH - 1) + "x" + ")" * (MAX_DEPTH - 1),
    ],
    ids=["parentheses", "or-chain", "aggregations"],
)
def test_promql_nested_to_the_limit_is_read_and_checked(text: str) -> None:
    # Every check walks the tree at the deepest depth allowed, in a dashboard too.
    assert [f.code for f in lint_text(text)] == []
    dashboard = json.dumps({"panels": [{"title": "t", "targets": [{"expr": text}]}]})
    assert [f.code for f in lint_text(dashboard, "dashboard")] == []


# Text beside each query (a description), as real panels have: searching the whole
# text for each query's line made reading quadratic in the panels.
_BESIDE = "d" * 2000


def _growth(small: Callable[[], object], large: Callable[[], object]) -> float:
    """The least of three measured ratios of ``large``'s cost to ``small``'s: a busy
    machine only inflates a ratio, so a linear reading in any attempt is the reading;
    quadratic code reads high in every one."""
    return min(_best_seconds(large) / _best_seconds(small) for _ in range(3))


def _panels(n: int) -> str:
    return json.dumps(
        {
            "panels": [
                {
                    "title": f"p{i}",
                    "description": _BESIDE,
                    "targets": [{"expr": f"sum(rate(x{i}_total[5m]))"}],
                }
                for i in range(n)
            ]
        },
        indent=1,
    )


def _widgets(n: int) -> str:
    tiles = [
        {
            "widget": {
                "title": "same",
                "text": {"content": _BESIDE},
                "xyChart": {
                    "dataSets": [
                        {"timeSeriesQuery": {"prometheusQuery": f"sum(rate(x{i}_total[5m]))"}}
                    ]
                },
            }
        }
        for i in range(n)
    ]
    return json.dumps({"mosaicLayout": {"tiles": tiles}}, indent=1)


@pytest.mark.parametrize(
    ("make", "n"),
    [
        (_panels, 500),  # on main: 12 times for 4 times the panels (the text searched per query)
        (_widgets, 500),
    ],
    ids=["grafana-panels", "cloud-monitoring-widgets"],
)
def test_many_panels_take_linear_time(make: Callable[[int], str], n: int) -> None:
    small, large = make(n), make(4 * n)
    lint_text(small, "dashboard")  # imports and caches warm
    ratio = _growth(lambda: lint_text(small, "dashboard"), lambda: lint_text(large, "dashboard"))
    assert ratio < LINEAR


def test_lines_are_those_of_each_expression_in_order() -> None:
    quantile = "histogram_quantile(0.99, rate(x_bucket[5m]))"  # OBS101: one per series
    text = _panels(3).replace("sum(rate(x1_total[5m]))", quantile)
    text = text.replace("sum(rate(x2_total[5m]))", quantile)
    lines = [i for i, line in enumerate(text.splitlines(), 1) if "histogram_quantile" in line]
    assert len(lines) == 2
    # The same expression twice: each finding at its own occurrence.
    assert [(f.code, f.line) for f in lint_text(text, "dashboard")] == [
        ("OBS101", lines[0]),
        ("OBS101", lines[1]),
    ]


def _spaced_grouping(n: int) -> str:
    # A variable after a grouping list that starts with n spaces.
    return "sum by (" + " " * n + "le) (rate(x_total[5m])) > $threshold"


def _variables(n: int) -> str:
    return "sum by (" + ", ".join(f"$v{i}" for i in range(n)) + ") (rate(x_total[5m]))"


@pytest.mark.parametrize(
    ("make", "n"),
    [
        (_spaced_grouping, 12_000),  # on main: 3 s at 48 KB, 16 times for 4 times the spaces
        (_variables, 6_000),  # on main: 12,000 variables take 20 s, 16 times for 4 times
    ],
    ids=["grouping-list-48kb", "variables-24000"],
)
def test_long_expressions_take_linear_time(make: Callable[[int], str], n: int) -> None:
    small, large = make(n), make(4 * n)
    lint_text(small)
    ratio = _growth(lambda: lint_text(small), lambda: lint_text(large))
    assert ratio < LINEAR
    assert _best_seconds(lambda: lint_text(large), 1) < 2.0


def test_many_variables_are_restored_in_a_fix() -> None:
    # A counter drawn without rate(): the fix is rendered and every variable written back.
    text = "sum by (" + ", ".join(f"$v{i}" for i in range(12_000)) + ") (x_total)"
    start = time.perf_counter()
    (finding,) = (f for f in lint_text(text) if f.fix is not None)
    assert time.perf_counter() - start < 5.0
    assert finding.fix is not None
    assert finding.fix.startswith("sum by ($v0, $v1, ")
    assert "$v11999) (rate(x_total[" in finding.fix
    assert "0.4242" not in finding.fix
