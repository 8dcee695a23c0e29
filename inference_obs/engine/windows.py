"""Which samples of each series fall in a window: vectorised range selection.

Every series' samples are contiguous and time-ordered in a
:class:`~inference_obs.samples.SampleSet`. Offsetting each series' timestamps
by ``series_index * span`` makes the whole set one sorted array, so a window
is found for all series with two ``numpy.searchsorted`` calls; a guess from
each series' sample rate, checked against its neighbours, usually saves even
those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from inference_obs.engine.facts import Facts
from inference_obs.samples import SampleSet, is_stale

__all__ = ["TimeIndex", "Windows", "drop_stale"]

Int64Array = npt.NDArray[np.int64]

# How many samples around a guessed window edge are looked at (see TimeIndex._find).
_NEAR = 4


@dataclass(frozen=True, slots=True)
class Windows:
    """Per series, samples ``lo[i]:hi[i]`` (indices into the set's arrays) lie in the window.

    ``start_ms`` and ``end_ms`` are the window's edges (unix milliseconds);
    whether a sample exactly at ``start_ms`` is inside depends on the rules
    that built it. ``facts`` are the cached :class:`~inference_obs.engine.facts.Facts`
    of the sample set the windows were found in, when known.
    """

    start_ms: int
    end_ms: int
    lo: Int64Array
    hi: Int64Array
    facts: Facts | None = field(default=None, compare=False, repr=False)

    @property
    def counts(self) -> Int64Array:
        """Number of samples of each series in the window."""
        counts: Int64Array = self.hi - self.lo
        return counts

    def facts_for(self, samples: SampleSet) -> Facts:
        """The cached facts of ``samples`` if these windows carry them, else fresh (lazy) ones."""
        if self.facts is not None and self.facts.samples is samples:
            return self.facts
        return Facts(samples)


class TimeIndex:
    """A search index over a sample set's timestamps, built once, queried per window."""

    __slots__ = (
        "_base",
        "_ends",
        "_first",
        "_keys",
        "_rate",
        "_span",
        "_starts",
        "_tmin",
        "facts",
        "samples",
    )

    def __init__(self, samples: SampleSet) -> None:
        self.samples = samples
        #: Derived arrays of ``samples``, computed on first use and shared by every window.
        self.facts = Facts(samples)
        n = len(samples)
        sizes = np.diff(samples.offsets)
        t = samples.t_ms
        self._tmin = int(t.min()) if t.size else 0
        # Keys of series i lie in [i * span + 1, i * span + span - 2]: a window
        # edge clipped to [0, span - 1] can never reach a neighbouring series.
        self._span = (int(t.max()) - self._tmin + 3) if t.size else 3
        self._base: Int64Array = np.arange(n, dtype=np.int64) * self._span
        owner = np.repeat(np.arange(n, dtype=np.int64), sizes)
        self._keys: Int64Array = owner * self._span + (t - self._tmin + 1)
        # Each series' first key (relative to its base) and samples per unit
        # of key, to guess where a window edge falls (see _find).
        self._starts: Int64Array = samples.offsets[:-1].astype(np.int64)
        self._ends: Int64Array = samples.offsets[1:].astype(np.int64)
        # (An empty set gets a dummy key to read; no series uses it.)
        padded = self._keys if t.size else np.zeros(1, np.int64)
        last = np.maximum(self._ends - 1, 0)
        first = np.where(sizes > 0, padded[np.minimum(self._starts, last)] - self._base, 0)
        covered = np.where(sizes > 1, padded[last] - self._base - first, 1)
        self._first = first.astype(np.float64)
        self._rate = np.where(sizes > 1, (sizes - 1) / np.maximum(covered, 1), 0.0)

    def _key(self, ms: int) -> int:
        return int(np.clip(ms - self._tmin + 1, 0, self._span - 1))

    def _find(self, key: int, side: Literal["left", "right"]) -> Int64Array:
        """``numpy.searchsorted(keys, base + key, side)`` for every series.

        A binary search over the whole set misses the cache at nearly every
        step. Scrapes are nearly regular, so each series' own sample rate
        puts the answer within a sample or two of a guess; the neighbours of
        a small range around it prove the answer (the key before the range is
        below the target, the one after it is not). Only series where that
        proof fails are searched the slow way.
        """
        keys, starts, ends = self._keys, self._starts, self._ends
        targets = self._base + key
        if not keys.size:
            return starts.copy()
        guess = starts + np.rint((key - self._first) * self._rate).astype(np.int64)
        low = np.clip(guess - _NEAR // 2, starts, ends)
        high = np.minimum(low + _NEAR, ends)
        last = keys.size - 1
        near = keys[np.minimum(low[:, None] + np.arange(_NEAR), last)]
        before_low = keys[np.maximum(low - 1, 0)]
        at_high = keys[np.minimum(high, last)]
        if side == "left":
            below, low_ok, high_ok = (
                near < targets[:, None],
                before_low < targets,
                at_high >= targets,
            )
        else:
            below, low_ok, high_ok = (
                near <= targets[:, None],
                before_low <= targets,
                at_high > targets,
            )
        inside = np.arange(_NEAR) < (high - low)[:, None]
        found: Int64Array = low + np.count_nonzero(below & inside, axis=1)
        proven = ((low == starts) | low_ok) & ((high == ends) | high_ok)
        if not proven.all():
            wrong = ~proven
            found[wrong] = np.searchsorted(keys, targets[wrong], side=side)
        return found

    def window(self, start_ms: int, end_ms: int, *, left_open: bool) -> Windows:
        """Samples with ``start_ms <= t <= end_ms`` (``start_ms < t`` if ``left_open``)."""
        side: Literal["left", "right"] = "right" if left_open else "left"
        lo = self._find(self._key(start_ms), side)
        hi = self._find(self._key(end_ms), "right")
        return Windows(start_ms, end_ms, lo, hi, self.facts)


def drop_stale(samples: SampleSet) -> SampleSet:
    """The same series without staleness markers: range functions never see them."""
    stale = is_stale(samples.values)
    if not stale.any():
        return samples
    keep = ~stale
    kept_before = np.concatenate(([0], np.cumsum(keep)))
    offsets = kept_before[samples.offsets].astype(np.int64)
    t_ms, values = samples.t_ms[keep], samples.values[keep]
    for array in (offsets, t_ms, values):
        array.flags.writeable = False
    return SampleSet(samples.names, samples.labels, offsets, t_ms, values)
