"""A source that asks each distinct question once: what one report needs from a server.

Analyses are independent, so several read the same series: queueing, the
bottleneck and the boundary analysis each read raw GPU utilisation, every
finish-reason share reads ``request_success_total``, and the comparison
checks run the per-deployment analyses again. On a live server each of those
was a request, and most of a report's bytes (measured by
``benchmarks/live_report.py``: over half of them, on a generated fleet).

:class:`RememberingSource` answers a repeated call (same method, same
arguments) with the first answer. Answers are immutable (read-only arrays,
frozen results), so sharing them is safe; an error is not remembered, so a
later identical call asks again. It holds every answer until it is dropped:
use one per report, not one per process.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

from inference_obs.query import Expr, Selector
from inference_obs.samples import Labels, SampleSet, Window
from inference_obs.source.base import EngineInfo, Instant, Matrix, Metadata, Source

__all__ = ["RememberingSource"]

T = TypeVar("T")


class RememberingSource:
    """The :class:`~inference_obs.source.base.Source` ``source``, asked each question once.

    Parameters
    ----------
    source
        The source to ask.

    Examples
    --------
    >>> from inference_obs.source.dataset_source import DatasetSource
    >>> source = RememberingSource(DatasetSource("datasets/r1-decode"))
    >>> source.info() is source.info()
    True
    """

    def __init__(self, source: Source) -> None:
        self.source = source
        self._answers: dict[Hashable, object] = {}

    def __repr__(self) -> str:
        return f"RememberingSource({self.source!r})"

    def _ask(self, key: Hashable, ask: Callable[[], T]) -> T:
        try:
            answer = self._answers[key]
        except KeyError:
            answer = self._answers[key] = ask()
        except TypeError:  # an unhashable argument: ask every time
            return ask()
        return answer  # type: ignore[return-value]

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
