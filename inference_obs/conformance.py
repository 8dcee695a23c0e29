"""Check the local engine against Prometheus's own test cases.

Usage::

    python -m inference_obs.conformance FILE.json [FILE.json ...] \
        [--rules prometheus-2|prometheus-3]

Each file holds cases in the ``promql-conformance/1`` format of
``shared/conformance/promql-cases.json`` (its top-level keys document it):
the series a selector matches, the window, the function and its arguments,
and what Prometheus 2.42 (``expected``) and 3.x (``expected_v3``) return.
Every case is written as an expression of :mod:`inference_obs.query` where the
tree can express it and evaluated by the interpreter under the chosen rules, then
compared as promqltest compares: label sets exactly equal, values equal,
both NaN, or ``|a - b| / (|a| + |b|)`` below the case's relative tolerance.

Prints one line per failing case (its id and why), then ``N passed, M failed``.
Exit status: 0 if all passed, 1 if any failed, 2 if a file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inference_obs.engine.aggregation import group_keys, without_name
from inference_obs.engine.evaluate import DEFAULT_LOOKBACK_SECONDS, Evaluator
from inference_obs.engine.functions import RANGE_FUNCTIONS
from inference_obs.engine.histograms import histogram_fraction, parse_le
from inference_obs.engine.rules import Rules
from inference_obs.errors import DatasetError, NotSupportedOffline
from inference_obs.query import (
    Aggregate,
    Call,
    Expr,
    HistogramQuantile,
    Matcher,
    Number,
    Selector,
    to_promql,
)
from inference_obs.samples import STALE_NAN, Labels, SampleSet, Series, Vector

__all__ = ["FORMAT", "Case", "compare", "evaluate", "load_cases", "main", "run"]

#: The case file format this runner reads.
FORMAT = "promql-conformance/1"
NAME = "__name__"
_SPECIAL = {"NaN": np.nan, "+Inf": np.inf, "Inf": np.inf, "-Inf": -np.inf}
_EXPECTED = {Rules.PROMETHEUS_2: "expected", Rules.PROMETHEUS_3: "expected_v3"}

Result = list[tuple[Labels, float]]


@dataclass(frozen=True, slots=True)
class Case:
    """One conformance case, read and checked."""

    id: str
    function: str
    args: Mapping[str, Any]
    samples: SampleSet
    range_ms: tuple[int, int] | None
    expected: Mapping[Rules, Result]
    tolerance: float


def _number(value: object, *, stale: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise DatasetError(f"{value!r} is not a number")
    if isinstance(value, str):
        if stale and value == "stale":
            return STALE_NAN
        if value not in _SPECIAL:
            raise DatasetError(f"{value!r} is not a number, 'NaN', '+Inf' or '-Inf'")
        return _SPECIAL[value]
    return float(value)


def _ms(seconds: object) -> int:
    return round(_number(seconds) * 1000)


def _series(raw: Mapping[str, Any]) -> Series:
    labels = dict(raw["labels"])
    name = labels.pop(NAME)
    times = [float(t) for t, _ in raw["samples"]]
    values = [_number(v, stale=True) for _, v in raw["samples"]]
    return Series(name, labels, times, values)


def _case(raw: Mapping[str, Any]) -> Case:
    window = raw.get("range")
    expected = {
        rules: [(Labels(one["labels"]), _number(one["value"])) for one in raw[key]]
        for rules, key in _EXPECTED.items()
    }
    return Case(
        id=str(raw["id"]),
        function=str(raw["function"]),
        args=dict(raw["args"]),
        samples=SampleSet.from_series(_series(one) for one in raw["series"]),
        range_ms=(_ms(window["start"]), _ms(window["end"])) if window else None,
        expected=expected,
        tolerance=float(raw.get("tolerance", {}).get("relative", 1e-6)),
    )


def load_cases(path: Path) -> list[Case]:
    """Read and check every case of one file.

    Raises
    ------
    DatasetError
        If the file cannot be read, is not JSON, has another format, or a case
        is malformed; the message names the file (and the case).
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: not a JSON file ({exc})") from exc
    if not isinstance(document, dict) or not isinstance(document.get("cases"), list):
        raise DatasetError(f"{path}: expected a JSON object with a 'cases' list")
    if document.get("format") != FORMAT:
        raise DatasetError(f"{path}: format is {document.get('format')!r}, expected {FORMAT!r}")
    cases = []
    for index, raw in enumerate(document["cases"]):
        where = raw.get("id", f"#{index}") if isinstance(raw, dict) else f"#{index}"
        try:
            cases.append(_case(raw))
        except (KeyError, TypeError, ValueError, AttributeError, DatasetError) as exc:
            problem = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise DatasetError(f"{path}: case {where}: {problem}") from exc
    return cases


# -- evaluation --------------------------------------------------------------
#
# Every case whose query our expression tree can write goes through the
# interpreter, exactly as analyses' queries do; histogram_fraction (not in
# the tree) evaluates its bucket vector through the interpreter and applies
# the engine function to it.

#: Selects every series of a case (each case holds only what its selector matched).
_ALL = Selector(None, (Matcher.regex(NAME, ".+"),))


def _window_end(case: Case) -> float:
    if case.range_ms is None:
        raise DatasetError(f"{case.function} needs a 'range' with 'start' and 'end' seconds")
    return case.range_ms[1] / 1000


def _expression(case: Case) -> tuple[Expr, float, float]:
    """The case's query as an expression, the evaluation time (s) and the lookback (s)."""
    args, function = case.args, case.function
    lookback = float(args.get("lookback_s", DEFAULT_LOOKBACK_SECONDS))
    if function == "instant_selector":
        return _ALL, float(args["selector_time"]), lookback
    if function.startswith("histogram_"):
        inner = args.get("inner")
        vector: Expr = _ALL
        at = float(args["selector_time"]) if inner is None else _window_end(case)
        if inner is not None:
            vector = Call(str(inner), (_ALL.over(float(args["range_s"])),))
        if aggregation := args.get("aggregation"):
            vector = Aggregate(str(aggregation["op"]), vector, by=tuple(aggregation["by"]))
        if function == "histogram_quantile":
            return HistogramQuantile(Number(_number(args["q"])), vector), at, lookback
        return vector, at, lookback
    window = _ALL.over(float(args["range_s"]))
    if function == "sum_over_time/count_over_time":
        # The binary expression matches series with identical labels.
        ratio = Call("sum_over_time", (window,)) / Call("count_over_time", (window,))
        return ratio, _window_end(case), lookback
    if function == "quantile_over_time":
        return Call(function, (Number(_number(args["q"])), window)), _window_end(case), lookback
    if function not in RANGE_FUNCTIONS:
        supported = ", ".join(sorted(RANGE_FUNCTIONS))
        raise NotSupportedOffline(
            f"function {function!r} is not one the runner evaluates; besides "
            "instant_selector, histogram_*, sum_over_time/count_over_time and "
            f"quantile_over_time it takes {supported}"
        )
    return Call(function, (window,)), _window_end(case), lookback


def _fraction(case: Case, buckets: Vector, rules: Rules) -> Result:
    upper = parse_le([labels.get("le", "") for labels in buckets.labels])
    valid = np.flatnonzero(~np.isnan(upper))
    groups, names = group_keys(
        [buckets.labels[i] for i in valid.tolist()],
        lambda one: Labels((k, v) for k, v in one.items() if k != "le"),
    )
    lower, upper_bound = _number(case.args["lower"]), _number(case.args["upper"])
    result = histogram_fraction(
        lower, upper_bound, upper[valid], buckets.values[valid], groups, len(names), rules=rules
    )
    return [
        (without_name(names[g]), float(result.values[g]))
        for g in np.flatnonzero(result.present).tolist()
    ]


def evaluate(case: Case, rules: Rules) -> Result:
    """The instant vector the case's query returns under ``rules``."""
    expr, at, lookback = _expression(case)
    value = Evaluator(case.samples, rules=rules, lookback=lookback).evaluate(expr, at)
    if not isinstance(value, Vector):
        # An invariant, not input: every expression _expression builds selects series.
        raise ValueError(f"{to_promql(expr)} gave a scalar, not a vector")
    if case.function == "histogram_fraction":
        return _fraction(case, value, rules)
    return list(zip(value.labels, value.values.tolist(), strict=True))


# -- comparison --------------------------------------------------------------


def _close(a: float, b: float, tolerance: float) -> bool:
    # promqltest: equal (infinities included), both NaN, or relatively close.
    if a == b or (np.isnan(a) and np.isnan(b)):
        return True
    with np.errstate(invalid="ignore", over="ignore"):
        return bool(abs(a - b) / (abs(a) + abs(b)) < tolerance)


def _show(labels: Labels) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in labels.items()) + "}"


def compare(actual: Result, expected: Result, tolerance: float) -> str | None:
    """Why ``actual`` does not match ``expected`` (promqltest's rule), or None if it does."""
    got = dict(actual)
    if len(got) != len(actual):
        return "result has two samples with the same label set"
    want = dict(expected)
    missing = [_show(k) for k in want if k not in got]
    extra = [_show(k) for k in got if k not in want]
    if missing or extra:
        return f"label sets differ: missing {missing or 'none'}, unexpected {extra or 'none'}"
    for labels, value in want.items():
        if not _close(got[labels], value, tolerance):
            return f"{_show(labels)}: expected {value!r}, got {got[labels]!r}"
    return None


def run(cases: Sequence[Case], rules: Rules) -> list[tuple[str, str | None]]:
    """Each case's id and why it failed (None when it passed)."""
    outcomes: list[tuple[str, str | None]] = []
    for case in cases:
        try:
            reason = compare(evaluate(case, rules), case.expected[rules], case.tolerance)
        except Exception as exc:  # any crash fails this case, named, and the run goes on
            reason = f"cannot evaluate: {type(exc).__name__}: {exc}"
        outcomes.append((case.id, reason))
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m inference_obs.conformance",
        description="Evaluate PromQL conformance cases with the local engine.",
    )
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE.json")
    parser.add_argument(
        "--rules",
        choices=[rules.value for rules in _EXPECTED],
        default=Rules.PROMETHEUS_2.value,
        help="whose results to expect (default: %(default)s)",
    )
    options = parser.parse_args(argv)
    rules = Rules(options.rules)
    try:
        cases = [case for path in options.files for case in load_cases(path)]
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = 0
    for case_id, reason in run(cases, rules):
        if reason is not None:
            failed += 1
            print(f"FAIL {case_id}: {reason}")
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
