"""Which series a selector chooses, and a sample set of only those series.

A TSDB finds a selector's series in its index; here the series of a
:class:`~inference_obs.samples.SampleSet` are found by name with scans in C
and checked against the matchers once per distinct label value, then their
samples are copied into a set of their own (:func:`take`), which the
evaluator indexes by time.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence

import numpy as np

from inference_obs.query import Selector
from inference_obs.samples import NAME, SampleSet

__all__ = ["select", "series_named", "take"]


def select(
    samples: SampleSet, selector: Selector, by_name: MutableMapping[str, Sequence[int]]
) -> list[int]:
    """Indices of the series ``selector``'s name and matchers choose, in the set's order.

    ``offset`` and ``@`` are not looked at. ``by_name`` keeps what
    :func:`series_named` found, for the next selector of the same metric.
    """
    names, labels = samples.names, samples.labels
    chosen: list[int]
    if selector.metric is None:
        chosen = list(range(len(names)))
    else:
        chosen = list(series_named(names, selector.metric, by_name))
    for m in selector.matchers:
        # Series share label values (a pod's many series): each distinct
        # value is matched once, not once per series.
        verdicts: dict[str, bool] = {}
        kept = []
        for i in chosen:
            value = names[i] if m.label == NAME else labels[i].get(m.label, "")
            verdict = verdicts.get(value)
            if verdict is None:
                verdict = verdicts[value] = m.matches(value)
            if verdict:
                kept.append(i)
        chosen = kept
    return chosen


def series_named(
    names: Sequence[str], metric: str, by_name: MutableMapping[str, Sequence[int]]
) -> Sequence[int]:
    """Indices of the series named ``metric``, in order; kept in ``by_name``.

    A set read from a file holds each metric's series together: then two
    scans in C (``count``, ``index``) and a check of the run find them,
    where a Python pass over every series name cost a new evaluator more
    than a small query's whole work.
    """
    found = by_name.get(metric)
    if found is None:
        count = names.count(metric)
        first = names.index(metric) if count else 0
        if names[first : first + count].count(metric) == count:
            found = range(first, first + count)
        else:
            found = [i for i, name in enumerate(names) if name == metric]
        by_name[metric] = found
    return found


def take(samples: SampleSet, chosen: Sequence[int]) -> SampleSet:
    """The chosen series, without building one object per sample.

    Each series' samples are one contiguous slice: joining the slices copies
    them once, half the time of gathering them by a position per sample.
    The arrays are read-only (the set is shared by every later query).
    """
    index = np.asarray(chosen, dtype=np.int64)
    starts, ends = samples.offsets[index], samples.offsets[index + 1]
    offsets = np.concatenate(([0], np.cumsum(ends - starts))).astype(np.int64)
    spans = [slice(a, b) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    t_ms = np.concatenate([samples.t_ms[one] for one in spans]) if spans else samples.t_ms[:0]
    values = np.concatenate([samples.values[one] for one in spans]) if spans else samples.values[:0]
    for array in (offsets, t_ms, values):
        array.flags.writeable = False
    return SampleSet(
        tuple(samples.names[i] for i in chosen),
        tuple(samples.labels[i] for i in chosen),
        offsets,
        t_ms,
        values,
    )
