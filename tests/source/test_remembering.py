"""RememberingSource: each distinct question asked once (in flight included), the same answers
as the source; work started with soon/together, in threads or in order."""

from __future__ import annotations

import contextvars
import threading
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from inference_obs.errors import ConfigurationError, QueryFailed
from inference_obs.query import Expr, Selector
from inference_obs.report import build_report
from inference_obs.samples import Instant, SampleSet, Vector, Window
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.remembering import RememberingSource, soon, together

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


@pytest.mark.parametrize("workers", [0, -1])
def test_workers_below_one_are_refused(dataset_source: DatasetSource, workers: int) -> None:
    with pytest.raises(ConfigurationError, match=f"workers must be at least 1 .*not {workers}"):
        RememberingSource(dataset_source, workers=workers)


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


def test_a_question_in_flight_is_waited_for_not_asked_again(
    dataset_source: DatasetSource,
) -> None:
    held = Held(dataset_source)
    source = RememberingSource(held)
    window = dataset_source.dataset.manifest.window.window()
    expr = Selector("vllm:num_requests_running").sum()
    got, threads = _ask_from_threads(source, expr, window.end_s)
    held.release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert held.calls["instant"] == 1
    assert all(answer is got[0] for answer in got)
    assert isinstance(got[0], Instant)


def test_an_error_in_flight_reaches_every_waiter_and_is_not_remembered(
    dataset_source: DatasetSource,
) -> None:
    held = Held(dataset_source)
    held.fail_instant = True
    source = RememberingSource(held)
    window = dataset_source.dataset.manifest.window.window()
    expr = Selector("vllm:num_requests_running").sum()
    got, threads = _ask_from_threads(source, expr, window.end_s)
    held.release.set()
    for thread in threads:
        thread.join(timeout=30)
    assert held.calls["instant"] == 1
    assert all(isinstance(answer, QueryFailed) for answer in got)
    held.fail_instant = False
    # Asked again, not answered from memory: the source's own answer this time.
    again = source.instant(expr, window.end_s)
    assert held.calls["instant"] == 2
    plain = dataset_source.instant(expr, window.end_s).value
    assert isinstance(again.value, Vector)
    assert isinstance(plain, Vector)
    assert again.value.as_dict() == plain.as_dict()
    assert len(plain) == 1


def test_together_gives_results_in_order_and_the_first_error_once_all_ran(
    dataset_source: DatasetSource,
) -> None:
    finished: list[int] = []

    def work(i: int) -> int:
        time.sleep(0.05 * (3 - i))  # the later ones finish first
        finished.append(i)
        if i in (1, 2):
            raise ValueError(f"failed {i}")
        return i

    with RememberingSource(dataset_source, workers=4) as source:
        assert together(source, [partial(work, i) for i in (0, 3)]) == [0, 3]
        with pytest.raises(ValueError, match="failed 1"):
            together(source, [partial(work, i) for i in range(4)])
    assert sorted(finished) == [0, 0, 1, 2, 3, 3]


def test_work_started_inside_work_never_waits_for_a_free_thread(
    dataset_source: DatasetSource,
) -> None:
    # Two threads, work nested four deep and three wide: what no thread has
    # started runs in the thread that needs it, so this finishes.
    def nested(source: RememberingSource, depth: int) -> int:
        if depth == 0:
            return 1
        return sum(together(source, [partial(nested, source, depth - 1) for _ in range(3)]))

    done: list[int] = []
    with RememberingSource(dataset_source, workers=2) as source:
        thread = threading.Thread(target=lambda: done.append(nested(source, 4)))
        thread.start()
        thread.join(timeout=60)
    assert done == [81]


def test_without_threads_work_runs_in_order_where_its_result_is_needed(
    dataset_source: DatasetSource,
) -> None:
    ran: list[str] = []
    source = RememberingSource(dataset_source)
    first = soon(source, lambda: ran.append("first"))
    second = soon(dataset_source, lambda: ran.append("second"))
    assert ran == []
    second.result()
    first.result()
    first.result()
    assert ran == ["second", "first"]


def test_work_runs_in_the_context_it_was_started_from(dataset_source: DatasetSource) -> None:
    where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="outside")

    def started() -> list[str]:
        where.set("inside")
        pending = [soon(source, where.get) for _ in range(4)]
        return [one.result() for one in pending]

    with RememberingSource(dataset_source, workers=4) as source:
        assert soon(source, started).result() == ["inside"] * 4
    assert where.get() == "outside"
