"""RememberingSource: each distinct question asked once (in flight included), the same answers
as the source, whichever threads ask."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from inference_obs.errors import QueryFailed
from inference_obs.query import Expr, Selector
from inference_obs.report import build_report
from inference_obs.samples import Instant, SampleSet, Vector, Window
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.remembering import RememberingSource, remembered, unremembered

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
    info = source.info()
    assert source.info() is info
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

    kwargs: dict[str, Any] = {"title": "t", "source_name": "d"}
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
    from inference_obs.analyses.validity.verdicts import validity

    return validity(source, manifest.deployments, window)


class Held(Counting):
    """Counts calls; ``instant`` waits until released (then fails if ``fail_instant``)."""

    def __init__(self, source: DatasetSource) -> None:
        super().__init__(source)
        self.release = threading.Event()
        self.fail_instant = False

    def instant(self, expr: Expr, at: float) -> Instant:
        self.calls["instant"] += 1
        assert self.release.wait(timeout=30)
        if self.fail_instant:
            raise QueryFailed("execution: out of memory", error_type="execution")
        return self.source.instant(expr, at)


def _ask_from_threads(
    source: RememberingSource, expr: Expr, at: float
) -> tuple[list[object], list[threading.Thread]]:
    """Ask ``expr`` from 8 threads at once: what each got (an answer or an exception), and the
    threads, still asking."""
    got: list[object] = [None] * 8
    ready = threading.Barrier(9)

    def ask(i: int) -> None:
        ready.wait()
        try:
            got[i] = source.instant(expr, at)
        except QueryFailed as exc:
            got[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    ready.wait()
    time.sleep(0.2)  # every thread is now asking: all but one wait for its answer
    return got, threads


def _held(dataset_source: DatasetSource) -> tuple[Held, RememberingSource, Expr, float]:
    """A held source, a RememberingSource asking it, and the question the threads ask, at
    the end of the dataset's window."""
    held = Held(dataset_source)
    window = dataset_source.dataset.manifest.window.window()
    return held, RememberingSource(held), Selector("vllm:num_requests_running").sum(), window.end_s


def test_a_question_in_flight_is_waited_for_not_asked_again(
    dataset_source: DatasetSource,
) -> None:
    held, source, expr, at = _held(dataset_source)
    got, threads = _ask_from_threads(source, expr, at)
    held.release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert held.calls["instant"] == 1
    assert all(answer is got[0] for answer in got)
    assert isinstance(got[0], Instant)


def test_an_error_in_flight_reaches_every_waiter_and_is_not_remembered(
    dataset_source: DatasetSource,
) -> None:
    held, source, expr, at = _held(dataset_source)
    held.fail_instant = True
    got, threads = _ask_from_threads(source, expr, at)
    held.release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert held.calls["instant"] == 1
    assert all(isinstance(answer, QueryFailed) for answer in got)
    held.fail_instant = False
    # Asked again, not answered from memory: the source's own answer this time.
    again = source.instant(expr, at)
    assert held.calls["instant"] == 2
    plain = dataset_source.instant(expr, at).value
    assert isinstance(again.value, Vector)
    assert isinstance(plain, Vector)
    assert again.value.as_dict() == plain.as_dict()
    assert len(plain) == 1


def test_an_unremembered_answer_is_not_kept_and_a_kept_one_is_still_used(
    dataset_source: DatasetSource,
) -> None:
    counting = Counting(dataset_source)
    source = RememberingSource(counting)
    window = dataset_source.dataset.manifest.window.window()
    once, kept = Selector("vllm:num_requests_running"), Selector("vllm:num_requests_waiting")
    with unremembered():
        first = source.raw(once, window)
    assert source.raw(once, window) is not first  # asked again: nothing was kept
    assert counting.calls["raw"] == 2
    answer = source.raw(kept, window)
    with unremembered():
        assert source.raw(kept, window) is answer  # kept before: answered from memory
        with remembered():
            inside = source.raw(Selector("vllm:kv_cache_usage_perc"), window)
    assert counting.calls["raw"] == 4
    assert source.raw(Selector("vllm:kv_cache_usage_perc"), window) is inside
    assert counting.calls["raw"] == 4
    # Switched off, the block changes nothing: the answer is kept.
    with unremembered(False):
        off = source.raw(Selector("vllm:num_requests_swapped"), window)
    assert source.raw(Selector("vllm:num_requests_swapped"), window) is off
    assert counting.calls["raw"] == 5


def test_an_unremembered_question_in_flight_is_still_asked_once(
    dataset_source: DatasetSource,
) -> None:
    held, source, expr, at = _held(dataset_source)
    mine: list[Instant] = []

    def ask_unremembered() -> None:
        with unremembered():
            mine.append(source.instant(expr, at))

    first = threading.Thread(target=ask_unremembered)
    first.start()
    deadline = time.monotonic() + 30
    while held.calls["instant"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    got, threads = _ask_from_threads(source, expr, at)  # they wait on it
    held.release.set()
    for thread in (first, *threads):
        thread.join(timeout=30)
    assert held.calls["instant"] == 1
    assert all(answer is mine[0] for answer in got)
    # Not kept: the next caller asks again.
    source.instant(expr, at)
    assert held.calls["instant"] == 2
