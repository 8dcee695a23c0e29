"""Classic-bucket histogram maths: quantiles, their bucket bounds, fractions.

Inputs are flat arrays with one row per bucket sample: its upper bound
(parsed ``le``, see :func:`parse_le`), its cumulative count and the index of
its group (the series' labels without ``le``). Results hold one value per
group. ``histogram_quantile`` and ``histogram_fraction`` follow Prometheus
(``bucketQuantile`` and ``BucketFraction`` in ``promql/quantile.go``; see
``shared/reference/promql-semantics.md`` sections 6 and 7); the bucket tables
are built and repaired in :mod:`~inference_obs.engine.buckets`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from inference_obs.engine.buckets import BucketTable, bucket_table, monotonic_242, monotonic_249
from inference_obs.engine.result import Evaluation
from inference_obs.engine.rules import Rules
from inference_obs.errors import Annotation, NotSupportedOffline
from inference_obs.samples import Floats, Ints

__all__ = [
    "fraction_below",
    "histogram_fraction",
    "histogram_quantile",
    "parse_le",
    "quantile_bounds",
    "quantile_bounds_with_unseen",
]

# Go's strconv.ParseFloat syntax (no digit separators): decimal with optional
# exponent, hexadecimal with a mandatory binary exponent, and the specials.
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+")
_INFINITY = re.compile(r"[+-]?(?:inf|infinity)", re.IGNORECASE)
_NAN = re.compile(r"nan", re.IGNORECASE)


def _parse_one(text: str) -> float:
    if _INFINITY.fullmatch(text):
        return -np.inf if text.startswith("-") else np.inf
    if _NAN.fullmatch(text):
        return np.nan
    if _HEX.fullmatch(text):
        return float.fromhex(text)
    if _DECIMAL.fullmatch(text):
        value = float(text)
        # Go reports a range error for literals beyond the float64 range;
        # Prometheus then ignores the sample.
        return np.nan if np.isinf(value) else value
    return np.nan


def parse_le(values: Sequence[str]) -> Floats:
    """Bucket upper bounds from ``le`` label values, as Go's ``strconv.ParseFloat`` reads them.

    ``"1"``, ``"1.0"``, ``"1e0"``, ``".2"``, ``"+Inf"``, ``"+inf"``, ``"Infinity"``
    and hexadecimal floats parse. Missing (empty) or unparsable values, and
    ``"NaN"`` itself, give NaN, meaning "ignore this sample": a NaN bound
    cannot be placed among the buckets (Prometheus keeps such a bucket, but
    its position after sorting is undefined).

    Parameters
    ----------
    values
        ``le`` label values, ``""`` where the label is missing.

    Returns
    -------
    numpy.ndarray
        float64 upper bounds.

    Examples
    --------
    >>> parse_le(["1", "1e0", ".2", "+inf", "-Inf", "Hello World", ""]).tolist()
    [1.0, 1.0, 0.2, inf, -inf, nan, nan]
    """
    cache: dict[str, float] = {}
    out = np.empty(len(values), dtype=np.float64)
    for i, text in enumerate(values):
        if text not in cache:
            cache[text] = _parse_one(text)
        out[i] = cache[text]
    return out


def _not_offline(function: str, rules: Rules) -> None:
    if rules is Rules.VICTORIAMETRICS:
        raise NotSupportedOffline(
            f"{function} under VictoriaMetrics rules: MetricsQL repairs and interpolates "
            "classic buckets differently and the local engine has no model of it"
        )


def _bucket_index(table: BucketTable, rank: Floats) -> Ints:
    """First bucket (among all but the +Inf one) whose count reaches ``rank``, else the +Inf one."""
    columns = np.arange(table.upper.shape[1])
    below_last = columns[None, :] < (table.sizes - 1)[:, None]
    with np.errstate(invalid="ignore"):
        reached = below_last & (table.counts >= rank[:, None])
    index: Ints = np.where(reached.any(axis=1), reached.argmax(axis=1), table.sizes - 1)
    return index


def histogram_quantile(
    q: float, upper: Floats, counts: Floats, groups: Ints, n_groups: int, *, rules: Rules
) -> Evaluation:
    """The ``q``-quantile of each group's classic histogram (Prometheus ``histogram_quantile``).

    Per group, in Prometheus's order: ``q`` NaN gives NaN, below 0 ``-Inf``,
    above 1 ``+Inf`` (before any check of the buckets); buckets are sorted and
    equal bounds merged by adding; no ``+Inf`` bucket gives NaN; counts are made
    non-decreasing (``Rules.PROMETHEUS_2``: running maximum, 2.42;
    ``Rules.PROMETHEUS_3``: the 2.49+ walk that also ignores 1e-12 noise);
    fewer than two buckets give NaN; a total of 0 gives NaN. Otherwise, with
    ``rank = q * total`` and ``b`` the first bucket whose count reaches it: in
    the ``+Inf`` bucket the result is the highest finite bound; in a first
    bucket whose bound is <= 0 it is that bound; else linear interpolation
    within the bucket, the first bucket starting at 0.

    Parameters
    ----------
    q
        The quantile, 0 to 1.
    upper
        Each bucket sample's upper bound (:func:`parse_le`; NaN rows are ignored).
    counts
        Each bucket sample's cumulative count (or rate of it).
    groups
        Each bucket sample's group index.
    n_groups
        Number of groups.
    rules
        ``PROMETHEUS_2`` or ``PROMETHEUS_3``.

    Returns
    -------
    Evaluation
        One value per group, in the unit of the bounds; present for every
        group with at least one bucket (NaN where Prometheus returns NaN).
        Annotated (``monotonicity_forced``) with the groups whose counts had
        to be raised; Prometheus 2.48+ reports the same as info.

    Raises
    ------
    NotSupportedOffline
        Under ``Rules.VICTORIAMETRICS``.

    Examples
    --------
    >>> up = parse_le(["0.1", "0.2", "+Inf"])
    >>> histogram_quantile(0.5, up, np.array([10.0, 30.0, 40.0]), np.zeros(3, np.int64), 1,
    ...                    rules=Rules.PROMETHEUS_3).values.tolist()
    [0.15000000000000002]
    """
    _not_offline("histogram_quantile", rules)
    table = bucket_table(upper, counts, groups, n_groups)
    repair = monotonic_242 if rules is Rules.PROMETHEUS_2 else monotonic_249
    table, forced = repair(table)
    present = table.sizes > 0
    rank = q * table.total
    b = _bucket_index(table, rank)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        bound = table.column(table.upper, b)
        count = table.column(table.counts, b)
        start = np.where(b == 0, 0.0, table.column(table.upper, b - 1))
        below = np.where(b == 0, 0.0, table.column(table.counts, b - 1))
        # Linear interpolation within the bucket; the lowest bucket starts at 0.
        # The fraction of the bucket comes first, so that a rank at the top of
        # a bucket gives exactly its bound.
        out = start + (bound - start) * ((rank - below) / (count - below))
    # A lowest bucket with a bound <= 0 cannot interpolate from 0: its bound.
    out = np.where((b == 0) & (table.upper[:, 0] <= 0), table.upper[:, 0], out)
    # The quantile falls in the +Inf bucket: the highest finite bound.
    out = np.where(b == table.sizes - 1, table.column(table.upper, table.sizes - 2), out)
    # A total of 0 (no observations) has no quantile.
    out = np.where(table.total == 0, np.nan, out)
    # Fewer than two buckets (after merging) cannot be interpolated.
    out = np.where(table.sizes < 2, np.nan, out)
    # Without a +Inf bucket the total is unknown.
    out = np.where(table.has_inf, out, np.nan)
    # The checks of q come first of all.
    if np.isnan(q):
        out = np.full(n_groups, np.nan)
    elif q < 0:
        out = np.full(n_groups, -np.inf)
    elif q > 1:
        out = np.full(n_groups, np.inf)
    out = np.where(present, out, np.nan)
    annotations: tuple[Annotation, ...] = ()
    forced &= present & table.has_inf
    if forced.any():
        which = np.flatnonzero(forced).tolist()
        annotations = (
            Annotation(
                "monotonicity_forced",
                f"histogram_quantile: bucket counts decreased with the bound in {len(which)} "
                f"group(s) {which} and were raised to stay non-decreasing",
            ),
        )
    return Evaluation(out, present, annotations)


def quantile_bounds(
    q: float, upper: Floats, counts: Floats, groups: Ints, n_groups: int
) -> tuple[Floats, Floats]:
    """The bucket edges between which each group's true ``q``-quantile lies.

    Buckets are prepared as in :func:`histogram_quantile` with the 2.49+
    monotonicity repair. The quantile lies in the first bucket whose count
    reaches ``q * total`` (for ``q = 0``, the first non-empty bucket): the
    bounds are that bucket's edges. The lowest bucket starts at 0 when its
    bound is positive (Prometheus's own assumption: observations are not
    negative) and at ``-Inf`` otherwise; the ``+Inf`` bucket gives
    (highest finite bound, ``+Inf``). ``q`` below 0 gives (``-Inf``, ``-Inf``),
    above 1 (``+Inf``, ``+Inf``), matching :func:`histogram_quantile`'s
    value; NaN ``q`` and groups without a quantile (no ``+Inf`` bucket, fewer
    than two buckets, total 0, no buckets) give (NaN, NaN). For ``q > 0``,
    :func:`histogram_quantile` (under ``PROMETHEUS_3``) lies within these
    bounds whenever it is not NaN; for ``q = 0`` Prometheus reports the
    lowest bucket even when it is empty, while these bounds give the bucket
    that holds the smallest observation.

    Parameters
    ----------
    q
        The quantile, 0 to 1.
    upper, counts, groups, n_groups
        As for :func:`histogram_quantile`.

    Returns
    -------
    tuple of numpy.ndarray
        Lower and upper edges per group, in the unit of the bounds.

    Examples
    --------
    >>> up = parse_le(["0.1", "0.2", "+Inf"])
    >>> lo, hi = quantile_bounds(0.5, up, np.array([10.0, 30.0, 40.0]), np.zeros(3, np.int64), 1)
    >>> lo.tolist(), hi.tolist()
    ([0.1], [0.2])
    """
    table, _ = monotonic_249(bucket_table(upper, counts, groups, n_groups))
    total = table.total
    rank = q * total
    columns = np.arange(table.upper.shape[1])
    below_last = columns[None, :] < (table.sizes - 1)[:, None]
    with np.errstate(invalid="ignore"):
        # q = 0: the minimum lies in the first bucket holding any observation.
        reached = np.where((rank > 0)[:, None], table.counts >= rank[:, None], table.counts > 0)
    reached &= below_last
    b = np.where(reached.any(axis=1), reached.argmax(axis=1), table.sizes - 1)
    first = np.where(table.upper[:, 0] > 0, 0.0, -np.inf)
    low = np.where(b == 0, first, table.column(table.upper, b - 1))
    high = table.column(table.upper, b)
    valid = table.has_inf & (table.sizes >= 2) & (total != 0) & ~np.isnan(total)
    low, high = np.where(valid, low, np.nan), np.where(valid, high, np.nan)
    if np.isnan(q):
        return np.full(n_groups, np.nan), np.full(n_groups, np.nan)
    if q < 0 or q > 1:
        edge = np.where(table.sizes > 0, -np.inf if q < 0 else np.inf, np.nan)
        return edge, edge.copy()
    return low, high


def fraction_below(
    threshold: float, upper: Floats, counts: Floats, groups: Ints, n_groups: int
) -> tuple[Floats, Floats]:
    """The share of each group's observations at or below ``threshold``, as an interval.

    Buckets are prepared with the 2.49+ monotonicity repair. When
    ``threshold`` is a bucket bound the share is exact (``low == high``:
    that bucket's count over the total). Otherwise it lies between the shares
    at the bounds below and above ``threshold``. As in
    :func:`histogram_quantile`, a lowest bucket with a positive bound is taken
    to hold observations from 0, so a negative threshold below it gives
    (0, 0). Groups without a ``+Inf`` bucket, with a total of 0 or without
    buckets, and a NaN threshold, give (NaN, NaN).

    Parameters
    ----------
    threshold
        The bound, in the unit of the bucket bounds.
    upper, counts, groups, n_groups
        As for :func:`histogram_quantile`.

    Returns
    -------
    tuple of numpy.ndarray
        Lowest and highest possible share per group, 0 to 1.

    Examples
    --------
    >>> up = parse_le(["0.1", "0.2", "+Inf"])
    >>> low, high = fraction_below(0.15, up, np.array([10.0, 30.0, 40.0]), np.zeros(3, np.int64), 1)
    >>> low.tolist(), high.tolist()
    ([0.25], [0.75])
    """
    table, _ = monotonic_249(bucket_table(upper, counts, groups, n_groups))
    total = table.total
    valid = table.has_inf & (total != 0) & ~np.isnan(total) & ~np.isnan(threshold)
    cells = table.valid
    with np.errstate(invalid="ignore"):
        on_edge = cells & (table.upper == threshold)
        above = cells & (table.upper > threshold)
    exact = on_edge.any(axis=1)
    edge = on_edge.argmax(axis=1)
    next_up = above.argmax(axis=1)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        high = np.where(
            exact, table.column(table.counts, edge), table.column(table.counts, next_up)
        )
        low = np.where(next_up == 0, 0.0, table.column(table.counts, next_up - 1))
        low = np.where(exact, high, low)
        # Below the lowest bucket's range (which starts at 0 for a positive bound).
        negative = ~exact & (next_up == 0) & (table.upper[:, 0] > 0) & (threshold < 0)
        high = np.where(negative, 0.0, high)
        low, high = low / total, high / total
    return np.where(valid, low, np.nan), np.where(valid, high, np.nan)


def _rank_at(x: float, table: BucketTable) -> Floats:
    """Prometheus 3.4+ ``BucketFraction`` helper: the cumulative count at ``x``, interpolated."""
    counts, upper = table.counts, table.upper
    # Each bucket's lower bound: the previous bound; the lowest bucket starts
    # at 0 if its bound is positive, else at -Inf.
    lower = np.empty_like(upper)
    lower[:, 0] = np.where(upper[:, 0] > 0, 0.0, -np.inf)
    lower[:, 1:] = upper[:, :-1]
    before = np.zeros_like(counts)
    before[:, 1:] = counts[:, :-1]
    with np.errstate(invalid="ignore"):
        at_lower = lower >= x
        inside = (lower < x) & (x < upper)
    hit = table.valid & (at_lower | inside)
    found = hit.any(axis=1)
    j = hit.argmax(axis=1)
    lb, ub = table.column(lower, j), table.column(upper, j)
    count, previous = table.column(counts, j), table.column(before, j)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # Inside a bucket: linear interpolation between the cumulative counts
        # at its edges (0 of the way inside the +Inf bucket) ...
        rank = previous + (count - previous) * ((x - lb) / (ub - lb))
    # ... except in a bucket reaching down to -Inf, which counts in full;
    rank = np.where(lb == -np.inf, count, rank)
    # at or below a bucket's lower edge, the count before that bucket;
    rank = np.where(table.column(lower, j) >= x, previous, rank)
    # beyond every bucket, the total. Never above the total.
    rank = np.where(found, rank, table.total)
    return np.minimum(rank, table.total)


def histogram_fraction(
    lower: float,
    upper_bound: float,
    upper: Floats,
    counts: Floats,
    groups: Ints,
    n_groups: int,
    *,
    rules: Rules,
) -> Evaluation:
    """The estimated share of each group's observations between two values.

    ``Rules.PROMETHEUS_2``: Prometheus 2.42 computes ``histogram_fraction``
    only for native histograms and skips classic buckets, so no group is
    present (annotated ``empty_by_rules``). ``Rules.PROMETHEUS_3`` follows
    Prometheus 3.4+ on classic buckets: sorted and merged (no monotonicity
    repair), NaN without a ``+Inf`` bucket, with a total of 0 or a NaN
    bound, 0 when ``lower >= upper_bound``, else (count at ``upper_bound`` -
    count at ``lower``) / total, the counts interpolated linearly within
    buckets (the lowest bucket starting at 0 for a positive bound, at
    ``-Inf`` otherwise).

    Parameters
    ----------
    lower, upper_bound
        The interval of observed values, in the unit of the bucket bounds.
    upper, counts, groups, n_groups
        As for :func:`histogram_quantile`.
    rules
        ``PROMETHEUS_2`` or ``PROMETHEUS_3``.

    Returns
    -------
    Evaluation
        One share (0 to 1) per group with at least one bucket.

    Raises
    ------
    NotSupportedOffline
        Under ``Rules.VICTORIAMETRICS`` (MetricsQL 1.79 has no such function).
    """
    _not_offline("histogram_fraction", rules)
    if rules is Rules.PROMETHEUS_2:
        note = Annotation(
            "empty_by_rules",
            "histogram_fraction: Prometheus 2.42 ignores classic buckets; the result is empty",
        )
        return Evaluation(np.full(n_groups, np.nan), np.zeros(n_groups, dtype=bool), (note,))
    table = bucket_table(upper, counts, groups, n_groups)
    present = table.sizes > 0
    total = table.total
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        out = (_rank_at(upper_bound, table) - _rank_at(lower, table)) / total
    # An empty interval holds nothing.
    if lower >= upper_bound:
        out = np.zeros(n_groups)
    # NaN bounds, or no observations, have no fraction.
    if np.isnan(lower) or np.isnan(upper_bound):
        out = np.full(n_groups, np.nan)
    out = np.where(total == 0, np.nan, out)
    # Without a +Inf bucket the total is unknown.
    out = np.where(table.has_inf, out, np.nan)
    return Evaluation(np.where(present, out, np.nan), present)


def quantile_bounds_with_unseen(
    q: float, upper: Floats, counts: Floats, unseen: float
) -> tuple[float, float]:
    """The bucket edges that hold the ``q``-quantile however ``unseen`` more observations fall.

    ``counts`` are one histogram's cumulative counts (one group); up to
    ``unseen`` observations that the counts do not hold may lie anywhere.
    Added all below the lowest bound they move the quantile's rank down
    the furthest, added all above the highest finite bound up the
    furthest; every other placement lies between, so the quantile lies
    from the lower edge of the first case's bucket to the upper edge of
    the second's. With ``unseen`` 0 this is :func:`quantile_bounds`.

    Parameters
    ----------
    q
        The quantile, 0 to 1.
    upper, counts
        Bucket upper bounds (ascending, ``+Inf`` last) and cumulative counts.
    unseen
        How many observations the counts may lack, >= 0.

    Returns
    -------
    tuple of float
        Lower and upper edge, in the unit of the bounds (NaN as
        :func:`quantile_bounds` gives it).

    Examples
    --------
    >>> up = parse_le(["10", "20", "40", "80", "+Inf"])
    >>> counts = np.array([50.0, 90.0, 99.0, 100.0, 100.0])
    >>> quantile_bounds_with_unseen(0.99, up, counts, 0)
    (20.0, 40.0)
    >>> quantile_bounds_with_unseen(0.99, up, counts, 1)  # one more above 80: P99 in (40, 80]
    (20.0, 80.0)
    """
    one = np.zeros(upper.size, np.int64)
    below, _ = quantile_bounds(q, upper, counts + unseen, one, 1)
    above = counts.copy()
    if above.size:
        above[-1] += unseen
    _, high = quantile_bounds(q, upper, above, one, 1)
    return float(below[0]), float(high[0])
