"""Public helpers for tests that feed the engine: Prometheus's series notation.

promqltest and ``promtool test rules`` write sample values compactly:
``"0+10x3"`` is ``0 10 20 30``, ``"1 _ 3"`` leaves a gap, ``"stale"`` is a
staleness marker. :func:`series` expands that notation into timestamps and
values ready for :class:`~inference_obs.samples.Series`.
"""

from __future__ import annotations

import re

from inference_obs.errors import ConfigurationError
from inference_obs.samples import STALE_NAN

__all__ = ["series"]

_NUMBER = r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|[Ii]nf|NaN)"
# "a", "axn" (a repeated n+1 times), "a+bxn" / "a-bxn" (a, then n further steps of b).
_EXPANSION = re.compile(rf"(?P<a>{_NUMBER})(?:(?:(?P<sign>[+-])(?P<b>{_NUMBER}))?x(?P<n>\d+))?")
_GAPS = re.compile(r"_(?:x(?P<n>\d+))?")
_STALES = re.compile(r"stale(?:x(?P<n>\d+))?")


def _expand(token: str) -> list[float | None]:
    """One token as values, ``None`` standing for a missing sample."""
    if gaps := _GAPS.fullmatch(token):
        # "_xn" is n missing samples: a gap cannot increment.
        return [None] * int(gaps["n"] or 1)
    if stales := _STALES.fullmatch(token):
        return [STALE_NAN] * int(stales["n"] or 1)
    match = _EXPANSION.fullmatch(token)
    if match is None:
        raise ConfigurationError(
            f"not series notation: {token!r}; write a number, a+bxn, a-bxn, axn, _, _xn, "
            "stale or stalexn (e.g. '0+10x3')"
        )
    start = float(match["a"])
    if match["n"] is None:
        return [start]
    step = float(match["b"]) if match["b"] is not None else 0.0
    if match["sign"] == "-":
        step = -step
    return [start + i * step for i in range(int(match["n"]) + 1)]


def series(notation: str, start: float = 0, step: float = 60) -> tuple[list[float], list[float]]:
    """Expand Prometheus series notation into timestamps and values.

    Parameters
    ----------
    notation
        Whitespace-separated tokens: a number (``1``, ``-2.5``, ``1e3``,
        ``Inf``, ``-Inf``, ``NaN``); ``a+bxn`` or ``a-bxn`` (``a`` then ``n``
        further samples, each ``b`` more or less); ``axn`` (``a`` repeated
        ``n + 1`` times); ``_`` (no sample at this step) or ``_xn`` (``n``
        missing samples); ``stale`` (a staleness marker, :data:`STALE_NAN`)
        or ``stalexn``.
    start
        Time of the first step, unix seconds.
    step
        Seconds between steps.

    Returns
    -------
    tuple of list of float
        Timestamps (seconds) and values of the samples present.

    Raises
    ------
    ConfigurationError
        On a token that is not series notation (the message names it).

    Examples
    --------
    >>> series("0+10x3")
    ([0.0, 60.0, 120.0, 180.0], [0.0, 10.0, 20.0, 30.0])
    >>> series("1 _x2 4", step=15)
    ([0.0, 45.0], [1.0, 4.0])
    >>> series("5-1x2 1x1", start=100, step=10)
    ([100.0, 110.0, 120.0, 130.0, 140.0], [5.0, 4.0, 3.0, 1.0, 1.0])
    >>> import numpy as np
    >>> from inference_obs.samples import is_stale
    >>> times, values = series("1 stale -Inf")
    >>> is_stale(np.array(values)).tolist(), values[2]
    ([False, True, False], -inf)
    """
    times: list[float] = []
    values: list[float] = []
    position = 0
    for token in notation.split():
        for value in _expand(token):
            if value is not None:
                times.append(float(start + position * step))
                values.append(value)
            position += 1
    return times, values
