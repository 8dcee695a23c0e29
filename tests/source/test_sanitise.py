"""Sanitisation: stable pseudonyms, replica names, rules, and selectors that still select."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import ValidationError

from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError, DatasetError
from inference_obs.metrics import FAMILIES
from inference_obs.query import Selector
from inference_obs.samples import Labels, SampleSet, Series
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.redaction import KEEP, PSEUDONYMISE, RedactionRules, ValueRule
from inference_obs.source.dataset.sanitise import sanitise
from inference_obs.source.dataset.source import DatasetSource

DATASETS = sorted(p for p in (Path(__file__).parents[2] / "datasets").iterdir() if p.is_dir())
START = 1_792_403_200.0


def _deployment(name: str, selector: dict[str, str], **extra: object) -> Deployment:
    return Deployment.model_validate(
        {
            "name": name,
            "selector": selector,
            "hardware": {"gpu_model": "NVIDIA H20", "gpus_per_replica": 8},
            "engine": {"name": "vllm"},
            **extra,
        }
    )


def _samples(*labelsets: dict[str, str], name: str = "vllm:num_requests_running") -> SampleSet:
    return SampleSet.from_series(
        Series(name, labels, [START, START + 60], [1.0, 2.0]) for labels in labelsets
    )


def _keys(samples: SampleSet) -> list[tuple[str, Labels]]:
    return sorted(zip(samples.names, samples.labels, strict=True), key=repr)


def test_same_input_gives_the_same_output_whatever_the_series_order() -> None:
    dataset = read_dataset(DATASETS[1])
    deployments = dataset.manifest.deployments
    forward = sanitise(dataset.samples, deployments)
    backward = sanitise(dataset.samples.take(range(len(dataset.samples) - 1, -1, -1)), deployments)
    assert _keys(forward.samples) == _keys(backward.samples)
    assert forward.deployments == backward.deployments
    assert forward.notes == backward.notes
    assert {k: dict(v) for k, v in forward.pseudonyms.items()} == {
        k: dict(v) for k, v in backward.pseudonyms.items()
    }


def test_replica_pods_take_the_declared_names_in_natural_order() -> None:
    pods = ("h20-model-10", "h20-model-2", "h20-model-1")
    samples = _samples(*({"pod": p, "Hostname": f"node-{p}"} for p in pods))
    h20 = _deployment("H20", {"pod": "~h20-model-.*"}, replicas=("H20-01", "H20-02"))
    out = sanitise(samples, [h20])
    # Digits compare as numbers: 1 < 2 < 10. The third pod is beyond those declared.
    assert dict(out.pseudonyms["pod"]) == {
        "h20-model-1": "H20-01",
        "h20-model-2": "H20-02",
        "h20-model-10": "H20-03",
    }
    assert out.deployments[0].replicas == ("H20-01", "H20-02", "H20-03")
    assert sorted(out.pseudonyms["Hostname"].values()) == [
        "Hostname-01",
        "Hostname-02",
        "Hostname-03",
    ]
    assert out.pseudonyms["Hostname"]["node-h20-model-1"] == "Hostname-01"


@pytest.mark.parametrize("order", [["a2", "a02", "²"], ["²", "a02", "a2"]])
def test_values_equal_as_numbers_still_have_one_order(order: list[str]) -> None:
    out = sanitise(
        _samples(*({"pod": "p", "node": v} for v in order)), [_deployment("D", {"pod": "p"})]
    )
    assert dict(out.pseudonyms["node"]) == {"a02": "node-01", "a2": "node-02", "²": "node-03"}


def test_bundled_dataset_pods_become_pro_01_and_h20_01_to_04() -> None:
    dataset = read_dataset(DATASETS[1])  # pro5000-vs-h20
    out = sanitise(dataset.samples, dataset.manifest.deployments)
    pods = {labels["pod"] for labels in out.samples.labels if "pod" in labels}
    assert pods == {"PRO-01", "H20-01", "H20-02", "H20-03", "H20-04"}
    for label in ("Hostname", "UUID", "instance", "namespace"):
        published = {labels[label] for labels in out.samples.labels if label in labels}
        original = {labels[label] for labels in dataset.samples.labels if label in labels}
        assert len(published) == len(original)
        assert all(re.fullmatch(rf"{label}-\d\d", v) for v in published), published
    # Samples are untouched.
    assert out.samples.values is dataset.samples.values
    assert out.samples.t_ms is dataset.samples.t_ms


@pytest.mark.parametrize("path", DATASETS, ids=lambda p: p.name)
def test_every_deployment_still_selects_exactly_its_series(path: Path) -> None:
    dataset = read_dataset(path)
    out = sanitise(dataset.samples, dataset.manifest.deployments)
    before, after = DatasetSource(dataset), DatasetSource(replace(dataset, samples=out.samples))
    window = dataset.manifest.window.window()
    for old, new in zip(dataset.manifest.deployments, out.deployments, strict=True):
        assert new.selector != old.selector  # pod and namespace values were renamed
        selected = before.raw(Selector(None, old.matchers), window)
        expected = {
            (name, Labels((k, out.pseudonyms.get(k, {}).get(v, v)) for k, v in labels.items()))
            for name, labels in zip(selected.names, selected.labels, strict=True)
        }
        found = after.raw(Selector(None, new.matchers), window)
        assert len(selected) > 100
        assert set(zip(found.names, found.labels, strict=True)) == expected
        assert int(found.offsets[-1]) == int(selected.offsets[-1])


def test_a_gpu_selector_on_another_label_is_rewritten_too() -> None:
    samples = _samples(
        {"pod": "pro-0", "namespace": "prod"},
        {"Hostname": "pro-node-0", "gpu": "0"},
        {"Hostname": "h20-node-0", "gpu": "0"},
    )
    pro = _deployment("PRO", {"pod": "~pro-.*"}, gpu_selector={"Hostname": "~pro-node-.*"})
    out = sanitise(samples, [pro])
    assert out.deployments[0].selector == {"pod": "PRO-01"}
    assert out.deployments[0].gpu_selector == {"Hostname": "Hostname-02"}  # sorted: h20 first
    assert out.deployments[0].replicas == ("PRO-01",)


def test_a_selector_that_accepts_absent_labels_keeps_accepting_them() -> None:
    samples = _samples({"pod": "a", "zone": "z1"}, {"pod": "b"}, {"pod": "c", "zone": "z2"})
    # zone!="z2" also selects the series without a zone.
    one = _deployment("ONE", {"pod": "~a|b|c", "zone": "!z2"})
    out = sanitise(samples, [one])
    # Pod c is not ONE's (its zone is z2), so it is not a replica: pod-01.
    assert out.deployments[0].selector == {"pod": "~ONE-01|ONE-02|pod-01", "zone": "~|zone-01"}
    matchers = out.deployments[0].matchers
    found = [
        dict(labels)
        for labels in out.samples.labels
        if all(m.matches(labels.get(m.label, "")) for m in matchers)
    ]
    assert found == [{"pod": "ONE-01", "zone": "zone-01"}, {"pod": "ONE-02"}]


def test_labels_in_no_list_are_pseudonymised_by_default_and_kept_on_request() -> None:
    samples = _samples({"pod": "p", "team": "search-ranking", "le": "0.5"})
    deployment = _deployment("D", {"pod": "p"})
    default = sanitise(samples, [deployment]).samples.labels[0]
    assert default["team"] == "team-01"
    assert default["le"] == "0.5"
    kept = sanitise(samples, [deployment], RedactionRules(unlisted="keep")).samples.labels[0]
    assert kept["team"] == "search-ranking"


def test_dropped_labels_are_removed_and_noted() -> None:
    samples = _samples({"pod": "p", "cluster": "acme-east", "gpu": "0"})
    rules = RedactionRules(drop=("cluster",))
    out = sanitise(samples, [_deployment("D", {"pod": "p"})], rules)
    assert "cluster" not in out.samples.labels[0]
    assert out.dropped == {"cluster": frozenset({"acme-east"})}
    assert any("Labels removed: cluster." in note for note in out.notes)


def test_dropping_a_label_a_selector_uses_is_refused_naming_both() -> None:
    samples = _samples({"pod": "p", "cluster": "acme-east"})
    rules = RedactionRules(drop=("cluster",))
    deployment = _deployment("D", {"pod": "p", "cluster": "acme-east"})
    with pytest.raises(DatasetError, match=r"deployment D: its selector uses label cluster"):
        sanitise(samples, [deployment], rules)


def test_dropping_the_only_label_that_tells_series_apart_is_refused() -> None:
    samples = _samples(
        {"pod": "p", "gpu": "0", "device": "a"}, {"pod": "p", "gpu": "1", "device": "a"}
    )
    rules = RedactionRules(drop=("gpu",), keep=("device",))
    with pytest.raises(DatasetError, match="dropping gpu leaves series"):
        sanitise(samples, [_deployment("D", {"pod": "p"})], rules)


def test_value_rules_pseudonymise_or_rewrite_kept_values() -> None:
    samples = _samples(
        {"pod": "p", "model_name": "10.2.3.4:8000/served"},
        {"pod": "p", "model_name": "acme/DeepSeek-V4"},
        {"pod": "p", "model_name": "DeepSeek-R1"},
    )
    rules = RedactionRules(
        values=(
            *RedactionRules().values,
            ValueRule(description="company prefix", pattern=r"^acme/", replacement=""),
        )
    )
    out = sanitise(samples, [_deployment("D", {"pod": "p"})], rules)
    names = sorted(labels["model_name"] for labels in out.samples.labels)
    assert names == ["DeepSeek-R1", "DeepSeek-V4", "model_name-01"]
    assert any("model_name matching a value rule" in note for note in out.notes)


def test_a_value_rule_that_merges_two_values_is_refused() -> None:
    samples = _samples({"pod": "p", "model_name": "acme/m"}, {"pod": "p", "model_name": "m"})
    rules = RedactionRules(values=(ValueRule(description="x", pattern="^acme/", replacement=""),))
    with pytest.raises(DatasetError, match="label model_name: the rules give two values"):
        sanitise(samples, [_deployment("D", {"pod": "p"})], rules)


def test_a_pod_selected_by_two_deployments_is_refused() -> None:
    samples = _samples({"pod": "shared-0"})
    a, b = _deployment("A", {"pod": "~shared-.*"}), _deployment("B", {"pod": "~.*-0"})
    with pytest.raises(DatasetError, match="pod 'shared-0' is selected by deployments A and B"):
        sanitise(samples, [a, b])


def test_a_deployment_that_selects_nothing_is_refused() -> None:
    samples = _samples({"pod": "pro-0"})
    with pytest.raises(DatasetError, match="deployment H20: its selector on pod selects no series"):
        sanitise(samples, [_deployment("H20", {"pod": "~h20-.*"})])


def test_given_lists_win_over_defaults() -> None:
    keep_namespace = RedactionRules(keep=(*KEEP, "namespace"))
    assert keep_namespace.action("namespace") == "keep"
    assert "namespace" not in keep_namespace.pseudonymise
    assert RedactionRules(drop=("le",)).action("le") == "drop"


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (lambda: RedactionRules(drop=("le",), keep=("le",)), "'le' is in both drop and keep; list"),
        (
            lambda: RedactionRules(keep=("pod",), replica_labels=("pod",)),
            "label 'pod' is in both replica_labels and keep",
        ),
        (lambda: RedactionRules(keep=("bad-label",)), "keep: 'bad-label' is not a label name"),
        (lambda: ValueRule(description="bad", pattern="("), "'(' is not a regular expression"),
    ],
)
def test_bad_rules_are_configuration_errors(rules: Callable[[], object], message: str) -> None:
    # pydantic reports the ConfigurationError (a ValueError) as the field's error.
    with pytest.raises(ValidationError) as caught:
        rules()
    (error,) = caught.value.errors()
    assert isinstance(error["ctx"]["error"], ConfigurationError)
    assert message in str(error["ctx"]["error"])


def test_every_catalogue_label_is_classified() -> None:
    declared = {label for family in FAMILIES for label in family.labels}
    rules = RedactionRules()
    classified = set(KEEP) | set(PSEUDONYMISE) | set(rules.replica_labels)
    assert declared <= classified, sorted(declared - classified)
    # The labels analyses compare with constants stay readable.
    for label in ("le", "finished_reason", "reason", "source", "gpu", "job"):
        assert rules.action(label) == "keep"


def test_published_text_with_an_original_value_is_refused() -> None:
    dataset = read_dataset(DATASETS[1])
    out = sanitise(dataset.samples, dataset.manifest.deployments)
    with pytest.raises(DatasetError, match=r"the title contains 'h20-model-node-02'.*Hostname"):
        out.check_published(["Load on h20-model-node-02 at noon"], "the title")
    # Inside a longer word ("vllm" holds the namespace "llm") is not a leak; standing alone is.
    out.check_published(["vllm:num_requests_running", "0.92"], "the title")
    with pytest.raises(DatasetError, match="'llm', an original value of label namespace"):
        out.check_published(["the llm namespace"], "the title")


def test_repr_shows_no_original_value() -> None:
    dataset = read_dataset(DATASETS[1])
    text = repr(sanitise(dataset.samples, dataset.manifest.deployments))
    assert "h20-model" not in text
    assert "GPU-" not in text
    assert "Hostname" in text
