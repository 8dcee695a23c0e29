"""The standard query type: one documented question with its builder.

A :class:`StandardQuery` says what it computes, in which unit, and what it does
not mean; its builder takes a deployment's matchers, a window in seconds and a
grouping. The queries themselves live in :mod:`.vllm_queries`,
:mod:`.sglang_queries`, :mod:`.dcgm_queries` and :mod:`.host_queries`;
:mod:`.standard` collects them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inference_obs.metrics.family import Family
from inference_obs.query import Expr, Matcher

__all__ = ["Builder", "By", "Matchers", "StandardQuery", "ratio", "times"]

Matchers = Sequence[Matcher]
By = tuple[str, ...]
Builder = Callable[[Matchers, float, By], Expr]


@dataclass(frozen=True, slots=True)
class StandardQuery:
    """A named, documented query of the catalogue.

    Attributes
    ----------
    key
        Stable identifier (also the exported file name).
    title
        One line, what the number is.
    unit
        Unit of the result (``"seconds"``, ``"ratio"`` for 0-1, ``"percent"``...).
    description
        How it is computed and why this way.
    caveats
        What the number does not mean.
    families
        The metric families it reads.
    builder
        ``(matchers, window_seconds, by) -> Expr``.
    default_by
        Grouping labels used in exported files.
    """

    key: str
    title: str
    unit: str
    description: str
    caveats: tuple[str, ...]
    families: tuple[Family, ...]
    builder: Builder
    default_by: By = ()

    def expr(self, matchers: Matchers = (), window: float = 3600.0, by: By | None = None) -> Expr:
        """The query for a deployment's ``matchers`` over ``window`` seconds."""
        return self.builder(matchers, window, self.default_by if by is None else by)


def ratio(num: Callable[..., Expr], den: Callable[..., Expr]) -> Builder:
    """A builder dividing ``num``'s query by ``den``'s, both with the same arguments."""

    def build(matchers: Matchers, window: float, by: By) -> Expr:
        return num(matchers, window, by) / den(matchers, window, by)

    return build


def times(builder: Builder, factor: float) -> Builder:
    """A builder scaling ``builder``'s query by a constant ``factor`` (unit conversion)."""

    def build(matchers: Matchers, window: float, by: By) -> Expr:
        return builder(matchers, window, by) * factor

    return build
