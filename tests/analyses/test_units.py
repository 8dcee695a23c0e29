"""Analyses as units: the registry, settings by name, one run per deployment, results only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from inference_obs.analyses import ANALYSES, latency, queueing, run, throughput
from inference_obs.analyses.registry import analysis, parse_settings, settings_for
from inference_obs.analyses.run import DeploymentResults, run_one
from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.analyses.validity.verdicts import compare
from inference_obs.errors import ConfigurationError
from inference_obs.query import to_promql
from inference_obs.reading.context import Reading
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Window
from inference_obs.source.base import Source
from inference_obs.source.dataset.source import DatasetSource

DATASET = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def windows(source: DatasetSource) -> dict[str, Window]:
    window = source.dataset.manifest.window.window()
    return {d.name: window for d in source.dataset.manifest.deployments}


@pytest.fixture(scope="module")
def runs(source: DatasetSource, windows: dict[str, Window]) -> list[DeploymentResults]:
    return run(source, source.dataset.manifest.deployments, windows)


def test_every_analysis_is_registered_once_with_its_parts() -> None:
    names = [a.name for a in ANALYSES]
    assert len(names) == len(set(names))
    for one in ANALYSES:
        assert one.title
        assert one.summary
        assert issubclass(one.result, AnalysisResult)
        one.settings()  # every setting has a default
        for name, field in one.settings.model_fields.items():
            assert field.description, f"{one.name}.{name} has no description"
    assert analysis("queueing") is queueing


def test_settings_by_name_are_converted_and_checked() -> None:
    chosen = settings_for(parse_settings(["queueing.busy_threshold=60", "throughput.kv_full=0.9"]))
    assert chosen["queueing"].model_dump()["busy_threshold"] == 60.0
    assert chosen["throughput"].model_dump()["kv_full"] == 0.9
    assert chosen["latency"] == NoSettings()
    with pytest.raises(ConfigurationError, match="no analysis is called 'queue'"):
        settings_for({"queue": {"busy_threshold": "1"}})
    with pytest.raises(
        ConfigurationError, match=r"queueing\.busy_thresh.*queueing\.busy_threshold"
    ):
        settings_for({"queueing": {"busy_thresh": "1"}})
    with pytest.raises(ConfigurationError, match=r"throughput\.kv_full"):
        settings_for({"throughput": {"kv_full": "2"}})
    with pytest.raises(ConfigurationError, match=r"analysis\.setting=value"):
        parse_settings(["busy_threshold=60"])


def test_a_setting_given_by_keyword_or_by_model_is_the_same(
    source: DatasetSource, windows: dict[str, Window]
) -> None:
    d = source.dataset.manifest.deployments[1]
    by_keyword = throughput(source, d, windows[d.name], queue_share_threshold=0.0)
    model = throughput.configure({"queue_share_threshold": 0.0})
    assert throughput(source, d, windows[d.name], settings=model) == by_keyword
    with pytest.raises(ConfigurationError, match="throughput"):
        throughput(source, d, windows[d.name], no_such_setting=1)


def test_a_run_runs_each_analysis_once_per_deployment(
    source: DatasetSource, windows: dict[str, Window]
) -> None:
    calls: list[str] = []

    class Counted(AnalysisResult):
        pass

    def entry(r: Reading, settings: NoSettings) -> Counted:
        calls.append(r.deployment.name)
        return Counted()

    counting = Analysis("counting", "Counting", entry, Counted, NoSettings, "counts calls")
    deployments = source.dataset.manifest.deployments
    ran = run(source, deployments, windows, analyses=[counting])
    assert sorted(calls) == sorted(d.name for d in deployments)
    assert [one.of(counting) for one in ran] == [Counted(), Counted()]
    with pytest.raises(ConfigurationError, match="no latency result"):
        ran[0].of(latency)
    assert ran[0]["counting"] == Counted()
    with pytest.raises(ConfigurationError, match="no 'latency' result for PRO; ran: counting"):
        ran[0]["latency"]


def _sources_in(value: Any) -> list[Source]:
    if isinstance(value, Source):
        return [value]
    if isinstance(value, BaseModel):
        return [s for name in type(value).model_fields for s in _sources_in(getattr(value, name))]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _sources_in(item)]
    if isinstance(value, tuple | list):
        return [s for item in value for s in _sources_in(item)]
    return []


def test_no_result_holds_a_source(runs: list[DeploymentResults]) -> None:
    for one in runs:
        assert set(one.results) == {a.name for a in ANALYSES}
        assert _sources_in(one) == []


class _Asked:
    """A source that remembers the PromQL of every instant query."""

    def __init__(self, source: DatasetSource) -> None:
        self._source = source
        self.promql: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)

    def instant(self, expr: Any, at: float) -> Any:
        self.promql.append(to_promql(expr))
        return self._source.instant(expr, at)


def test_the_comparison_reads_results_and_asks_only_what_they_lack(
    source: DatasetSource, runs: list[DeploymentResults]
) -> None:
    asked = _Asked(source)
    verdicts = compare(asked, runs)
    assert verdicts.pairs
    # The analyses' own questions (latency quantiles, token totals) are not asked again.
    assert asked.promql
    assert not [q for q in asked.promql if "histogram_quantile" in q]
    assert not [q for q in asked.promql if "generation_tokens_total" in q]


def test_run_one_takes_settings_by_name(source: DatasetSource, windows: dict[str, Window]) -> None:
    d = source.dataset.manifest.deployments[1]
    strict = settings_for({"throughput": {"queue_share_threshold": 1.0, "kv_full": 1.0}})
    ran = run_one(source, d, windows[d.name], settings=strict, analyses=[throughput])
    assert ran.of(throughput).regime.value != "capacity_limited"
