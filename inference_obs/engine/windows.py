"""Which samples of each series fall in a window: vectorised range selection.

Every series' samples are contiguous and time-ordered in a
:class:`~inference_obs.samples.SampleSet`. Offsetting each series' timestamps
by ``series_index * span`` makes the whole set one sorted array, so a window
is found for all series with two ``numpy.searchsorted`` calls; a guess from
each series' sample rate, checked against its neighbours, usually saves even
those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from inference_obs.engine.facts import Facts
from inference_obs.samples import Floats, Ints, SampleSet, is_stale

__all__ = ["TimeIndex", "Windows", "drop_stale"]

# How many samples around a guessed window edge are looked at (see TimeIndex._find).
_NEAR = 4
# Up to this many edges (series times window edges), one plain binary search
# over the keys beats the guesses: the guesses cost some twenty numpy calls
# however few the series, a search a microsecond or two (measured: 4 series
# 67 vs 1 us, 256 series 200 vs 64 us; from about 1,000 series the guesses win).
_DIRECT_EDGES = 1024


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
    lo: Ints
    hi: Ints
    facts: Facts | None = field(default=None, compare=False, repr=False)

    @property
    def counts(self) -> Ints:
        """Number of samples of each series in the window."""
        counts: Ints = self.hi - self.lo
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
        "_base2",
        "_ends",
        "_ends2",
        "_first2",
        "_keys",
        "_rate2",
        "_span",
        "_starts",
        "_starts2",
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
        # Each series is time-ordered: its first and last samples bound it.
        nonempty = sizes > 0
        firsts, lasts = samples.offsets[:-1][nonempty], samples.offsets[1:][nonempty] - 1
        self._tmin = int(t[firsts].min()) if t.size else 0
        # Keys of series i lie in [i * span + 1, i * span + span - 2]: a window
        # edge clipped to [0, span - 1] can never reach a neighbouring series.
        self._span = (int(t[lasts].max()) - self._tmin + 3) if t.size else 3
        self._base: Ints = np.arange(n, dtype=np.int64) * self._span
        # Series i's keys: its times shifted by base[i] - tmin + 1 (one repeat, one add).
        self._keys: Ints = np.repeat(self._base - (self._tmin - 1), sizes) + t
        # Each series' first key (relative to its base) and samples per unit
        # of key, to guess where a window edge falls (see _find).
        self._starts: Ints = samples.offsets[:-1].astype(np.int64)
        self._ends: Ints = samples.offsets[1:].astype(np.int64)
        # (An empty set gets a dummy key to read; no series uses it.)
        padded = self._keys if t.size else np.zeros(1, np.int64)
        last = np.maximum(self._ends - 1, 0)
        first = np.where(sizes > 0, padded[np.minimum(self._starts, last)] - self._base, 0)
        covered = np.where(sizes > 1, padded[last] - self._base - first, 1)
        rate = np.where(sizes > 1, (sizes - 1) / np.maximum(covered, 1), 0.0)
        # Every per-series array twice: one row per window edge (see _find).
        self._base2: Ints = np.tile(self._base, 2)
        self._starts2: Ints = np.tile(self._starts, 2)
        self._ends2: Ints = np.tile(self._ends, 2)
        self._first2 = np.tile(first.astype(np.float64), 2)
        self._rate2 = np.tile(rate, 2)

    def _key(self, ms: int) -> int:
        return min(max(ms - self._tmin + 1, 0), self._span - 1)

    def _find(self, start_key: int, end_key: int) -> tuple[Ints, Ints]:
        """``numpy.searchsorted(keys, base + key, "right")`` for every series, both keys at once.

        Both edges of a window go through one pass, rows ``0..n-1`` for
        ``start_key`` and ``n..2n-1`` for ``end_key``: half the numpy calls of
        two searches (see :meth:`_search`).
        """
        n = self._base.size
        if not self._keys.size:
            return self._starts.copy(), self._starts.copy()
        key = np.repeat(np.array([start_key, end_key], dtype=np.int64), n)
        if 2 * n <= _DIRECT_EDGES:
            direct: Ints = np.searchsorted(self._keys, self._base2 + key, side="right")
            return direct[:n], direct[n:]
        found = self._search(
            key, self._base2, self._starts2, self._ends2, self._first2, self._rate2
        )
        return found[:n], found[n:]

    def _search(
        self,
        key: Ints,
        base: Ints,
        starts: Ints,
        ends: Ints,
        first: Floats,
        rate: Floats,
    ) -> Ints:
        """``numpy.searchsorted(keys, base + key, "right")`` row by row (rows: series per key).

        A binary search over the whole set misses the cache at nearly every
        step. Scrapes are nearly regular, so each series' own sample rate
        puts the answer within a sample or two of a guess; the neighbours of
        a small range around it prove the answer (the key before the range is
        not above the target, the one after it is). Only series where that
        proof fails are searched the slow way.
        """
        keys = self._keys
        targets = base + key
        guess = starts + np.rint((key - first) * rate).astype(np.int64)
        # (ufuncs rather than np.clip, whose wrapper costs more than the work here)
        low = np.minimum(np.maximum(guess - _NEAR // 2, starts), ends)
        high = np.minimum(low + _NEAR, ends)
        last = keys.size - 1
        near = keys[np.minimum(low[:, None] + np.arange(_NEAR), last)]
        low_ok = keys[np.maximum(low - 1, 0)] <= targets
        high_ok = keys[np.minimum(high, last)] > targets
        inside = np.arange(_NEAR) < (high - low)[:, None]
        found: Ints = low + np.count_nonzero((near <= targets[:, None]) & inside, axis=1)
        proven = ((low == starts) | low_ok) & ((high == ends) | high_ok)
        if not proven.all():
            wrong = ~proven
            found[wrong] = np.searchsorted(keys, targets[wrong], side="right")
        return found

    def window(self, start_ms: int, end_ms: int, *, left_open: bool) -> Windows:
        """Samples with ``start_ms <= t <= end_ms`` (``start_ms < t`` if ``left_open``)."""
        # Keys are whole numbers: the first key >= k is the first key > k - 1,
        # and a series' keys never reach down to its base - 1 (see __init__).
        start_key = self._key(start_ms) - (0 if left_open else 1)
        lo, hi = self._find(start_key, self._key(end_ms))
        return Windows(start_ms, end_ms, lo, hi, self.facts)

    def windows(
        self, starts_ms: Sequence[int], ends_ms: Sequence[int], *, left_open: bool
    ) -> list[Windows]:
        """:meth:`window` of each ``(starts_ms[k], ends_ms[k])``, found in one pass for all."""
        n, m = self._base.size, len(starts_ms)
        if not self._keys.size or not m:
            pairs = zip(starts_ms, ends_ms, strict=True)
            return [self.window(a, b, left_open=left_open) for a, b in pairs]
        edges = [self._key(a) - (0 if left_open else 1) for a in starts_ms]
        edges += [self._key(b) for b in ends_ms]
        rows = 2 * m
        if rows * n <= _DIRECT_EDGES:
            targets = self._base[None, :] + np.array(edges, dtype=np.int64)[:, None]
            found: Ints = np.searchsorted(self._keys, targets.ravel(), side="right")
            return self._windows(starts_ms, ends_ms, found.reshape(rows, n))
        key = np.repeat(np.array(edges, dtype=np.int64), n)
        found = self._search(
            key,
            np.tile(self._base, rows),
            np.tile(self._starts, rows),
            np.tile(self._ends, rows),
            np.tile(self._first2[:n], rows),
            np.tile(self._rate2[:n], rows),
        ).reshape(rows, n)
        return self._windows(starts_ms, ends_ms, found)

    def _windows(
        self, starts_ms: Sequence[int], ends_ms: Sequence[int], found: Ints
    ) -> list[Windows]:
        """Windows from ``found``: rows ``0..m-1`` their starts, ``m..2m-1`` their ends."""
        m = len(starts_ms)
        return [
            Windows(a, b, found[k], found[m + k], self.facts)
            for k, (a, b) in enumerate(zip(starts_ms, ends_ms, strict=True))
        ]


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
