"""Work asked at once: the run's threads, and how a reading starts work in them.

Over a slow link a report's time is its round trips, so it asks what it can
at once. A run opens one :class:`Pool` (``with Pool(workers):``), and
inside it :func:`soon` starts a piece of work (an analysis, a question) in
the pool's threads, and :meth:`Pending.result` gives its result. Work nobody
started yet when its result is needed runs in the thread that needs it, so
work started from inside other work never waits for a free thread; outside a
pool (an analysis called alone), or with one worker, everything runs in order
in the calling thread, exactly as a plain call would.

The pool in use is found in a :mod:`contextvars` variable, as
:func:`asyncio.get_running_loop` finds the running loop: work started in it
runs in a copy of the context it was started from, so work it starts in turn
finds the same pool. Analyses never schedule threads themselves: they ask
their :class:`~inference_obs.reading.context.Reading` (``r.soon``,
``r.together``), and the run owns the pool. Answers are shared between
threads by the source's cache
(:class:`~inference_obs.source.remembering.RememberingSource`), not here.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

from inference_obs.errors import ConfigurationError

__all__ = ["Pending", "Pool", "soon", "together"]

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


_CURRENT: contextvars.ContextVar[Pool | None] = contextvars.ContextVar(
    "inference_obs_pool", default=None
)


class Pool:
    """Threads that run work started with :func:`soon` while the pool is entered.

    Parameters
    ----------
    workers
        Threads (1: none, work runs in the thread that needs its result).
        They start with the first piece of work. How many requests reach a
        server at once is the source's to bound.

    Examples
    --------
    >>> with Pool(4):
    ...     together([lambda: 1, lambda: 2])
    [1, 2]
    """

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ConfigurationError(
                f"workers must be at least 1 (pieces of work run at once), not {workers!r}"
            )
        self.workers = workers
        self._lock = threading.Lock()
        self._threads: ThreadPoolExecutor | None = None
        self._closed = False
        self._entered: list[contextvars.Token[Pool | None]] = []

    def __repr__(self) -> str:
        return f"Pool(workers={self.workers})"

    def __enter__(self) -> Pool:
        self._entered.append(_CURRENT.set(self))
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._entered.pop())
        if not self._entered:
            self.close()

    def close(self) -> None:
        """Stop the threads: work not started is dropped, work running is waited for.

        Work started afterwards runs when its result is needed.
        """
        with self._lock:
            threads, self._threads, self._closed = self._threads, None, True
        if threads is not None:
            threads.shutdown(wait=True, cancel_futures=True)

    def start(self, call: Callable[[], T]) -> Pending[T]:
        """``call`` started in a free thread now (see :func:`soon`)."""
        pending = Pending(call)
        with self._lock:
            if self._threads is None and self.workers > 1 and not self._closed:
                self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="inference-obs")
            threads = self._threads
        if threads is not None:
            # Closed meanwhile: the work runs when its result is needed.
            with contextlib.suppress(RuntimeError):
                threads.submit(pending.run)
        return pending


def soon(call: Callable[[], T]) -> Pending[T]:
    """Start ``call`` now in the entered :class:`Pool`'s threads; outside one (or with one
    worker) it runs when its result is first needed.

    ``call`` should share nothing mutable with the caller: it may run in another thread.

    Examples
    --------
    >>> ran = []
    >>> pending = soon(lambda: ran.append("ran") or len(ran))
    >>> ran  # not run yet: outside a pool, nothing runs until asked
    []
    >>> pending.result(), ran
    (1, ['ran'])
    """
    pool = _CURRENT.get()
    return pool.start(call) if pool is not None else Pending(call)


def together(calls: Iterable[Callable[[], T]]) -> list[T]:
    """The results of ``calls`` in their order, run at once where a pool allows (:func:`soon`).

    Every call is started before any result is awaited; the first exception
    in the calls' order is raised once all have finished.
    """
    pending = [soon(call) for call in calls]
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
