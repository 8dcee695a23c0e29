"""Replicas in a sentence: a handful named, then how many more, so a fleet's line stays short.

Every place that names replicas in prose (events, Summary items, outliers)
names at most :data:`NAMED` of them; tables of one row per replica give way
to a distribution beyond :data:`MANY`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["MANY", "NAMED", "named"]

#: Replicas named in a sentence before "and N more": a fleet's event stays one line.
NAMED = 5
#: Replicas up to which a table shows one row per replica; beyond, the body shows their
#: distribution and outliers, and the rows go to the appendix and ``replicas.csv``.
MANY = 8


def named(replicas: Sequence[str], limit: int = NAMED) -> str:
    """At most ``limit`` names, then how many more.

    Examples
    --------
    >>> named(["a", "b", "c"], 2)
    'a, b and 1 more'
    >>> named([])
    'the whole deployment'
    """
    if not replicas:
        return "the whole deployment"
    shown = ", ".join(replicas[:limit])
    return f"{shown} and {len(replicas) - limit} more" if len(replicas) > limit else shown
