"""Exporting a dataset from a source: read-only, sanitised, reproducible, numbers unchanged.

The source here is a :class:`DatasetSource` over a bundled dataset (the real
local engine); ``tests/integration/test_dataset_export.py`` exports from a
real Prometheus.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.analyses.published import published_aggregates
from inference_obs.deployment import Deployment
from inference_obs.engine.rules import Rules
from inference_obs.errors import DatasetError, NoDataError
from inference_obs.metrics import dcgm, vllm
from inference_obs.query import Expr, Selector
from inference_obs.samples import STALE_NAN, Instant, Labels, Matrix, SampleSet, Series, Window
from inference_obs.source.base import EngineInfo, Metadata
from inference_obs.source.dataset.export import Export, export_dataset
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.deployments_file import load_deployments, load_rules

BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"
#: Labels whose original values must never be published.
IDENTIFYING = ("pod", "Hostname", "UUID", "instance", "namespace")


@pytest.fixture(scope="module")
def original() -> DatasetSource:
    return DatasetSource(BUNDLED)


@pytest.fixture(scope="module")
def exported(original: DatasetSource, tmp_path_factory: pytest.TempPathFactory) -> Export:
    manifest = original.dataset.manifest
    return export_dataset(
        original,
        manifest.deployments,
        manifest.window.window(),
        tmp_path_factory.mktemp("export") / "out",
        title="PRO 5000 vs H20, one hour",
        methodology=("Read from a copy of the bundled synthetic dataset.",),
        aggregates=published_aggregates,
    )


def _window(source: DatasetSource) -> Window:
    return source.dataset.manifest.window.window()


def identifying_values(source: DatasetSource) -> set[str]:
    return {
        labels[label]
        for labels in source.samples.labels
        for label in IDENTIFYING
        if label in labels
    }


def renamed_key(key: str, pseudonyms: Mapping[str, Mapping[str, str]]) -> str:
    """A Measurement key of the original with its bracketed names replaced by pseudonyms."""
    head, bracket, tag = key.partition("[")
    pairs = sorted(
        ((a, b) for mapping in pseudonyms.values() for a, b in mapping.items()),
        key=lambda pair: -len(pair[0]),
    )
    for a, b in pairs:
        tag = tag.replace(a, b)
    return head + bracket + tag


def test_the_manifest_says_what_was_read_how_and_what_was_renamed(exported: Export) -> None:
    again = read_dataset(exported.dataset.path)
    manifest = again.manifest
    assert manifest.synthetic is False
    assert manifest.generator is None
    assert manifest.title == "PRO 5000 vs H20, one hour"
    assert manifest.window.start.isoformat() == "2026-10-19T17:40:00+08:00"
    assert manifest.scrape_interval_seconds == 60.0
    method = "\n".join(manifest.methodology)
    assert "from a dataset source" in method
    assert "every series matching a deployment's selector" in method
    assert f"{len(again.samples)} series, {int(again.samples.offsets[-1]):,} samples" in method
    assert "Scrape interval observed: 60 s" in method
    assert "prometheus-2 rules" in method
    assert manifest.methodology[-1] == "Read from a copy of the bundled synthetic dataset."
    assert any("Pods (pod) renamed" in line for line in manifest.sanitisation)
    assert [d.replicas for d in manifest.deployments] == [
        ("PRO-01",),
        ("H20-01", "H20-02", "H20-03", "H20-04"),
    ]
    assert manifest.deployments[1].selector == {
        "namespace": "namespace-01",
        "pod": "~H20-01|H20-02|H20-03|H20-04",
    }


def test_no_identifying_value_of_the_original_is_in_any_file(
    original: DatasetSource, exported: Export
) -> None:
    values = identifying_values(original)
    assert {"pro-model-01", "h20-model-node-03", "10.1.0.20:9400"} <= values
    for file in sorted(exported.dataset.path.iterdir()):
        data = file.read_bytes().decode("utf-8")
        for value in values:
            # Alone, not inside a longer word: the namespace 'llm' is inside 'vllm:'.
            assert not re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", data), (file, value)


def test_published_numbers_equal_the_original_analyses(
    original: DatasetSource, exported: Export
) -> None:
    manifest = original.dataset.manifest
    before = published_aggregates(original, manifest.deployments, _window(original))
    after = exported.dataset.aggregates
    assert after is not None
    assert after["rules"] == "prometheus-2"
    expected = {
        renamed_key(key, exported.pseudonyms): entry
        for key, entry in before["measurements"].items()
    }
    assert expected == after["measurements"]
    assert "PRO/gpu/utilization_replica[PRO-01]" in expected
    assert sum(e["value"] is not None for e in expected.values()) > len(expected) / 2


def test_the_same_input_writes_the_same_bytes(
    original: DatasetSource, exported: Export, tmp_path: Path
) -> None:
    manifest = original.dataset.manifest
    again = export_dataset(
        original,
        tuple(reversed(manifest.deployments)),
        _window(original),
        tmp_path / "again",
        title="PRO 5000 vs H20, one hour",
        methodology=("Read from a copy of the bundled synthetic dataset.",),
        aggregates=published_aggregates,
    )
    for name in ("samples.om", "aggregates.json"):
        assert (again.dataset.path / name).read_bytes() == (
            exported.dataset.path / name
        ).read_bytes()
    first = json.loads((exported.dataset.path / "manifest.json").read_text())
    second = json.loads((again.dataset.path / "manifest.json").read_text())
    assert first["deployments"] == list(reversed(second["deployments"]))


def test_families_restrict_the_series(original: DatasetSource, tmp_path: Path) -> None:
    manifest = original.dataset.manifest
    done = export_dataset(
        original,
        manifest.deployments,
        _window(original),
        tmp_path / "out",
        title="TTFT and GPU utilisation",
        families=[vllm.TIME_TO_FIRST_TOKEN, dcgm.GPU_UTIL],
    )
    names = set(done.dataset.samples.names)
    assert names == {
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_sum",
        "vllm:time_to_first_token_seconds_count",
        "DCGM_FI_DEV_GPU_UTIL",
    }
    assert done.dataset.aggregates is None
    assert (
        "the catalogue families vllm:time_to_first_token_seconds, DCGM_FI_DEV_GPU_UTIL"
        in (done.dataset.manifest.methodology[0])
    )


def test_both_window_edges_are_included_and_nothing_outside(
    original: DatasetSource, tmp_path: Path
) -> None:
    samples = original.samples
    start_ms = int(samples.t_ms[samples.offsets[0] + 10])  # a sample exactly at the start
    end_ms = int(samples.t_ms[samples.offsets[0] + 20])  # and one exactly at the end
    window = Window.parse(_window(original).start, 1)
    window = Window(
        window.start.fromtimestamp(start_ms / 1000, window.start.tzinfo),
        window.start.fromtimestamp(end_ms / 1000, window.start.tzinfo),
    )
    done = export_dataset(
        original, original.dataset.manifest.deployments, window, tmp_path / "out", title="Ten"
    )
    t_ms = done.dataset.samples.t_ms
    assert int(t_ms.min()) == start_ms
    assert int(t_ms.max()) == end_ms
    assert int(np.diff(done.dataset.samples.offsets).max()) == 11


class Recording:
    """A Source that forwards to a dataset and records each method called."""

    def __init__(
        self, inner: DatasetSource, stale: bool = False, info: EngineInfo | None = None
    ) -> None:
        self.inner, self.stale, self._info = inner, stale, info
        self.calls: list[str] = []

    def info(self) -> EngineInfo:
        self.calls.append("info")
        return self._info or self.inner.info()

    def instant(self, expr: Expr, at: float) -> Instant:
        self.calls.append("instant")
        return self.inner.instant(expr, at)

    def range(self, expr: Expr, window: Window, step: float) -> Matrix:
        self.calls.append("range")
        return self.inner.range(expr, window, step)

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        self.calls.append("raw")
        found = self.inner.raw(selector, window)
        if not self.stale:
            return found
        # As a third-party source may: the first series ends with a staleness marker.
        first = found.series(0)
        values = np.append(first.values[:-1], STALE_NAN)
        marked = Series(first.name, first.labels, first.timestamps, values)
        return SampleSet.from_series([marked, *list(found)[1:]])

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        self.calls.append("series")
        return self.inner.series(selector, window)

    def label_names(self, window: Window) -> tuple[str, ...]:
        self.calls.append("label_names")
        return self.inner.label_names(window)

    def label_values(self, label: str, window: Window) -> tuple[str, ...]:
        self.calls.append("label_values")
        return self.inner.label_values(label, window)

    def metadata(self, metric: str | None = None) -> tuple[Metadata, ...]:
        self.calls.append("metadata")
        return self.inner.metadata(metric)


def test_only_raw_samples_are_read_and_staleness_markers_are_dropped(
    original: DatasetSource, tmp_path: Path
) -> None:
    source = Recording(original, stale=True)
    manifest = original.dataset.manifest
    done = export_dataset(
        source,
        manifest.deployments,
        _window(original),
        tmp_path / "out",
        title="x",
        aggregates=published_aggregates,
    )
    assert set(source.calls) == {"info", "raw"}
    assert "2 staleness markers dropped" in "\n".join(done.dataset.manifest.methodology)
    total = int(done.dataset.samples.offsets[-1])
    selected = [
        original.raw(Selector(None, d.matchers), _window(original)) for d in manifest.deployments
    ]
    # One marker on the first series of each deployment's fetch.
    assert total == sum(int(one.offsets[-1]) for one in selected) - 2


def test_free_text_with_an_original_value_is_refused_before_writing(
    original: DatasetSource, tmp_path: Path
) -> None:
    manifest = original.dataset.manifest
    out = tmp_path / "out"
    with pytest.raises(DatasetError, match=r"the manifest contains 'pro-model-01'.*label pod"):
        export_dataset(
            original, manifest.deployments, _window(original), out,
            title="What pro-model-01 served",
        )  # fmt: skip
    assert not out.exists()


def test_no_series_in_the_window_is_no_data(original: DatasetSource, tmp_path: Path) -> None:
    nobody = Deployment.model_validate(
        {
            "name": "NONE",
            "selector": {"pod": "~nobody-.*"},
            "hardware": {"gpu_model": "NVIDIA H20", "gpus_per_replica": 8},
            "engine": {"name": "vllm"},
        }
    )
    with pytest.raises(NoDataError, match="no series of NONE has a sample in the window"):
        export_dataset(original, [nobody], _window(original), tmp_path / "out", title="x")


def test_the_export_repr_holds_no_original_value(exported: Export) -> None:
    text = repr(exported)
    assert "pro-model" not in text
    assert "Hostname" in text
    assert exported.pseudonyms["pod"]["pro-model-01"] == "PRO-01"


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_deployments_load_from_yaml_a_manifest_or_a_dataset_directory(tmp_path: Path) -> None:
    yaml_file = _write(
        tmp_path / "d.yaml",
        "deployments:\n"
        "  - name: PRO\n"
        "    replicas: [PRO-01]\n"
        '    selector: {namespace: llm, pod: "~pro-model-.*"}\n'
        "    hardware: {gpu_model: NVIDIA RTX PRO 5000, gpus_per_replica: 8}\n"
        "    engine: {name: vllm}\n",
    )
    (pro,) = load_deployments(yaml_file)
    assert pro.selector == {"namespace": "llm", "pod": "~pro-model-.*"}
    bundled = read_dataset(BUNDLED).manifest.deployments
    assert load_deployments(BUNDLED / "manifest.json") == bundled
    assert load_deployments(BUNDLED) == bundled
    as_list = [d.model_dump(mode="json") for d in bundled]
    assert load_deployments(_write(tmp_path / "l.json", json.dumps(as_list))) == bundled


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        (
            "bad.yaml",
            "deployments:\n  - name: PRO\n    selector: {pod: x}\n"
            "    hardware: {gpu_model: x, gpus_per_replica: 0}\n    engine: {name: vllm}\n",
            "deployments[0].hardware.gpus_per_replica: Input should be greater than or equal to 1",
        ),
        ("extra.json", '[{"name": "A", "colour": 1}]', "deployments[0].colour: unknown field"),
        ("none.yaml", "title: x\n", "no 'deployments' field"),
        ("broken.yaml", "deployments: [\n", "broken.yaml:2: not YAML"),
        (
            "twice.json",
            json.dumps(2 * [read_dataset(BUNDLED).manifest.deployments[0].model_dump(mode="json")]),
            "deployment names repeat: PRO",
        ),
    ],
)
def test_a_bad_deployments_file_is_named_with_its_field(
    tmp_path: Path, name: str, text: str, problem: str
) -> None:
    path = _write(tmp_path / name, text)
    with pytest.raises(DatasetError) as caught:
        load_deployments(path)
    assert str(caught.value).startswith(str(path))
    assert problem in str(caught.value)


def test_rules_load_from_yaml_with_defaults_for_what_is_not_given(tmp_path: Path) -> None:
    rules = load_rules(_write(tmp_path / "r.yaml", "drop: [cluster]\nunlisted: keep\n"))
    assert rules.drop == ("cluster",)
    assert rules.action("some_label") == "keep"
    assert rules.action("Hostname") == "pseudonymise"
    bad: dict[str, Any] = {"drop": ["le"], "keep": ["le"]}
    with pytest.raises(DatasetError, match=r"r\.json: rules: Value error, label 'le' is in both"):
        load_rules(_write(tmp_path / "r.json", json.dumps(bad)))


def test_victoriametrics_data_is_published_under_prometheus_2_rules(
    original: DatasetSource, tmp_path: Path
) -> None:
    # The local engine cannot evaluate histogram_quantile under VictoriaMetrics rules.
    source = Recording(original, info=EngineInfo("victoriametrics", "1.93", Rules.VICTORIAMETRICS))
    manifest = original.dataset.manifest
    done = export_dataset(
        source, manifest.deployments[:1], _window(original), tmp_path / "out", title="x",
        aggregates=published_aggregates,
    )  # fmt: skip
    assert done.dataset.aggregates is not None
    assert done.dataset.aggregates["rules"] == "prometheus-2"
    method = "\n".join(done.dataset.manifest.methodology)
    assert "from a victoriametrics source (version 1.93)" in method
    assert "follow the local engine's prometheus-2 rules" in method
