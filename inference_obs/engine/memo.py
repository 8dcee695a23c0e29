"""Values of subexpressions already evaluated at the same times, kept for the next query.

Reports ask many queries that share parts: the three quantiles of one
histogram share its merged buckets, a ratio's sides are asked alone and
again inside a condition, and a condition is joined to several families'
queries. :class:`Memo` keeps what a node evaluated to at a sequence of
evaluation times, keyed by the node itself (expressions are frozen
dataclasses, equal when written the same) and the times, so a repeated
part is evaluated once.

A kept value is shared by every later query that asks for it, so its arrays
are made read-only. What is kept is bounded by :attr:`Memo.budget`, counted
in vector elements (one per series per step), least recently used dropped
first.

Each entry remembers the *round* it was made in (an evaluator starts one
per query): :attr:`Memo.kept_hits` counts the lookups answered by a value
made in an earlier round, i.e. the queries that were partly or wholly
answered from what earlier ones kept, which a benchmark of cold queries must
keep at 0. Sharing inside one query (``sum_over_time`` and
``count_over_time`` of one selector sharing their windows) is not counted.
(Queries evaluated from several threads at once share rounds, so there the
count is a lower bound.)
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from threading import Lock
from typing import TypeVar

__all__ = ["Memo"]

T = TypeVar("T")


class Memo:
    """Values by key, up to ``budget`` in total weight; thread-safe.

    Parameters
    ----------
    budget
        The most weight kept in all (see :meth:`get_or_make`); an entry
        heavier than the budget alone is not kept.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._entries: OrderedDict[Hashable, tuple[object, int, int]] = OrderedDict()
        self._weight = 0
        self._lock = Lock()
        self._round = 0
        self.kept_hits = 0
        """Lookups answered by a value made in an earlier round (see :meth:`next_round`)."""

    def next_round(self) -> None:
        """Start a new round: later hits on values made before now count in :attr:`kept_hits`."""
        with self._lock:
            self._round += 1

    def clear(self) -> None:
        """Drop every kept value (the hit count stays)."""
        with self._lock:
            self._entries.clear()
            self._weight = 0

    def get_or_make(self, key: Hashable, make: Callable[[], T], weigh: Callable[[T], int]) -> T:
        """The value kept under ``key``, or ``make()`` kept under it with weight ``weigh(value)``.

        ``make`` runs outside the lock: two threads may both make a value
        for the same key, and the later one is kept.
        """
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                if found[2] != self._round:
                    self.kept_hits += 1
                return found[0]  # type: ignore[return-value]
        value = make()
        weight = weigh(value)
        if weight > self.budget:
            return value
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._weight -= previous[1]
            self._entries[key] = (value, weight, self._round)
            self._weight += weight
            while self._weight > self.budget:
                _, (_, dropped, _) = self._entries.popitem(last=False)
                self._weight -= dropped
        return value
