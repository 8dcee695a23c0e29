"""A source that asks each distinct question once, however many threads ask it.

Analyses are independent, so several read the same series: queueing, the
bottleneck and the boundary analysis each read raw GPU utilisation, every
finish-reason share reads ``request_success_total``, and the comparison
checks run the per-deployment analyses again. On a live server each of those
was a request, and most of a report's bytes (measured by
``benchmarks/live_report.py``: over half of them, on a generated fleet).

:class:`RememberingSource` answers a repeated call (same method, same
arguments) with the first answer. Answers are immutable (read-only arrays,
frozen results), so sharing them is safe. It is safe to use from several
threads: a question asked while the same one is in flight waits for that
answer instead of asking again. An error is not remembered: the callers
waiting on that question get it, and a later identical call asks again. It
holds every answer until it is dropped: use one per report, not one per
process.

A question only its caller asks (a batch of joined questions, a figure's
range of every GPU) is asked inside :func:`unremembered`: still asked once
however many wait on it, but its answer is not kept. On a fleet of 128
replicas such answers were half of what a report remembered, held to its
end for nobody; a report's test holds that no question reaches its source
twice.

The threads a report asks in are the run's (:class:`~inference_obs.reading.schedule.Pool`);
this source only keeps the answers they share.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import TypeVar

from inference_obs.query import Expr, Selector
from inference_obs.samples import Instant, Labels, Matrix, SampleSet, Window
from inference_obs.source.base import EngineInfo, Metadata, Source

__all__ = ["RememberingSource", "remembered", "unremembered"]

T = TypeVar("T")

#: Whether the questions this thread asks now are to be answered without being kept.
_PASSING = threading.local()


@contextmanager
def unremembered(on: bool = True) -> Iterator[None]:
    """Questions this thread asks of a :class:`RememberingSource` in the block are not kept
    (with ``on`` False, the block changes nothing).

    Each is still asked once however many callers wait on it, and one
    already kept is answered from memory; only the answer is not kept for
    later callers, who would ask again. For a question that only its caller
    asks; what its asking needs first that others need too (the families a
    view finds) is asked inside :func:`remembered`.
    """
    if not on:
        yield
        return
    with _passing(True):
        yield


@contextmanager
def remembered() -> Iterator[None]:
    """Questions this thread asks in the block are kept, inside :func:`unremembered` too."""
    with _passing(False):
        yield


@contextmanager
def _passing(on: bool) -> Iterator[None]:
    before = getattr(_PASSING, "on", False)
    _PASSING.on = on
    try:
        yield
    finally:
        _PASSING.on = before


class RememberingSource:
    """The :class:`~inference_obs.source.base.Source` ``source``, asked each question once.

    Parameters
    ----------
    source
        The source to ask.

    Examples
    --------
    >>> from inference_obs.source.dataset.source import DatasetSource
    >>> source = RememberingSource(DatasetSource("datasets/r1-decode"))
    >>> source.info() is source.info()
    True
    """

    def __init__(self, source: Source) -> None:
        self.source = source
        self._answers: dict[Hashable, object] = {}
        self._asking: dict[Hashable, Future[object]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RememberingSource({self.source!r})"

    def _ask(self, key: Hashable, ask: Callable[[], T]) -> T:
        keep = not getattr(_PASSING, "on", False)
        try:
            with self._lock:
                if key in self._answers:
                    return self._answers[key]  # type: ignore[return-value]
                asking = self._asking.get(key)
                if asking is None:
                    mine: Future[object] = Future()
                    self._asking[key] = mine
        except TypeError:  # an unhashable argument: ask every time
            return ask()
        if asking is not None:  # the same question is in flight: wait for its answer
            return asking.result()  # type: ignore[return-value]
        try:
            answer = ask()
        except BaseException as exc:
            with self._lock:
                del self._asking[key]
            mine.set_exception(exc)
            raise
        with self._lock:
            if keep:
                self._answers[key] = answer
            del self._asking[key]
        mine.set_result(answer)
        return answer

    def info(self) -> EngineInfo:
        """The engine answering (asked once)."""
        return self._ask(("info",), self.source.info)

    def instant(self, expr: Expr, at: float) -> Instant:
        """``expr`` at ``at``, asked once per (expression, time)."""
        return self._ask(("instant", expr, at), lambda: self.source.instant(expr, at))

    def range(self, expr: Expr, window: Window, step: float) -> Matrix:
        """``expr`` across ``window`` every ``step`` seconds, asked once per arguments."""
        return self._ask(
            ("range", expr, window, step), lambda: self.source.range(expr, window, step)
        )

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        """Raw samples of ``selector`` in ``window``, asked once per arguments."""
        return self._ask(("raw", selector, window), lambda: self.source.raw(selector, window))

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        """Label sets of the selected series in ``window``, asked once per arguments."""
        return self._ask(("series", selector, window), lambda: self.source.series(selector, window))

    def label_names(self, window: Window) -> tuple[str, ...]:
        """Label names present in ``window``, asked once per window."""
        return self._ask(("label_names", window), lambda: self.source.label_names(window))

    def label_values(self, label: str, window: Window) -> tuple[str, ...]:
        """Values of ``label`` in ``window``, asked once per arguments."""
        return self._ask(
            ("label_values", label, window), lambda: self.source.label_values(label, window)
        )

    def metadata(self, metric: str | None = None) -> tuple[Metadata, ...]:
        """Type, help and unit of ``metric`` (or of all), asked once per argument."""
        return self._ask(("metadata", metric), lambda: self.source.metadata(metric))
