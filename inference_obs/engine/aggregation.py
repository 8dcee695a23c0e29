"""Aggregation over instant vectors, as Prometheus defines it.

Aggregations group the series of a :class:`~inference_obs.samples.Vector` by
label values, one Python step per series (never per sample), and reduce with
numpy. The grouping of a label tuple is remembered (:func:`grouping`), so
evaluating the same aggregation again over the same series costs only the
numpy reduction.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from threading import Lock

import numpy as np

from inference_obs.errors import NotSupportedOffline
from inference_obs.samples import NAME, Floats, Ints, Labels, Vector

__all__ = [
    "IdentityCache",
    "aggregate",
    "aggregate_steps",
    "group_keys",
    "grouping",
    "without_name",
]

_NAME_ONLY = frozenset({NAME})
Grouping = tuple[Ints, tuple[Labels, ...]]


def without_name(labels: Labels) -> Labels:
    """The label set without ``__name__`` (functions and arithmetic drop it)."""
    return labels.drop(_NAME_ONLY) if NAME in labels else labels


def group_keys(
    labels: Sequence[Labels], key: Callable[[Labels], Labels]
) -> tuple[Ints, list[Labels]]:
    """Group index of each series under ``key``, and each group's labels (first-seen order)."""
    index: dict[Labels, int] = {}
    groups = np.empty(len(labels), dtype=np.int64)
    for i, one in enumerate(labels):
        groups[i] = index.setdefault(key(one), len(index))
    return groups, list(index)


class IdentityCache:
    """Results computed from a label tuple, found again by the tuple's identity.

    The engine hands the same tuple object on for the same series (a cached
    selection, all series present), so identity finds a repeat without
    hashing every label set. Each entry holds its tuple, so no other tuple can
    take its id while the entry exists; the oldest entries are dropped first.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._entries: OrderedDict[tuple[int, object], tuple[object, object]] = OrderedDict()
        self._lock = Lock()

    def get(self, labels: tuple[Labels, ...], key: object) -> object | None:
        with self._lock:
            entry = self._entries.get((id(labels), key))
            if entry is None or entry[0] is not labels:
                return None
            self._entries.move_to_end((id(labels), key))
            return entry[1]

    def put(self, labels: tuple[Labels, ...], key: object, value: object) -> None:
        with self._lock:
            self._entries[(id(labels), key)] = (labels, value)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)


#: Groupings of recently aggregated label tuples (per tuple, per ``by``/``without``).
GROUPINGS = IdentityCache(64)


def grouping(
    labels: tuple[Labels, ...],
    key: Callable[[Labels], Labels],
    name: object,
) -> Grouping:
    """:func:`group_keys` of ``labels`` under ``key``, remembered under ``name``.

    ``name`` must identify ``key``'s rule completely (e.g. ``("by", ("le",))``):
    the same tuple grouped under the same name gets the same arrays and the
    same group-label tuple back (callers must not modify them).
    """
    found = GROUPINGS.get(labels, name)
    if found is not None:
        return found  # type: ignore[return-value]
    groups, group_labels = group_keys(labels, key)
    groups.flags.writeable = False
    result: Grouping = (groups, tuple(group_labels))
    GROUPINGS.put(labels, name, result)
    return result


def _grouping(
    by: tuple[str, ...] | None, without: tuple[str, ...] | None
) -> Callable[[Labels], Labels]:
    if by is not None:
        return partial(Labels.keep, names=frozenset(by) - {NAME})
    if without is None:
        return lambda one: Labels()  # neither by nor without: one group of everything
    return partial(Labels.drop, names=frozenset(without) | {NAME})


def _per_group_sorted(values: Floats, groups: Ints) -> list[Floats]:
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(int(groups.max(initial=-1)) + 2))
    return [values[order[bounds[g] : bounds[g + 1]]] for g in range(len(bounds) - 1)]


def aggregate(
    op: str,
    vector: Vector,
    by: tuple[str, ...] | None,
    without: tuple[str, ...] | None,
    param: float | None = None,
) -> Vector:
    """Prometheus's aggregation operators over an instant vector.

    ``sum``, ``avg``, ``count``, ``min``, ``max``, ``group``, ``stddev``,
    ``stdvar`` and ``quantile`` return one series per group with the grouping
    labels; ``topk``/``bottomk`` keep the selected series' labels. ``min``
    and ``max`` ignore NaN unless every value is NaN (Prometheus replaces a
    NaN running value by any later value).
    """
    if not len(vector):
        return Vector((), np.zeros(0), vector.annotations)
    groups, group_labels = grouping(
        vector.labels, _grouping(by, without), ("aggregate", by, without)
    )
    n = len(group_labels)
    values = vector.values
    if op in ("topk", "bottomk"):
        return _top(op, vector, groups, n, param)
    result: Floats
    with np.errstate(invalid="ignore", divide="ignore"):
        count: Floats = np.bincount(groups, minlength=n).astype(np.float64)
        if op == "sum":
            # bincount adds in input order, as Prometheus 2.42's plain sum does.
            result = np.bincount(groups, weights=values, minlength=n).astype(np.float64)
        elif op == "count":
            result = count
        elif op == "group":
            result = np.ones(n)
        elif op == "avg":
            result = np.bincount(groups, weights=values, minlength=n) / count
        elif op in ("min", "max"):
            result = _extreme(op, values, groups, n)
        elif op in ("stddev", "stdvar"):
            mean = np.bincount(groups, weights=values, minlength=n) / count
            var = np.bincount(groups, weights=(values - mean[groups]) ** 2, minlength=n) / count
            result = np.sqrt(var) if op == "stddev" else var
        elif op == "quantile":
            assert param is not None
            result = np.array([_phi_quantile(param, g) for g in _per_group_sorted(values, groups)])
        else:
            raise NotSupportedOffline(f"aggregation {op!r} is not evaluated offline")
    return Vector(group_labels, result.astype(np.float64), vector.annotations)


#: Operators :func:`aggregate_steps` reduces over many steps in one pass.
_BATCHED = frozenset({"sum", "avg", "count", "group", "min", "max"})


def aggregate_steps(
    op: str,
    vectors: Sequence[Vector],
    by: tuple[str, ...] | None,
    without: tuple[str, ...] | None,
) -> list[Vector]:
    """:func:`aggregate` (without a parameter) of each vector, as over the steps of a range query.

    Consecutive vectors that hand on one label tuple (a selection whose
    series are all present) are reduced in one pass over a matrix of their
    values, for the operators in :data:`_BATCHED`; the results are the same
    bit for bit (``bincount`` adds each group's values in input order, one
    step after another).
    """
    out: list[Vector] = []
    k = 0
    while k < len(vectors):
        labels = vectors[k].labels
        end = k + 1
        while end < len(vectors) and vectors[end].labels is labels:
            end += 1
        if op in _BATCHED and end - k > 1 and labels:
            out += _aggregate_run(op, vectors[k:end], by, without)
        else:
            out += [aggregate(op, one, by, without) for one in vectors[k:end]]
        k = end
    return out


def _aggregate_run(
    op: str, run: Sequence[Vector], by: tuple[str, ...] | None, without: tuple[str, ...] | None
) -> list[Vector]:
    """:func:`aggregate` of vectors sharing one label tuple, as rows of one matrix."""
    groups, group_labels = grouping(
        run[0].labels, _grouping(by, without), ("aggregate", by, without)
    )
    n, steps = len(group_labels), len(run)
    values = np.stack([one.values for one in run])
    # Step j's groups are bins j * n .. j * n + n - 1: one bincount for all steps.
    bins = (groups[None, :] + n * np.arange(steps)[:, None]).ravel()
    result: Floats
    with np.errstate(invalid="ignore", divide="ignore"):
        count: Floats = np.bincount(groups, minlength=n).astype(np.float64)
        if op in ("sum", "avg"):
            sums = np.bincount(bins, weights=values.ravel(), minlength=steps * n)
            result = sums.reshape(steps, n) / (count if op == "avg" else 1.0)
        elif op == "count":
            result = np.tile(count, (steps, 1))
        elif op == "group":
            result = np.ones((steps, n))
        else:
            result = _extreme(op, values.ravel(), bins, steps * n).reshape(steps, n)
    rows = result.astype(np.float64)
    return [Vector(group_labels, rows[j], one.annotations) for j, one in enumerate(run)]


def _extreme(op: str, values: Floats, groups: Ints, n: int) -> Floats:
    fill = np.inf if op == "min" else -np.inf
    result = np.full(n, fill)
    finite = ~np.isnan(values)
    (np.minimum if op == "min" else np.maximum).at(result, groups[finite], values[finite])
    seen = np.bincount(groups[finite], minlength=n) > 0
    result[~seen] = np.nan  # only NaN values in the group
    return result


def _phi_quantile(q: float, values: Floats) -> float:
    # Prometheus quantile(): NaN for q outside [0, 1] becomes -Inf/+Inf; linear
    # interpolation between closest ranks, rank = q * (n - 1).
    if np.isnan(q):
        return float("nan")
    if q < 0:
        return float("-inf")
    if q > 1:
        return float("inf")
    ordered = np.sort(values)
    rank = q * (len(ordered) - 1)
    lower = int(np.floor(rank))
    upper = min(lower + 1, len(ordered) - 1)
    weight = rank - lower
    return float(ordered[lower] * (1 - weight) + ordered[upper] * weight)


def _top(op: str, vector: Vector, groups: Ints, n: int, param: float | None) -> Vector:
    k = int(param or 0)
    keep: list[int] = []
    for g in range(n):
        members = np.flatnonzero(groups == g)
        scores = vector.values[members]
        # NaN sorts last for both topk and bottomk, as in Prometheus.
        order = np.argsort(
            np.where(np.isnan(scores), np.inf, -scores if op == "topk" else scores), kind="stable"
        )
        keep.extend(members[order[:k]].tolist())
    return Vector(tuple(vector.labels[i] for i in keep), vector.values[keep], vector.annotations)
