"""Deployments: the compact selector form, validation, and Window edges."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from inference_obs.analyses.cost import cost
from inference_obs.deployment import Deployment, compact_value, parse_selector
from inference_obs.discover import unmatched_selectors
from inference_obs.errors import ConfigurationError, DatasetError, QueryError
from inference_obs.query import MatchOp, Selector
from inference_obs.reading.measurement import Status
from inference_obs.report.from_source import resolve_inputs
from inference_obs.samples import Window
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.deployments_file import load_deployments

ROOT = Path(__file__).resolve().parents[1]

HARDWARE = {"gpu_model": "NVIDIA H20", "gpus_per_replica": 8}
ENGINE = {"name": "vllm", "version": "0.33.0"}


@pytest.mark.parametrize(
    ("text", "op", "value"),
    [
        ("pro-01", MatchOp.EQ, "pro-01"),
        ("~pro-.*", MatchOp.RE, "pro-.*"),
        ("!pro-01", MatchOp.NE, "pro-01"),
        ("!~pro-.*", MatchOp.NRE, "pro-.*"),
        ("=~literal", MatchOp.EQ, "~literal"),
        ("", MatchOp.EQ, ""),
    ],
)
def test_compact_selector(text: str, op: MatchOp, value: str) -> None:
    (matcher,) = parse_selector({"pod": text})
    assert (matcher.label, matcher.op, matcher.value) == ("pod", op, value)


def test_deployment_matchers_and_gpu_fallback() -> None:
    pro = Deployment(
        name="PRO", selector={"pod": "~pro-model-.*"}, hardware=HARDWARE, engine=ENGINE
    )
    assert pro.matchers == pro.gpu_matchers
    split = pro.model_copy(update={"gpu_selector": {"exported_pod": "~pro-model-.*"}})
    assert split.gpu_matchers[0].label == "exported_pod"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"selector": {"bad-label": "x"}}, "not a valid label name"),
        ({"selector": {"pod": "~(unclosed"}}, "not a valid regex"),
        ({"selector": {}}, "at least 1"),
        ({"colour": "blue"}, "Extra inputs are not permitted"),
        ({"hardware": {**HARDWARE, "gpus_per_replica": 0}}, "greater than or equal to 1"),
        ({"engine": {"name": "tgi"}}, "'vllm' or 'sglang'"),
    ],
)
def test_invalid_deployments_are_refused(change: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "name": "X",
        "selector": {"pod": "x"},
        "hardware": HARDWARE,
        "engine": ENGINE,
        **change,
    }
    with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
        Deployment.model_validate(fields)


def test_window_needs_timezones_and_order() -> None:
    window = Window.parse("2026-10-19T17:40+08:00", "1h")
    assert window.end_s - window.start_s == 3600.0
    assert window.start_s == 1792402800.0  # 2026-10-19 09:40 UTC
    assert Window.parse("2026-10-19T17:40Z", 90.5).seconds == 90.5


@pytest.mark.parametrize(
    ("start", "length", "message"),
    [
        ("2026-10-19T17:40", "1h", "window start .* has no timezone; write it as"),
        ("2026-10-19T17:40Z", 0, "window end .* is not after its start"),
        ("2026-10-19T17:40Z", "-1h", "window length: duration '-1h'"),
        ("yesterday", "1h", "window start 'yesterday' is not an ISO 8601 time such as"),
        ("2026-10-19T17:40Z", "an hour", "window length: duration 'an hour': not a PromQL"),
        ("2026-10-19T17:40Z", float("nan"), "window length nan is neither seconds nor"),
        ("2026-10-19T17:40Z", None, "window length None is neither seconds nor"),
        (1792402800, "1h", "window start 1792402800 is not a datetime"),
    ],
)
def test_a_window_that_cannot_be_is_a_configuration_error(
    start: object, length: object, message: str
) -> None:
    # A window is an argument, not a query: the error says which edge or length is wrong.
    with pytest.raises(ConfigurationError, match=message) as caught:
        Window.parse(start, length)  # type: ignore[arg-type]
    assert not isinstance(caught.value, QueryError)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"regex": "a", "not": "b"}, r"pod: expected text or one of \{equals: \.\.\.\}"),
        ({"regex": 7}, "pod: regex takes text, not 7"),
        (7, r"pod: expected text or \{regex: \.\.\.\}, not 7"),
        ("pro-model-.*", r"would match only that exact text but looks like a regex"),
    ],
)
def test_compact_value_refuses_a_bad_selector_value(value: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        compact_value("pod", value)


def test_a_bad_selector_in_a_deployment_is_reported_as_its_field() -> None:
    # pydantic reports the ConfigurationError (a ValueError) as the selector's error.
    with pytest.raises(ValidationError) as caught:
        Deployment(name="X", selector={"bad-label": "x"}, hardware=HARDWARE, engine=ENGINE)
    (error,) = caught.value.errors()
    assert error["loc"] == ("selector",)
    assert isinstance(error["ctx"]["error"], ConfigurationError)
    assert "not a valid label name" in str(error["ctx"]["error"])


@pytest.mark.parametrize(
    ("value", "op", "text"),
    [
        ({"regex": "pro-.*"}, MatchOp.RE, "pro-.*"),
        ({"not_regex": "canary-.*"}, MatchOp.NRE, "canary-.*"),
        ({"not": "canary"}, MatchOp.NE, "canary"),
        ({"equals": "a*b"}, MatchOp.EQ, "a*b"),
        ({"equals": "~tilde"}, MatchOp.EQ, "~tilde"),
        ({"equals": "=eq"}, MatchOp.EQ, "=eq"),
        ("=literal", MatchOp.EQ, "literal"),
        ("DeepSeek-V4.1", MatchOp.EQ, "DeepSeek-V4.1"),  # a dot alone is not a regex
    ],
)
def test_explicit_selector_forms(value: object, op: MatchOp, text: str) -> None:
    d = Deployment.model_validate(
        {"name": "X", "selector": {"pod": value}, "hardware": HARDWARE, "engine": ENGINE}
    )
    (matcher,) = d.matchers
    assert (matcher.op, matcher.value) == (op, text)
    # Stored in the compact form, which reads back the same.
    assert Deployment.model_validate(d.model_dump()).matchers == d.matchers


@pytest.mark.parametrize("value", ["pro-model-.*", "a|b", "pod[0-9]", "^x$", "a+"])
def test_a_plain_value_that_looks_like_a_regex_is_refused(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Deployment.model_validate(
            {"name": "X", "selector": {"pod": value}, "hardware": HARDWARE, "engine": ENGINE}
        )
    message = str(caught.value)
    assert f"pod: {value!r} would match only that exact text" in message
    assert f"{{regex: {value!r}}}" in message


@pytest.mark.parametrize("value", [{"regexp": "x"}, {"regex": "x", "not": "y"}, {"regex": 1}, 5])
def test_an_unknown_selector_form_is_refused(value: object) -> None:
    with pytest.raises(ValidationError, match="pod: "):
        Deployment.model_validate(
            {"name": "X", "gpu_selector": {"pod": value}, "selector": {"pod": "x"},
             "hardware": HARDWARE, "engine": ENGINE}
        )  # fmt: skip


def test_the_example_file_selects_the_bundled_replicas() -> None:
    example = ROOT / "docs" / "deployments.example.yaml"
    dataset = ROOT / "datasets" / "pro5000-vs-h20"
    source = DatasetSource(dataset)
    window = source.dataset.manifest.window.window()

    def pods(d: Deployment) -> set[str]:
        found = source.series(Selector("vllm:num_requests_running", d.matchers), window)
        return {labels["pod"] for labels in found}

    given = {d.name: d for d in load_deployments(example)}
    for declared in load_deployments(dataset):
        assert pods(given[declared.name]) == pods(declared)
        assert len(pods(declared)) == len(given[declared.name].replicas)
    assert unmatched_selectors(source, list(given.values()), window) == []


def _named(name: str) -> Deployment:
    return Deployment(name=name, selector={"pod": "x"}, hardware=HARDWARE, engine=ENGINE)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("H2O", "H2\u039f"),  # a Greek capital Omicron
        ("cpu", "\u0441\u0440u"),  # Cyrillic es and er
        ("caf\u00e9", "cafe\u0301"),  # composed and decomposed: NFKC makes them one
        ("fi-8", "\ufb01-8"),  # the fi ligature
        ("PRO 1", "PRO\u00a01"),  # a no-break space
    ],
)
def test_names_a_reader_cannot_tell_apart_are_refused_given_as_objects(a: str, b: str) -> None:
    from inference_obs.report.from_source import resolve_inputs

    with pytest.raises(ConfigurationError, match="look the same but are different text"):
        resolve_inputs([_named(a), _named(b)], window=Window.parse("2026-10-19T17:40Z", "1h"))


def test_names_that_differ_as_a_reader_sees_them_pass() -> None:
    from inference_obs.deployment import look_alike

    # Case, digits and letters of one script are told apart on screen.
    assert look_alike(["H20", "h20", "H2O", "H200", "PRO", "PR0", "\u041f\u0420\u041e"]) == []


@pytest.mark.parametrize("hidden", ["\u200b", "\u200d", "\u2066", "\x07", "\n"])
def test_a_name_holding_an_invisible_character_is_refused(hidden: str) -> None:
    with pytest.raises(ValidationError, match="a character that does not show"):
        _named(f"H20{hidden}")


def _file_with_price(tmp_path: Path, price: object) -> Path:
    """The bundled deployments as a deployments file, H20 stating ``price`` under hardware."""
    manifest = DatasetSource(ROOT / "datasets" / "pro5000-vs-h20").dataset.manifest
    entries = [d.model_dump(mode="json") for d in manifest.deployments]
    entries[1]["hardware"]["gpu_hour_price"] = price
    path = tmp_path / "deployments.yaml"
    path.write_text(yaml.safe_dump({"deployments": entries}), encoding="utf-8")
    return path


def test_a_price_in_a_deployments_file_is_the_one_cost_reads(tmp_path: Path) -> None:
    source = DatasetSource(ROOT / "datasets" / "pro5000-vs-h20")
    window = source.dataset.manifest.window.window()
    pro, h20 = load_deployments(_file_with_price(tmp_path, 2.5))
    assert (pro.hardware.gpu_hour_price, h20.hardware.gpu_hour_price) == (None, 2.5)
    # H20: 4 replicas of 8 GPUs, each seen the whole hour: 32 GPU-hours at 2.5 an hour.
    priced = cost(source, h20, window)
    assert priced.cost.status is Status.OK
    assert priced.cost.value == 32 * 2.5
    assert priced.gpu_hour_price == 2.5
    assert cost(source, pro, window).cost.status is Status.NO_DATA  # no price: no cost
    # The command line's --gpu-hour-price replaces the file's price.
    given = resolve_inputs(load_deployments(tmp_path / "deployments.yaml"), window=window,
                           gpu_hour_prices={"H20": 1.5})  # fmt: skip
    assert given.deployments[1].hardware.gpu_hour_price == 1.5


@pytest.mark.parametrize(
    ("price", "problem"),
    [
        (0, "greater than 0"),
        (-1.5, "greater than 0"),
        (".nan", "finite number"),
        (1e30, "less than or equal to 10000000"),
        (True, "expected a number, not true"),
    ],
)
def test_a_bad_price_in_a_deployments_file_is_refused_naming_deployment_and_field(
    tmp_path: Path, price: object, problem: str
) -> None:
    path = _file_with_price(tmp_path, price)
    if price == ".nan":  # YAML's NaN; safe_dump would quote the text
        path.write_text(path.read_text().replace("'.nan'", ".nan"), encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        load_deployments(path)
    message = str(caught.value)
    assert "deployments[1].hardware.gpu_hour_price" in message, message
    assert problem in message, message
    assert "(deployment 'H20')" in message, message


def test_a_price_is_dumped_only_when_given_and_a_topology_never() -> None:
    bare = _named("A")
    assert "gpu_hour_price" not in bare.model_dump()["hardware"]  # manifests read as before
    # Two GPUs joined by NVLink (NV4), as nvidia-smi topo -m prints them.
    wired = bare.with_facts(gpu_hour_price=2.0, topology="  GPU0 GPU1\nGPU0 X NV4\nGPU1 NV4 X\n")
    dumped = wired.model_dump(mode="json")
    assert dumped["hardware"]["gpu_hour_price"] == 2.0
    assert "topology" not in dumped
    assert wired.topology is not None
    assert wired.topology.gpus == ("GPU0", "GPU1")
    assert Deployment.model_validate(dumped) == wired.model_copy(update={"topology": None})
    assert bare.with_facts() == bare  # nothing given: nothing changed
