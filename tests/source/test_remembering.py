"""RememberingSource: each distinct question asked once, the same answers as the source."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from inference_obs.errors import QueryFailed
from inference_obs.query import Selector
from inference_obs.report import build_report
from inference_obs.samples import SampleSet, Window
from inference_obs.source.dataset_source import DatasetSource
from inference_obs.source.remembering import RememberingSource

DATASET = Path("datasets/h100-vs-h200")


class Counting:
    """Delegates to a dataset source and counts the calls of each method."""

    def __init__(self, source: DatasetSource) -> None:
        self.source = source
        self.calls: Counter[str] = Counter()
        self.fail_raw = False

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.source, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name == "raw" and self.fail_raw:
                raise QueryFailed("execution: out of memory", error_type="execution")
            return method(*args, **kwargs)

        return counted


@pytest.fixture(scope="module")
def dataset_source() -> DatasetSource:
    return DatasetSource(DATASET)


def test_a_repeated_question_is_asked_once(dataset_source: DatasetSource) -> None:
    counting = Counting(dataset_source)
    source = RememberingSource(counting)
    window = dataset_source.dataset.manifest.window.window()
    selector = Selector("vllm:num_requests_running")
    first = source.raw(selector, window)
    again = source.raw(Selector("vllm:num_requests_running"), Window(window.start, window.end))
    assert again is first
    assert isinstance(first, SampleSet)
    assert source.info() is source.info()
    source.raw(selector, Window.parse(window.start, 60.0))
    assert counting.calls == Counter({"raw": 2, "info": 1})


def test_a_failure_is_not_remembered(dataset_source: DatasetSource) -> None:
    counting = Counting(dataset_source)
    source = RememberingSource(counting)
    window = dataset_source.dataset.manifest.window.window()
    counting.fail_raw = True
    with pytest.raises(QueryFailed):
        source.raw(Selector("up"), window)
    counting.fail_raw = False
    assert len(source.raw(Selector("up"), window)) > 0
    assert counting.calls["raw"] == 2


def test_a_report_asks_each_question_once_and_answers_as_before(
    dataset_source: DatasetSource,
) -> None:
    manifest = dataset_source.dataset.manifest
    window = manifest.window.window()
    deployment = manifest.deployments[0]
    asked: Counter[tuple[Any, ...]] = Counter()

    class Recording(Counting):
        def __getattr__(self, name: str) -> Any:
            method = super().__getattr__(name)

            def recorded(*args: Any) -> Any:
                asked[(name, *args)] += 1
                return method(*args)

            return recorded

    kwargs: dict[str, Any] = {"title": "t", "source_name": "d", "figures": False}
    build_report(Recording(dataset_source), manifest.deployments, window, **kwargs)
    assert asked
    assert max(asked.values()) == 1
    remembering = RememberingSource(dataset_source)
    for analysis in (latency, queueing, validity_of):
        once = analysis(remembering, deployment, window, manifest)
        again = analysis(remembering, deployment, window, manifest)
        plain = analysis(dataset_source, deployment, window, manifest)
        assert once.model_dump_json() == again.model_dump_json() == plain.model_dump_json()


def latency(source: Any, deployment: Any, window: Window, manifest: Any) -> Any:
    from inference_obs.analyses.latency import latency as run

    return run(source, deployment, window)


def queueing(source: Any, deployment: Any, window: Window, manifest: Any) -> Any:
    from inference_obs.analyses.queueing import queueing as run

    return run(source, deployment, window)


def validity_of(source: Any, deployment: Any, window: Window, manifest: Any) -> Any:
    from inference_obs.analyses.validity import validity

    return validity(source, manifest.deployments, window)
