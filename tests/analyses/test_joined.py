"""Several instant questions in one request: each part as the source answers it alone; an
engine in this process is asked each alone; several counter ratios are one joined query and no
series listing."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference_obs.errors import Annotation, QueryError
from inference_obs.query import Expr, Matcher, Number, Selector, increase, to_promql
from inference_obs.reading.counter_totals import Pair, Pairing, totals
from inference_obs.reading.joined import PART, instants, joined, split, vectors
from inference_obs.samples import Instant, Labels, Window
from inference_obs.source.base import EngineInfo
from inference_obs.source.dataset.source import DatasetSource

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "h100-vs-h200"


class Counting:
    """Delegates to a dataset source but answers as a server would (engine kind
    ``prometheus``); counts instant queries and may add an annotation to joined ones."""

    def __init__(self, source: DatasetSource, annotate: bool = False) -> None:
        self.source = source
        self.annotate = annotate
        self.asked: Counter[str] = Counter()

    def info(self) -> EngineInfo:
        return replace(self.source.info(), kind="prometheus")

    def instant(self, expr: Expr, at: float) -> Instant:
        answer = self.source.instant(expr, at)
        self.asked["joined" if PART in to_promql(expr) else "alone"] += 1
        if self.annotate and PART in to_promql(expr):
            note = Annotation("server_info", "somewhere in the query (1:20)")
            return Instant(answer.value, at, answer.promql, (note,))
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    return DatasetSource(DATASET)


def _questions() -> list[Expr]:
    bucket = Selector("vllm:time_to_first_token_seconds_bucket")
    return [
        increase(bucket.over(600)).sum(by=("le",)),  # many series
        Selector("vllm:num_requests_running").sum(by=("pod",)),  # a few
        Selector("no_such_metric").sum(),  # none
        Selector("vllm:num_requests_waiting").max(),  # one
    ]


def test_each_part_is_the_answer_the_source_gives_it_alone(source: DatasetSource) -> None:
    at = source.dataset.manifest.window.window().end_s
    counting = Counting(source)
    got = instants(counting, _questions(), at)
    assert counting.asked == Counter({"joined": 1})
    for expr, one in zip(_questions(), got, strict=True):
        alone = source.instant(expr, at)
        assert isinstance(one.value, type(alone.value))
        assert one.value.labels == alone.value.labels  # type: ignore[union-attr]
        assert np.array_equal(one.value.values, alone.value.values)  # type: ignore[union-attr]
        assert one.promql == to_promql(expr)
        assert one.annotations == ()
    assert len(got[0].value) > 1  # type: ignore[arg-type]
    assert len(got[2].value) == 0  # type: ignore[arg-type]


def test_a_joined_answer_with_annotations_is_asked_again_part_by_part(
    source: DatasetSource,
) -> None:
    at = source.dataset.manifest.window.window().end_s
    counting = Counting(source, annotate=True)
    got = instants(counting, _questions(), at)
    assert counting.asked == Counter({"joined": 1, "alone": 4})
    assert [one.promql for one in got] == [to_promql(e) for e in _questions()]


def test_a_scalar_question_is_asked_alone(source: DatasetSource) -> None:
    at = source.dataset.manifest.window.window().end_s
    counting = Counting(source)
    got = instants(counting, [Number(2.0), Selector("vllm:num_requests_running").sum()], at)
    assert counting.asked == Counter({"alone": 2})
    assert got[0].value == 2.0


@pytest.mark.parametrize("in_this_process", [False, True])
def test_vectors_refuses_a_scalar_before_asking(
    source: DatasetSource, in_this_process: bool
) -> None:
    counting = Counting(source)
    if in_this_process:
        counting.info = source.info  # type: ignore[method-assign]
    questions = [Selector("vllm:num_requests_running").sum(), Number(2.0)]
    with pytest.raises(QueryError, match=r"^2 is a scalar; vectors\(\) asks instant-vector"):
        vectors(counting, questions, source.dataset.manifest.window.window().end_s)
    assert not counting.asked


def test_split_removes_the_part_label_and_keeps_the_order(source: DatasetSource) -> None:
    at = source.dataset.manifest.window.window().end_s
    questions = _questions()[1:2] * 2
    first, second = split(joined(source, questions, at), 2)
    assert first.labels == second.labels
    assert all(PART not in labels for labels in first.labels)


def test_an_engine_in_this_process_is_asked_each_question_alone(source: DatasetSource) -> None:
    at = source.dataset.manifest.window.window().end_s
    local = Counting(source)
    local.info = source.info  # type: ignore[method-assign]
    got = instants(local, _questions(), at)
    parts = vectors(local, _questions(), at)
    assert local.asked == Counter({"alone": 8})
    for one, vector in zip(got, parts, strict=True):
        assert one.value.labels == vector.labels  # type: ignore[union-attr]


def test_several_counter_ratios_are_one_joined_query_and_no_series_listing(
    source: DatasetSource,
) -> None:
    window = source.dataset.manifest.window.window()
    pod = Matcher.regex("pod", "dsv4-h100-.*")
    ttft, e2e = "vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"
    bucket = Selector(f"{ttft}_bucket", (pod,))
    below = replace(bucket, matchers=(pod, Matcher.equal("le", "0.5")))
    every = replace(bucket, matchers=(pod, Matcher.equal("le", "+Inf")))
    total, count = Selector(f"{e2e}_sum", (pod,)), Selector(f"{e2e}_count", (pod,))
    check = count.sum()
    pairs = [
        Pair(below, every, frozenset({"le"}), Pairing.MATCHED, ("pod",), check),
        Pair(total, count, frozenset(), Pairing.MATCHED, (), check),
        Pair(below, every, frozenset(), Pairing.PART_OF_WHOLE, (), check),
    ]

    class Unlisted(Counting):
        def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
            raise AssertionError(f"a series listing was asked: {selector}")

    served = Unlisted(source)
    got = totals(served, window, pairs)
    assert served.asked == Counter({"joined": 1})
    assert got == totals(source, window, pairs)  # as the engine answers each alone
    # The pods' buckets pair up; the part of the whole divides the sums as they are.
    assert got[0].unpaired == got[1].unpaired == ()
    pods = {labels["pod"] for labels in source.series(count, window)}
    assert {group["pod"] for group in got[0].groups} == pods
    below_changes, every_changes = got[2].groups[Labels(())]
    assert 0 < below_changes < every_changes
