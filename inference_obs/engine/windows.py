"""Which samples of each series fall in a window: vectorised range selection.

Every series' samples are contiguous and time-ordered in a
:class:`~inference_obs.samples.SampleSet`. Offsetting each series' timestamps
by ``series_index * span`` makes the whole set one sorted array, so a window
is found for all series with two ``numpy.searchsorted`` calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from inference_obs.samples import SampleSet, is_stale

__all__ = ["TimeIndex", "Windows", "drop_stale"]

Int64Array = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Windows:
    """Per series, samples ``lo[i]:hi[i]`` (indices into the set's arrays) lie in the window.

    ``start_ms`` and ``end_ms`` are the window's edges (unix milliseconds);
    whether a sample exactly at ``start_ms`` is inside depends on the rules
    that built it.
    """

    start_ms: int
    end_ms: int
    lo: Int64Array
    hi: Int64Array

    @property
    def counts(self) -> Int64Array:
        """Number of samples of each series in the window."""
        counts: Int64Array = self.hi - self.lo
        return counts


class TimeIndex:
    """A search index over a sample set's timestamps, built once, queried per window."""

    __slots__ = ("_base", "_keys", "_span", "_tmin", "samples")

    def __init__(self, samples: SampleSet) -> None:
        self.samples = samples
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

    def _key(self, ms: int) -> int:
        return int(np.clip(ms - self._tmin + 1, 0, self._span - 1))

    def window(self, start_ms: int, end_ms: int, *, left_open: bool) -> Windows:
        """Samples with ``start_ms <= t <= end_ms`` (``start_ms < t`` if ``left_open``)."""
        side: Literal["left", "right"] = "right" if left_open else "left"
        lo = np.searchsorted(self._keys, self._base + self._key(start_ms), side=side)
        hi = np.searchsorted(self._keys, self._base + self._key(end_ms), side="right")
        return Windows(start_ms, end_ms, lo.astype(np.int64), hi.astype(np.int64))


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
