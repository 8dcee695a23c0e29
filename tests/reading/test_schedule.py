"""The run's threads: work started with soon/together runs in the entered Pool's threads, or in
order where its result is needed; in the context it was started from."""

from __future__ import annotations

import contextvars
import threading
import time
from functools import partial

import pytest

from inference_obs.errors import ConfigurationError
from inference_obs.reading.schedule import Pool, soon, together


@pytest.mark.parametrize("workers", [0, -1])
def test_workers_below_one_are_refused(workers: int) -> None:
    with pytest.raises(ConfigurationError, match=f"workers must be at least 1 .*not {workers}"):
        Pool(workers)


def test_together_gives_results_in_order_and_the_first_error_once_all_ran() -> None:
    finished: list[int] = []

    def work(i: int) -> int:
        time.sleep(0.05 * (3 - i))  # the later ones finish first
        finished.append(i)
        if i in (1, 2):
            raise ValueError(f"failed {i}")
        return i

    with Pool(4):
        assert together([partial(work, i) for i in (0, 3)]) == [0, 3]
        with pytest.raises(ValueError, match="failed 1"):
            together([partial(work, i) for i in range(4)])
    assert sorted(finished) == [0, 0, 1, 2, 3, 3]


def test_work_started_inside_work_never_waits_for_a_free_thread() -> None:
    # Two threads, work nested four deep and three wide: what no thread has
    # started runs in the thread that needs it, so this finishes.
    def nested(depth: int) -> int:
        if depth == 0:
            return 1
        return sum(together([partial(nested, depth - 1) for _ in range(3)]))

    done: list[int] = []
    with Pool(2):
        # A new thread starts with an empty context: it is given this one, pool and all.
        context = contextvars.copy_context()
        thread = threading.Thread(target=lambda: done.append(context.run(nested, 4)))
        thread.start()
        thread.join(timeout=60)
    assert done == [81]


def test_without_threads_work_runs_in_order_where_its_result_is_needed() -> None:
    ran: list[str] = []
    first = soon(lambda: ran.append("first"))
    second = soon(lambda: ran.append("second"))
    assert ran == []
    second.result()
    first.result()
    first.result()
    assert ran == ["second", "first"]


def test_work_runs_in_the_context_it_was_started_from() -> None:
    where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="outside")

    def started() -> list[str]:
        where.set("inside")
        pending = [soon(where.get) for _ in range(4)]
        return [one.result() for one in pending]

    with Pool(4):
        assert soon(started).result() == ["inside"] * 4
    assert where.get() == "outside"


def _meet(timeout: float) -> bool:
    """Whether two pieces of work started together ran at once: each waits for the other."""
    meeting = threading.Barrier(2, timeout=timeout)

    def wait() -> bool:
        try:
            meeting.wait()
        except threading.BrokenBarrierError:
            return False
        return True

    return all(together([wait, wait]))


def test_in_a_pool_work_runs_at_once_and_outside_one_in_order() -> None:
    with Pool(2):
        assert _meet(timeout=10)
    # In order: the first waits alone until its timeout.
    assert not _meet(timeout=0.2)


def test_leaving_a_pool_restores_the_one_around_it() -> None:
    with Pool(2):
        with Pool(1):  # one worker: work runs in the thread that needs it, in order
            assert not _meet(timeout=0.2)
        assert _meet(timeout=10)
    assert not _meet(timeout=0.2)
