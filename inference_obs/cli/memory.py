"""Fewer heaps for a report's threads, and freed memory handed back between its phases.

A live report reads in a pool of threads (``report.build.WORKERS``), and
glibc gives each new thread that allocates a heap (an arena) of its own, up
to eight per core. The arenas' free memory is not shared: each keeps what its
thread freed. :func:`share_heaps`, called before the threads start, caps
them at :data:`ARENAS`; the threads mostly wait on answers and take turns at
the interpreter, so they seldom contend for a heap. On a 128-replica fleet
read through VictoriaMetrics, the peak fell by about 15 MiB (of 290), the
time the same (``benchmarks/fleet_scale.py``). ``MALLOC_ARENA_MAX`` in the
environment, glibc's own setting, is left to rule.

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
import os
from functools import cache

__all__ = ["ARENAS", "hand_back_freed", "share_heaps"]

#: The most heaps a report's threads allocate from (:func:`share_heaps`).
ARENAS = 2
#: glibc's ``mallopt`` parameter for the most arenas (``M_ARENA_MAX`` in malloc.h).
_M_ARENA_MAX = -8


@cache
def _glibc(name: str) -> ctypes._NamedFuncPointer | None:
    """The glibc function ``name``, or None where the C library has none."""
    try:  # the process's own symbols: the C library it was linked with
        function: ctypes._NamedFuncPointer = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):  # not glibc (musl, macOS, Windows)
        return None
    return function


def share_heaps(arenas: int = ARENAS) -> bool:
    """Have glibc give the threads started from now on at most ``arenas`` heaps in all.

    Returns whether the cap was set: not where the C library is not glibc, nor
    where ``MALLOC_ARENA_MAX`` is set in the environment (that setting rules).
    """
    mallopt = _glibc("mallopt")
    if mallopt is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(mallopt(_M_ARENA_MAX, arenas))


def hand_back_freed() -> bool:
    """Collect garbage, then return the C heap's free pages to the system.

    Returns whether pages could be asked back (glibc's ``malloc_trim`` exists).
    """
    gc.collect()
    trim = _glibc("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True
