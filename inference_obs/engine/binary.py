"""Binary operators between scalars and instant vectors, with Prometheus's vector matching.

Arithmetic and ``bool`` comparisons drop ``__name__``; a comparison without
``bool`` filters and keeps the left-hand labels. Vector-vector operations
match series on their label signature (``on``/``ignoring``); one-to-one
matching with duplicates on either side is an execution error, as on the
server.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import cast

import numpy as np
import numpy.typing as npt

from inference_obs.engine.aggregation import IdentityCache, without_name
from inference_obs.errors import Annotation, QueryFailed
from inference_obs.query import Matching
from inference_obs.samples import NAME, Floats, Ints, Labels, Vector

__all__ = ["binary"]

Value = Vector | float
#: A vector-vector operation's matching worked out once for its operands' label tuples:
#: the right-hand tuple (to check identity), the left and right indices, the result labels.
Plan = tuple[tuple[Labels, ...], Ints, Ints, tuple[Labels, ...]]
#: Matching plans of recent operations, by the operands' label tuples. Through a range
#: query the engine hands the same tuples on at every step, so the labels are matched
#: once per query instead of once per step; values are still computed at every step.
PLANS = IdentityCache(256)


def _pow(a: Floats, b: Floats) -> Floats:
    result: Floats = np.power(a, b)
    return result


def _mod(a: Floats, b: Floats) -> Floats:
    # Go's math.Mod: the result has the sign of the dividend (numpy's fmod).
    result: Floats = np.fmod(a, b)
    return result


_ARITHMETIC: dict[str, Callable[[Floats, Floats], Floats]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "%": _mod,
    "^": _pow,
    "atan2": np.arctan2,
}
_COMPARISON: dict[str, Callable[[Floats, Floats], npt.NDArray[np.bool_]]] = {
    "==": np.equal,
    "!=": np.not_equal,
    ">": np.greater,
    "<": np.less,
    ">=": np.greater_equal,
    "<=": np.less_equal,
}


def _apply(op: str, a: Floats, b: Floats, bool_: bool) -> tuple[Floats, npt.NDArray[np.bool_]]:
    """Values of ``a op b`` and which elements are kept."""
    with np.errstate(all="ignore"):
        if op in _ARITHMETIC:
            values = _ARITHMETIC[op](a, b).astype(np.float64)
            return values, np.ones(values.shape, dtype=bool)
        hit = _COMPARISON[op](a, b)
        if bool_:
            return hit.astype(np.float64), np.ones(hit.shape, dtype=bool)
        return a.astype(np.float64), hit


def _signature(matching: Matching | None) -> Callable[[Labels], Labels]:
    if matching is not None and matching.kind == "on":
        return partial(Labels.keep, names=frozenset(matching.labels))
    return partial(Labels.drop, names=frozenset(matching.labels if matching else ()) | {NAME})


def binary(op: str, lhs: Value, rhs: Value, *, bool_: bool, matching: Matching | None) -> Value:
    """Evaluate ``lhs op rhs`` for scalars and instant vectors."""
    if not isinstance(lhs, Vector) and not isinstance(rhs, Vector):
        values, _ = _apply(op, np.array([lhs]), np.array([rhs]), bool_)
        return float(values[0])
    if isinstance(lhs, Vector) and isinstance(rhs, Vector):
        if op in ("and", "or", "unless"):
            return _set_operation(op, lhs, rhs, matching)
        return _vector_vector(op, lhs, rhs, bool_, matching)
    vector = lhs if isinstance(lhs, Vector) else rhs
    assert isinstance(vector, Vector)
    scalar = np.full(len(vector), float(rhs if isinstance(lhs, Vector) else lhs))  # type: ignore[arg-type]
    a, b = (vector.values, scalar) if isinstance(lhs, Vector) else (scalar, vector.values)
    values, keep = _apply(op, a, b, bool_)
    if op in _COMPARISON and not bool_:
        values = vector.values  # a filter keeps the vector's own value
        labels = vector.labels
    else:
        labels = _unnamed(vector.labels)
    return _kept(labels, values, keep, vector.annotations)


def _unnamed(labels: tuple[Labels, ...]) -> tuple[Labels, ...]:
    """``labels`` without ``__name__``, the same tuple for the same input tuple."""
    found = PLANS.get(labels, "unnamed")
    if found is None:
        found = tuple(without_name(one) for one in labels)
        PLANS.put(labels, "unnamed", found)
    return found  # type: ignore[return-value]


def _kept(
    labels: tuple[Labels, ...],
    values: Floats,
    keep: npt.NDArray[np.bool_],
    notes: tuple[Annotation, ...],
) -> Vector:
    """The elements ``keep`` marks; all of them keep the labels tuple itself (and its plans)."""
    if keep.all():
        return Vector(labels, values, notes)
    kept = np.flatnonzero(keep)
    return Vector(tuple(labels[i] for i in kept), values[kept], notes)


def _planned(lhs: Vector, rhs: Vector, rule: object, make: Callable[[], Plan]) -> Plan:
    """The plan of ``lhs`` and ``rhs`` under ``rule``: made once per pair of label tuples."""
    key = (id(rhs.labels), rule)
    found = cast(Plan | None, PLANS.get(lhs.labels, key))
    if found is None or found[0] is not rhs.labels:  # the id of a tuple since dropped
        found = make()
        PLANS.put(lhs.labels, key, found)
    return found


def _vector_vector(
    op: str, lhs: Vector, rhs: Vector, bool_: bool, matching: Matching | None
) -> Vector:
    filtering = op in _COMPARISON and not bool_
    _, l_idx, r_idx, labels = _planned(
        lhs, rhs, ("match", filtering, matching), lambda: _plan(lhs, rhs, filtering, matching)
    )
    values, keep = _apply(op, lhs.values[l_idx], rhs.values[r_idx], bool_)
    return _kept(labels, values, keep, lhs.annotations + rhs.annotations)


def _plan(lhs: Vector, rhs: Vector, filtering: bool, matching: Matching | None) -> Plan:
    """Which left and right elements pair up, and the labels of each pair's result."""
    signature = _signature(matching)
    group = matching.group if matching is not None else None
    one, many = (lhs, rhs) if group == "right" else (rhs, lhs)
    one_keys = [signature(labels) for labels in one.labels]
    index: dict[Labels, int] = {}
    for i, key in enumerate(one_keys):
        if key in index:
            side = "left" if one is lhs else "right"
            raise QueryFailed(
                f"found duplicate series for the match group {dict(key)} on the {side} hand-side "
                "of the operation: many-to-many matching not allowed",
                error_type="execution",
            )
        index[key] = i
    pairs = [
        (m, index[signature(labels)])
        for m, labels in enumerate(many.labels)
        if signature(labels) in index
    ]
    if group is None:
        seen: set[Labels] = set()
        for m, _ in pairs:
            key = signature(many.labels[m])
            if key in seen:
                raise QueryFailed(
                    f"multiple matches for labels {dict(key)}: many-to-one matching must be "
                    "explicit (group_left/group_right)",
                    error_type="execution",
                )
            seen.add(key)
    m_idx = np.array([m for m, _ in pairs], dtype=np.int64)
    o_idx = np.array([o for _, o in pairs], dtype=np.int64)
    l_idx, r_idx = (m_idx, o_idx) if many is lhs else (o_idx, m_idx)
    labels = tuple(
        _result_labels(filtering, matching, many.labels[m], one.labels[o]) for m, o in pairs
    )
    l_idx.flags.writeable = r_idx.flags.writeable = False
    return rhs.labels, l_idx, r_idx, labels


def _result_labels(filtering: bool, matching: Matching | None, many: Labels, one: Labels) -> Labels:
    result = dict(many) if filtering else dict(without_name(many))
    if matching is None or matching.group is None:
        if matching is not None and matching.kind == "on":
            result = {k: v for k, v in result.items() if k in matching.labels}
        elif matching is not None:
            result = {k: v for k, v in result.items() if k not in matching.labels}
        return Labels(result)
    for label in matching.include:
        if label in one:
            result[label] = one[label]
        else:
            result.pop(label, None)
    return Labels(result)


def _set_operation(op: str, lhs: Vector, rhs: Vector, matching: Matching | None) -> Vector:
    _, left, right, labels = _planned(
        lhs, rhs, ("set", op, matching), lambda: (rhs.labels, *_set_plan(op, lhs, rhs, matching))
    )
    if op == "or":
        values = np.concatenate((lhs.values, rhs.values[right]))
        return Vector(labels, values, lhs.annotations + rhs.annotations)
    return Vector(labels, lhs.values[left], lhs.annotations)


def _set_plan(
    op: str, lhs: Vector, rhs: Vector, matching: Matching | None
) -> tuple[Ints, Ints, tuple[Labels, ...]]:
    """The left elements kept, the right ones added (``or``), and the result's labels."""
    signature = _signature(matching)
    none = np.zeros(0, dtype=np.int64)
    right_keys = {signature(labels) for labels in rhs.labels}
    if op == "or":
        left_keys = {signature(labels) for labels in lhs.labels}
        extra = [i for i, labels in enumerate(rhs.labels) if signature(labels) not in left_keys]
        return (
            none,
            np.array(extra, dtype=np.int64),
            lhs.labels + tuple(rhs.labels[i] for i in extra),
        )
    wanted = op == "and"
    keep = [i for i, labels in enumerate(lhs.labels) if (signature(labels) in right_keys) is wanted]
    labels = lhs.labels if len(keep) == len(lhs.labels) else tuple(lhs.labels[i] for i in keep)
    return np.array(keep, dtype=np.int64), none, labels
