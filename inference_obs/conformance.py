"""Check the local engine against Prometheus's own test cases.

Usage::

    python -m inference_obs.conformance FILE.json [FILE.json ...] \
        [--rules prometheus-2|prometheus-3]

Each file holds cases in the ``promql-conformance/1`` format of
``shared/conformance/promql-cases.json`` (its top-level keys document it):
the series a selector matches, the window, the function and its arguments,
and what Prometheus 2.42 (``expected``) and 3.x (``expected_v3``) return.
Every case is evaluated with the engine functions under the chosen rules and
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

from inference_obs.engine.functions import RANGE_FUNCTIONS
from inference_obs.engine.histograms import histogram_fraction, histogram_quantile, parse_le
from inference_obs.engine.rules import Rules
from inference_obs.engine.windows import TimeIndex, drop_stale
from inference_obs.errors import DatasetError
from inference_obs.samples import STALE_NAN, Labels, SampleSet, Series, is_stale

__all__ = ["FORMAT", "Case", "compare", "evaluate", "load_cases", "main", "run"]

#: The case file format this runner reads.
FORMAT = "promql-conformance/1"
NAME = "__name__"
_SPECIAL = {"NaN": np.nan, "+Inf": np.inf, "Inf": np.inf, "-Inf": -np.inf}
#: Functions whose result keeps the metric name (all others drop it).
_KEEP_NAME = frozenset({"instant_selector", "last_over_time"})
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
        raise ValueError(f"{value!r} is not a number")
    if isinstance(value, str):
        if stale and value == "stale":
            return STALE_NAN
        if value not in _SPECIAL:
            raise ValueError(f"{value!r} is not a number, 'NaN', '+Inf' or '-Inf'")
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


def _range(case: Case, function: str, rules: Rules) -> Result:
    """A range function over the case's window, as an instant vector."""
    if case.range_ms is None:
        raise ValueError(f"{function} needs a 'range'")
    samples = drop_stale(case.samples)
    start, end = case.range_ms
    windows = TimeIndex(samples).window(start, end, left_open=rules.left_open)
    extra = (_number(case.args["q"]),) if function == "quantile_over_time" else ()
    result = RANGE_FUNCTIONS[function](
        *extra, samples, windows, range_s=float(case.args["range_s"]), rules=rules
    )
    keep_name = function in _KEEP_NAME
    return [
        (
            Labels({NAME: samples.names[i], **samples.labels[i]})
            if keep_name
            else samples.labels[i],
            float(result.values[i]),
        )
        for i in np.flatnonzero(result.present).tolist()
    ]


def _instant(case: Case, rules: Rules) -> Result:
    """The newest sample within the lookback of ``args.selector_time``, unless it is stale."""
    at = _ms(case.args["selector_time"])
    index = TimeIndex(case.samples)
    window = index.window(at - _ms(case.args["lookback_s"]), at, left_open=rules.left_open)
    out: Result = []
    for i in np.flatnonzero(window.hi > window.lo).tolist():
        newest = case.samples.values[window.hi[i] - 1 : window.hi[i]]
        if not is_stale(newest)[0]:
            labels = Labels({NAME: case.samples.names[i], **case.samples.labels[i]})
            out.append((labels, float(newest[0])))
    return out


def _aggregate(vector: Result, op: str, by: Sequence[str]) -> Result:
    """``sum by (...)`` or ``avg by (...)``: one output per distinct value of the ``by`` labels."""
    sums: dict[Labels, list[float]] = {}
    for labels, value in vector:
        key = Labels((k, v) for k, v in labels.items() if k in by and k != NAME)
        sums.setdefault(key, []).append(value)
    if op == "sum":
        return [(key, float(np.sum(values))) for key, values in sums.items()]
    if op == "avg":
        return [(key, float(np.mean(values))) for key, values in sums.items()]
    raise ValueError(f"aggregation {op!r} is not supported")


def _histogram(case: Case, rules: Rules) -> Result:
    inner = case.args.get("inner")
    vector = _instant(case, rules) if inner is None else _range(case, str(inner), rules)
    if aggregation := case.args.get("aggregation"):
        vector = _aggregate(vector, aggregation["op"], aggregation["by"])
    upper = parse_le([labels.get("le", "") for labels, _ in vector])
    group_of: dict[Labels, int] = {}
    groups = np.array(
        [
            group_of.setdefault(
                Labels((k, v) for k, v in labels.items() if k != "le"), len(group_of)
            )
            for labels, _ in vector
        ],
        dtype=np.int64,
    )
    counts = np.array([value for _, value in vector], dtype=np.float64)
    if case.function == "histogram_quantile":
        result = histogram_quantile(
            _number(case.args["q"]), upper, counts, groups, len(group_of), rules=rules
        )
    else:
        lower, upper_bound = _number(case.args["lower"]), _number(case.args["upper"])
        result = histogram_fraction(
            lower, upper_bound, upper, counts, groups, len(group_of), rules=rules
        )
    # Only groups with a usable bucket exist in Prometheus's result.
    usable = np.zeros(len(group_of), dtype=bool)
    usable[groups[~np.isnan(upper)]] = True
    names = list(group_of)
    return [
        (Labels((k, v) for k, v in names[g].items() if k != NAME), float(result.values[g]))
        for g in np.flatnonzero(result.present & usable).tolist()
    ]


def evaluate(case: Case, rules: Rules) -> Result:
    """The instant vector the case's query returns under ``rules``."""
    if case.function == "instant_selector":
        return _instant(case, rules)
    if case.function.startswith("histogram_"):
        return _histogram(case, rules)
    if case.function == "sum_over_time/count_over_time":
        # The binary expression matches series with identical labels.
        counts = dict(_range(case, "count_over_time", rules))
        return [
            (labels, value / counts[labels])
            for labels, value in _range(case, "sum_over_time", rules)
            if labels in counts
        ]
    if case.function not in RANGE_FUNCTIONS:
        raise ValueError(f"function {case.function!r} is not supported")
    return _range(case, case.function, rules)


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
