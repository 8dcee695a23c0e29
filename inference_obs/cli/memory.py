"""Freed memory handed back to the system between a report's phases.

When the analyses end, their answers and intermediate arrays are garbage,
but the allocators keep the pages they held (CPython's in its arenas, glibc
its heap) for the next allocations; the written report then starts from the
analyses' peak. :func:`hand_back_freed` collects the garbage and asks glibc
to return its free pages (``malloc_trim``), so the writing adds to what the
report holds rather than to that peak: on a 128-replica fleet read through
VictoriaMetrics, about 40 MiB less at the end (``benchmarks/fleet_scale.py``).
Where the C library is not glibc, only the collection is done.
"""

from __future__ import annotations

import ctypes
import gc
from functools import cache

__all__ = ["hand_back_freed"]


@cache
def _malloc_trim() -> ctypes._NamedFuncPointer | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:  # the process's own symbols: the C library it was linked with
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows): nothing to trim with
        return None


def hand_back_freed() -> bool:
    """Collect garbage, then return the C heap's free pages to the system.

    Returns whether pages could be asked back (glibc's ``malloc_trim`` exists).
    """
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
