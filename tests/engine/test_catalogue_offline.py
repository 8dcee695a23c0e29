"""The local engine gives every builder's known answer on the catalogue data.

The same synthetic data and expected numbers that real Prometheus and
VictoriaMetrics are held to (:mod:`tests.catalogue_data`), evaluated offline
under each rule set.
"""

from __future__ import annotations

import pytest

from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.rules import Rules
from inference_obs.errors import NotSupportedOffline
from inference_obs.metrics import STANDARD_QUERIES, StandardQuery
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, to_promql
from inference_obs.samples import SampleSet, Vector
from tests.catalogue_data import CHECKS, HOUR, SERIES, T_END, close

SAMPLES = SampleSet.from_series(SERIES)
EVALUATORS = {rules: Evaluator(SAMPLES, rules=rules) for rules in Rules}


# The engine has no model of VictoriaMetrics' bucket repair and interpolation:
# under its rules histogram_quantile refuses (tested below) rather than guess.
CASES = [
    (rules, *check)
    for rules in Rules
    for check in CHECKS
    if not (rules is Rules.VICTORIAMETRICS and check[1].startswith("p"))
]


@pytest.mark.parametrize(
    ("rules", "family", "what", "expr", "expected"),
    CASES,
    ids=[f"{c[0]}-{c[1].name}-{c[2]}" for c in CASES],
)
def test_builder_offline(
    rules: Rules, family: Family, what: str, expr: Expr, expected: float
) -> None:
    result = EVALUATORS[rules].evaluate(expr, T_END)
    assert isinstance(result, Vector)
    assert len(result) == 1, f"{to_promql(expr)} gave {result.as_dict()}"
    actual = float(result.values[0])
    assert close(actual, expected), f"{what} of {family.name}: {actual} != {expected}"


@pytest.mark.parametrize("query", STANDARD_QUERIES, ids=lambda q: q.key)
def test_standard_query_offline(query: StandardQuery) -> None:
    result = EVALUATORS[Rules.PROMETHEUS_2].evaluate(query.expr(window=HOUR), T_END)
    assert isinstance(result, Vector)
    assert len(result), f"{query.key}: no series offline"


def test_histogram_quantile_is_not_guessed_under_victoria_metrics_rules() -> None:
    quantile = next(c[2] for c in CHECKS if c[1] == "p50")
    with pytest.raises(NotSupportedOffline, match="VictoriaMetrics"):
        EVALUATORS[Rules.VICTORIAMETRICS].evaluate(quantile, T_END)
