"""The public API is explicit: each package's __all__ is sorted and importable."""

from __future__ import annotations

import importlib

import pytest

PACKAGES = [
    "inference_obs",
    "inference_obs.query",
    "inference_obs.metrics",
    "inference_obs.errors",
    "inference_obs.source",
    "inference_obs.analyses",
    "inference_obs.report",
    "inference_obs.lint",
    "inference_obs.dashboards",
    "inference_obs.discover",
]


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    kind = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return kind, name


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported, key=_isort_key)
    for symbol in exported:
        assert hasattr(module, symbol), f"{name}.{symbol} is in __all__ but missing"


def test_top_level_api_is_pinned() -> None:
    import inference_obs

    assert inference_obs.__all__ == [
        "FAMILIES",
        "STANDARD_QUERIES",
        "TLS",
        "Annotation",
        "AnswerTooLarge",
        "BasicAuth",
        "BearerToken",
        "ConfigurationError",
        "DatasetError",
        "DatasetSource",
        "DeclaredConfig",
        "Deployment",
        "Engine",
        "Expr",
        "Family",
        "Hardware",
        "InferenceObsError",
        "Matcher",
        "MetricType",
        "NoDataError",
        "NotSupportedOffline",
        "PrometheusSource",
        "QueryError",
        "QueryFailed",
        "Report",
        "ScenarioError",
        "Selector",
        "Source",
        "SourceError",
        "SourceUnavailable",
        "StandardQuery",
        "TimeBudgetExceeded",
        "Window",
        "__version__",
        "analyses",
        "load_deployments",
        "read_dataset",
        "report",
        "to_promql",
    ]
