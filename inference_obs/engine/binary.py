"""Binary operators between scalars and instant vectors, with Prometheus's vector matching.

Arithmetic and ``bool`` comparisons drop ``__name__``; a comparison without
``bool`` filters and keeps the left-hand labels. Vector-vector operations
match series on their label signature (``on``/``ignoring``); one-to-one
matching with duplicates on either side is an execution error, as on the
server.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from inference_obs.engine.vector import NAME, Vector, without_name
from inference_obs.errors import QueryFailed
from inference_obs.query import Matching
from inference_obs.samples import Labels

__all__ = ["binary"]

Floats = npt.NDArray[np.float64]
Value = Vector | float


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
        keep = frozenset(matching.labels)
        return lambda one: Labels((k, v) for k, v in one.items() if k in keep)
    drop = frozenset(matching.labels if matching is not None else ()) | {NAME}
    return lambda one: Labels((k, v) for k, v in one.items() if k not in drop)


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
    labels = (
        vector.labels
        if (op in _COMPARISON and not bool_)
        else tuple(without_name(one) for one in vector.labels)
    )
    kept = np.flatnonzero(keep)
    return Vector(tuple(labels[i] for i in kept), values[kept], vector.annotations)


def _vector_vector(
    op: str, lhs: Vector, rhs: Vector, bool_: bool, matching: Matching | None
) -> Vector:
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
    left, right = (many, one) if many is lhs else (one, many)
    l_idx, r_idx = (m_idx, o_idx) if many is lhs else (o_idx, m_idx)
    values, keep = _apply(op, left.values[l_idx], right.values[r_idx], bool_)
    labels = []
    for m, o in pairs:
        labels.append(_result_labels(op, bool_, matching, many.labels[m], one.labels[o]))
    kept = np.flatnonzero(keep)
    annotations = lhs.annotations + rhs.annotations
    return Vector(tuple(labels[i] for i in kept), values[kept], annotations)


def _result_labels(
    op: str, bool_: bool, matching: Matching | None, many: Labels, one: Labels
) -> Labels:
    filtering = op in _COMPARISON and not bool_
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
    signature = _signature(matching)
    right_keys = {signature(labels) for labels in rhs.labels}
    if op == "and":
        keep = [i for i, labels in enumerate(lhs.labels) if signature(labels) in right_keys]
    elif op == "unless":
        keep = [i for i, labels in enumerate(lhs.labels) if signature(labels) not in right_keys]
    else:
        left_keys = {signature(labels) for labels in lhs.labels}
        extra = [i for i, labels in enumerate(rhs.labels) if signature(labels) not in left_keys]
        labels = lhs.labels + tuple(rhs.labels[i] for i in extra)
        values = np.concatenate((lhs.values, rhs.values[extra]))
        return Vector(labels, values, lhs.annotations + rhs.annotations)
    return Vector(tuple(lhs.labels[i] for i in keep), lhs.values[keep], lhs.annotations)
