"""A source that asks each distinct question once, and lets a report ask several at a time.

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

Over a slow link a report's time is its round trips, so it asks what it can
at once: :func:`soon` starts a piece of work (an analysis, a question) in the
source's threads, when it has them (``workers`` > 1), and :meth:`Pending.result`
gives its result. Work nobody started yet when its result is needed runs in
the thread that needs it, so work started from inside other work never waits
for a free thread, and with one worker (or another source) everything runs
in order in the calling thread, exactly as a plain call would.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, Protocol, TypeVar, runtime_checkable

from inference_obs.errors import ConfigurationError
from inference_obs.query import Expr, Selector
from inference_obs.samples import Instant, Labels, Matrix, SampleSet, Window
from inference_obs.source.base import EngineInfo, Metadata, Source

__all__ = ["Pending", "RememberingSource", "Starting", "soon", "together"]

T = TypeVar("T")


class Pending(Generic[T]):
    """Work started by :func:`soon`; :meth:`result` waits for it, or runs it if nobody has.

    The work runs in a copy of the context it was started from (its
    :mod:`contextvars`), as :func:`asyncio.to_thread` runs a function, in
    whichever thread runs it.
    """

    def __init__(self, call: Callable[[], T]) -> None:
        self._call: Callable[[], T] | None = call
        self._context = contextvars.copy_context()
        self._lock = threading.Lock()
        self._outcome: Future[T] = Future()

    def run(self) -> None:
        """Run the work here unless it has started elsewhere (then return at once)."""
        with self._lock:
            call, self._call = self._call, None
        if call is None:
            return
        try:
            result = self._context.run(call)
        except BaseException as exc:  # handed to every caller of result()
            self._outcome.set_exception(exc)
        else:
            self._outcome.set_result(result)

    def result(self) -> T:
        """The work's result (or its exception), running it in this thread if not started."""
        self.run()
        return self._outcome.result()


@runtime_checkable
class Starting(Protocol):
    """A source that runs work alongside: a :class:`RememberingSource`, or a view over one."""

    def start(self, call: Callable[[], T]) -> Pending[T]:
        """``call`` started in a free thread now, where there is one."""


class RememberingSource:
    """The :class:`~inference_obs.source.base.Source` ``source``, asked each question once.

    Parameters
    ----------
    source
        The source to ask.
    workers
        Threads that run work started with :func:`soon` (1: none, work runs
        in the thread that needs its result); read when work is first
        started, so it may be set until then. Use the source as a context
        manager, or call :meth:`close`, to stop them. How many requests
        reach a server at once is the wrapped source's to bound.

    Examples
    --------
    >>> from inference_obs.source.dataset.source import DatasetSource
    >>> source = RememberingSource(DatasetSource("datasets/r1-decode"))
    >>> source.info() is source.info()
    True
    """

    def __init__(self, source: Source, *, workers: int = 1) -> None:
        if workers < 1:
            raise ConfigurationError(
                f"workers must be at least 1 (requests asked at once), not {workers!r}"
            )
        self.source = source
        self.workers = workers
        self._answers: dict[Hashable, object] = {}
        self._asking: dict[Hashable, Future[object]] = {}
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"RememberingSource({self.source!r})"

    def __enter__(self) -> RememberingSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the threads: work not started is dropped, work running is waited for.

        Work started afterwards runs when its result is needed.
        """
        with self._lock:
            pool, self._pool, self._closed = self._pool, None, True
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def start(self, call: Callable[[], T]) -> Pending[T]:
        """``call`` started in a free thread now (see :func:`soon`)."""
        pending = Pending(call)
        with self._lock:
            if self._pool is None and self.workers > 1 and not self._closed:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="inference-obs")
            pool = self._pool
        if pool is not None:
            # Closed meanwhile: the work runs when its result is needed.
            with contextlib.suppress(RuntimeError):
                pool.submit(pending.run)
        return pending

    def _ask(self, key: Hashable, ask: Callable[[], T]) -> T:
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


def soon(source: Source, call: Callable[[], T]) -> Pending[T]:
    """Start ``call`` now where ``source`` can run work alongside (a :class:`RememberingSource`
    with workers); elsewhere it runs when its result is first needed.

    ``call`` should read through ``source`` and share nothing mutable with
    the caller: it may run in another thread.

    Examples
    --------
    >>> from inference_obs.source.dataset.source import DatasetSource
    >>> plain = DatasetSource("datasets/r1-decode")
    >>> pending = soon(plain, plain.info)
    >>> pending.result().kind
    'dataset'
    """
    if isinstance(source, Starting):
        return source.start(call)
    return Pending(call)


def together(source: Source, calls: Iterable[Callable[[], T]]) -> list[T]:
    """The results of ``calls`` in their order, run at once where ``source`` can (:func:`soon`).

    Every call is started before any result is awaited; the first exception
    in the calls' order is raised once all have finished.
    """
    pending = [soon(source, call) for call in calls]
    results: list[T] = []
    failed: BaseException | None = None
    for one in pending:
        try:
            results.append(one.result())  # runs here whatever no thread has started yet
        except BaseException as exc:
            failed = failed or exc
    if failed is not None:
        raise failed
    return results
