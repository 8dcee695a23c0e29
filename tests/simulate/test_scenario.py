"""Scenario files: shipped ones load, and every schema error names its field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from pydantic import BaseModel, ValidationError

from inference_obs.errors import ConfigurationError
from inference_obs.simulate import ScenarioError, load_scenario, parse_scenario, scenario_names
from inference_obs.simulate.distributions import Beta, Choice, Constant, LogNormal, Uniform, draw
from inference_obs.simulate.durations import to_seconds
from inference_obs.simulate.scenario import Scrape
from inference_obs.simulate.workload import Burst

from .conftest import SHIPPED, SMALL


def _small() -> dict[str, Any]:
    data = yaml.safe_load(SMALL.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(yaml.safe_dump(data), "test.yaml")
    return str(caught.value)


def test_shipped_scenarios_load_by_name() -> None:
    assert set(SHIPPED) <= set(scenario_names())
    for name in SHIPPED:
        scenario = load_scenario(name)
        assert scenario.name == name
        assert scenario.deployments


def test_a_scenario_loads_from_a_path(tmp_path: Path) -> None:
    copy = tmp_path / "copy.yaml"
    copy.write_text(SMALL.read_text(encoding="utf-8"), encoding="utf-8")
    assert load_scenario(copy).name == "small"
    assert load_scenario(str(copy)).seed == 7


def test_an_unknown_name_lists_the_shipped_ones() -> None:
    with pytest.raises(ScenarioError, match="pro5000-vs-h20"):
        load_scenario("no-such-scenario")
    with pytest.raises(ScenarioError, match="does not exist"):
        load_scenario("missing.yaml")


def test_not_yaml_or_not_a_mapping_is_refused() -> None:
    with pytest.raises(ScenarioError, match=r"bad\.yaml: not valid YAML"):
        parse_scenario("a: [", "bad.yaml")
    with pytest.raises(ScenarioError, match="a scenario is a mapping"):
        parse_scenario("- 1", "bad.yaml")


def test_a_repeated_key_or_deep_nesting_is_refused_not_kept_last_or_a_recursion_error() -> None:
    with pytest.raises(ScenarioError, match=r"s\.yaml:2: key 'seed' appears twice"):
        parse_scenario("seed: 1\nseed: 2\n", "s.yaml")  # the second seed won silently
    with pytest.raises(ScenarioError, match=r"s\.yaml:1: nested deeper than 64"):
        parse_scenario("seed: " + "[" * 100_000 + "]" * 100_000, "s.yaml")


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (
            ("deployments", 0, "workload", 0, "rate_per_second"),
            -1,
            r"workload\[0\]\.rate_per_second",
        ),
        (
            ("deployments", 0, "workload", 0, "prompt_tokens"),
            {"kind": "lognormal", "median": 0, "sigma": 1},
            r"workload\[0\]\.prompt_tokens\.median",
        ),
        (
            ("deployments", 0, "workload", 0, "prompt_tokens"),
            {"kind": "gamma"},
            r"workload\[0\]\.prompt_tokens",
        ),
        (("deployments", 0, "kv_cache", "num_gpu_blocks"), 0, r"kv_cache\.num_gpu_blocks"),
        (("deployments", 0, "config", "max_num_seqs"), None, r"config\.max_num_seqs"),
        (("deployments", 0, "step", "base_ms"), "fast", r"step\.base_ms"),
        (("scrape", "interval"), "fortnightly", r"scrape\.interval"),
        (("scrape", "gpu_families"), ["DCGM_FI_DEV_GPU_TEMP"], r"scrape\.gpu_families"),
        (("scrape", "drop_buckets"), ["vllm:num_requests_running"], r"scrape\.drop_buckets"),
        (("window", "start"), "2026-01-05T09:00:00", r"window\.start"),
        (("faults", 0, "downtime"), "-5s", r"faults\[0\]\.downtime"),
        (("faults", 7, "family"), "vllm:no_such_metric", r"faults\[7\]\.family"),
        (("name",), "Not A Slug", r"^  name: String should match"),
    ],
)
def test_schema_errors_name_the_field(path: tuple[Any, ...], value: object, field: str) -> None:
    data = _small()
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    message = _error(data)
    assert message.startswith("test.yaml: invalid scenario")
    assert any(re.search(field, line) for line in message.splitlines()), message


def test_unknown_keys_are_refused_by_name() -> None:
    data = _small()
    data["deployments"][0]["workload"][0]["rate"] = 1
    data["scrape"]["intervall"] = "15s"
    message = _error(data)
    assert "deployments[0].workload[0].rate: Extra inputs are not permitted" in message
    assert "scrape.intervall: Extra inputs are not permitted" in message


def test_cross_references_are_checked() -> None:
    data = _small()
    data["faults"][0]["replica"] = "S-09"
    assert "faults[0]: unknown replica(s) ['S-09']" in _error(data)
    data = _small()
    data["faults"][4]["gpu"] = 2
    assert "faults[4].gpu: 2 but S-02 has 2 GPUs" in _error(data)
    data = _small()
    data["deployments"][0]["workload"][0]["clusters"][0]["replica"] = "X"
    assert "clusters[0].replica" in _error(data)
    data = _small()
    data["deployments"][0]["config"]["data_parallel_size"] = 3
    assert "not a multiple of config.data_parallel_size" in _error(data)


def test_durations_and_offsets() -> None:
    assert to_seconds("14m30s") == 870.0
    assert to_seconds("-2m") == -120.0
    assert to_seconds("0s") == 0.0
    assert to_seconds(12.5) == 12.5
    with pytest.raises(ScenarioError, match=r"'3 minutes': not a PromQL .*; or give a number of"):
        to_seconds("3 minutes")


@pytest.mark.parametrize(
    ("model", "data", "error", "message"),
    [
        (Uniform, {"kind": "uniform", "low": 2, "high": 1}, ScenarioError, "high 1.0 is below low"),
        (
            LogNormal,
            {"kind": "lognormal", "median": 1, "sigma": 1, "min": 3, "max": 2},
            ScenarioError,
            "max 2.0 is below min 3.0; swap them",
        ),
        (Choice, {"kind": "choice", "values": [1, 2], "weights": [1]}, ScenarioError, "1 weights"),
        (
            Choice,
            {"kind": "choice", "values": [1], "weights": [0]},
            ScenarioError,
            "weights [0.0] must be non-negative with a positive sum",
        ),
        (Burst, {"start": "2m", "end": "1m", "multiplier": 2}, ScenarioError, "end 60.0 s is not"),
        (Burst, {"start": 0, "end": "-1m", "multiplier": 2}, ScenarioError, "end -60.0 s is not"),
        (Scrape, {"warmup": "1m", "lead_in": "2m"}, ScenarioError, "warmup 60.0 s is shorter"),
        (Scrape, {"jitter": "-1s"}, ScenarioError, "a duration cannot be negative, got -1.0 s"),
        (
            Scrape,
            {"drop_families": ["vllm:nope"]},
            ConfigurationError,
            "'vllm:nope' is not a family of the catalogue",
        ),
    ],
)
def test_scenario_checks_raise_scenario_errors(
    model: type[BaseModel], data: dict[str, Any], error: type[Exception], message: str
) -> None:
    # pydantic reports each (a ValueError) as the field's error; parse_scenario
    # then raises one ScenarioError naming every field.
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    (problem,) = caught.value.errors()
    assert type(problem["ctx"]["error"]) is error
    assert message in str(problem["ctx"]["error"])


def test_distributions_draw_what_they_say() -> None:
    rng = np.random.default_rng(0)
    assert draw(Constant(value=3.0), rng, 4).tolist() == [3.0] * 4
    uniform = draw(Uniform(kind="uniform", low=1, high=2), rng, 1000)
    assert uniform.min() >= 1
    assert uniform.max() < 2
    lognormal = draw(LogNormal(kind="lognormal", median=100, sigma=0.5, max=150), rng, 10_000)
    assert lognormal.max() == 150
    assert abs(np.median(lognormal) - 100) < 3
    picks = draw(Choice(kind="choice", values=(1, 2), weights=(0, 1)), rng, 100)
    assert set(picks.tolist()) == {2.0}
    beta = draw(Beta(kind="beta", mean=0.9, concentration=50), rng, 10_000)
    assert abs(beta.mean() - 0.9) < 0.01
