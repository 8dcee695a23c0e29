"""Durations and times in scenario files: ``"14m30s"``, ``"250ms"``, ``-300`` or ``90.5``.

Text uses PromQL duration units (``ms``, ``s``, ``m``, ``h``, ...), optionally
with a leading ``-``; a bare number is seconds. Times in a scenario are offsets
from the start of its window, so ``"14m"`` is fourteen minutes into it.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from inference_obs.errors import QueryError, ScenarioError
from inference_obs.query import parse_duration

__all__ = ["Offset", "Seconds", "to_seconds"]


def to_seconds(value: object) -> object:
    """Seconds from a duration text or a number; anything else is left for pydantic to refuse.

    Bad text raises :class:`~inference_obs.errors.ScenarioError` (a ValueError,
    which pydantic reports as the field's error).
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    if text in ("0", "0s", "0ms"):
        return 0.0
    try:
        return sign * parse_duration(text)
    except QueryError as exc:
        raise ScenarioError(f"{exc}; or give a number of seconds") from None


def _not_negative(seconds: float) -> float:
    if seconds < 0:
        raise ScenarioError(f"a duration cannot be negative, got {seconds} s")
    return seconds


Offset = Annotated[float, BeforeValidator(to_seconds)]
"""Seconds relative to the window start (may be negative: before the window)."""

Seconds = Annotated[float, BeforeValidator(to_seconds), AfterValidator(_not_negative)]
"""A non-negative length of time in seconds."""
