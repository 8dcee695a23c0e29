"""Exact total changes of counter pairs, for many ratios in a fixed number of requests.

What :mod:`~inference_obs.reading.counter_ratios` divides: per ``by`` group,
the total change of a numerator's series and of a denominator's, each
series from its first to its last sample in the window (see there why).
A series without a reset only grows, so its change is ``max_over_time -
min_over_time``, summed by the source; a restarted series is worked out by
:mod:`~inference_obs.reading.counter_resets`. Every range holds the sample
exactly at the window's start, on every engine
(:func:`~inference_obs.reading.counter_resets.closed_range`).

However many ratios an analysis asks for at once, :func:`totals` makes two
requests, asked together: one query (:func:`~inference_obs.reading.joined.vectors`)
holding, for every ratio, which series reset, both sides' sums as if none
did (what a window without restarts, the usual case, needs) and the
extrapolated recheck ratio; and one series request for every side, which
selects what all sides share, of any of their names, each side's series
then picked from the answer by its own selector. Only a restart asks more:
the cleaned sums of that ratio and the stretches around its drops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import partial
from typing import cast

from inference_obs.engine.rules import Rules
from inference_obs.errors import QueryError
from inference_obs.query import (
    Binary,
    Expr,
    Matcher,
    Matching,
    Number,
    Selector,
    ValueType,
    ignoring,
    max_over_time,
    min_over_time,
    to_promql,
)
from inference_obs.reading.counter_resets import (
    closed_range,
    counted_resets,
    narrowed,
    reset_changes,
)
from inference_obs.reading.joined import in_process, vectors
from inference_obs.reading.schedule import soon, together
from inference_obs.samples import NAME, Labels, Vector, Window
from inference_obs.source.base import Source

__all__ = ["Pair", "Pairing", "Totals", "series_of", "totals"]


class Pairing(Enum):
    """How the series of a ratio's numerator meet those of its denominator."""

    #: Each series of one side has a partner in the other with the same labels
    #: but the ``ignoring`` ones (a bucket over the count, ``le`` ignored); a
    #: series without one is left out, and named.
    MATCHED = "matched"
    #: The sides' totals are divided as they are: a part over a whole (one
    #: finish reason over all), whose series have no partners to find.
    PART_OF_WHOLE = "part_of_whole"


@dataclass(frozen=True, slots=True)
class Pair:
    """The two counter sides of one ratio, how their series pair, and its recheck query.

    ``pairing`` says whether each series needs a partner (see
    :class:`Pairing`); ``by`` groups the totals; ``check`` is the
    extrapolated PromQL ratio, grouped alike.
    """

    numerator: Selector
    denominator: Selector
    ignoring: frozenset[str]
    pairing: Pairing
    by: tuple[str, ...]
    check: Expr


@dataclass(frozen=True, slots=True)
class Totals:
    """Total changes per group (``by`` labels -> (numerator, denominator)), and the pairing."""

    groups: dict[Labels, tuple[float, float]]
    #: Groups where the denominator has at least one (paired) series.
    present: frozenset[Labels]
    unpaired: tuple[Labels, ...]
    #: The extrapolated PromQL ratio per group, for the record.
    check: dict[Labels, float]


def _key(labels: Labels, drop: frozenset[str]) -> Labels:
    return Labels((k, v) for k, v in labels.items() if k not in drop and k != NAME)


def _keyed(
    labels: Sequence[Labels], ignoring_: frozenset[str], selector: Selector
) -> dict[Labels, Labels]:
    """Each series' key (labels less ``ignoring_``) mapped to its label set; collisions refused.

    Two series of ``selector`` with one key would make the pairing ambiguous,
    as PromQL's one-to-one matching refuses duplicate series in a match group.
    """
    keyed: dict[Labels, Labels] = {}
    for one in labels:
        key = _key(one, ignoring_)
        if key in keyed:
            raise QueryError(
                f"{to_promql(selector)}: series {dict(keyed[key])} and {dict(one)} are not told "
                f"apart once {sorted(ignoring_)} are ignored; ignore fewer labels, or select "
                "fewer series"
            )
        keyed[key] = one
    return keyed


def _changes(selector: Selector, seconds: float, rules: Rules) -> Expr:
    """Per series, ``max_over_time - min_over_time``: the exact change where nothing reset."""
    window = closed_range(selector, seconds, rules)
    return max_over_time(window) - min_over_time(window)


def _did_reset(selector: Selector, seconds: float, rules: Rules) -> Expr:
    return Binary(">", counted_resets(selector, seconds, rules), Number(0))


def _selects(selector: Selector, labels: Labels) -> bool:
    """Whether ``selector`` selects the series of ``labels`` (``__name__`` included)."""
    name = labels.get(NAME, "")
    if selector.metric is not None and name != selector.metric:
        return False
    return all(
        m.matches(name if m.label == NAME else labels.get(m.label, "")) for m in selector.matchers
    )


def series_of(
    source: Source, selectors: Sequence[Selector], window: Window
) -> list[tuple[Labels, ...]]:
    """Each selector's series in ``window``, from one request where they all have a name
    (each asked alone from an engine in this process).

    The request selects the matchers every selector has, of any of their
    names; each selector's series are picked from the answer by its own
    matchers. Both sides of a ratio (a bucket and ``+Inf``, ``_sum`` and
    ``_count``, one finish reason and all), and every ratio of an analysis,
    are one request.
    """
    distinct = list(dict.fromkeys(selectors))
    unnamed = any(s.metric is None or (s.offset, s.at) != (None, None) for s in distinct)
    if unnamed or in_process(source):  # an engine in this process saves no round trip
        found = together([partial(source.series, s, window) for s in distinct])
        by_selector = dict(zip(distinct, found, strict=True))
        return [by_selector[s] for s in selectors]
    common = tuple(m for m in distinct[0].matchers if all(m in s.matchers for s in distinct))
    names = sorted({cast(str, s.metric) for s in distinct})
    if len(names) == 1:
        broad = Selector(names[0], common)
    else:
        broad = Selector(None, (Matcher.one_of(NAME, names), *common))
    found_all = source.series(broad, window)
    return [tuple(labels for labels in found_all if _selects(s, labels)) for s in selectors]


@dataclass(frozen=True, slots=True)
class _Plan:
    """One pair's change expressions."""

    pair: Pair
    top: Expr
    bottom: Expr
    reset: Expr
    unless: Matching | None

    @classmethod
    def of(cls, pair: Pair, seconds: float, rules: Rules) -> _Plan:
        """The expressions of ``pair`` over ``seconds``, as an engine of ``rules`` needs them."""
        match = ignoring(*pair.ignoring) if pair.ignoring else None
        top = _changes(pair.numerator, seconds, rules)
        bottom = _changes(pair.denominator, seconds, rules)
        if pair.pairing is Pairing.MATCHED:
            top, bottom = (
                Binary("and", top, bottom, matching=match),
                Binary("and", bottom, top, matching=match),
            )
        reset = Binary(
            "or",
            _did_reset(pair.numerator, seconds, rules),
            _did_reset(pair.denominator, seconds, rules),
        )
        matched = pair.pairing is Pairing.MATCHED
        unless = ignoring(*pair.ignoring) if matched and pair.ignoring else None
        return cls(pair, top, bottom, reset, unless)

    def summed(self, change: Expr, restarted: bool) -> Expr:
        """``change`` summed ``by`` the pair's groups, without series that reset if asked."""
        clean = Binary("unless", change, self.reset, matching=self.unless) if restarted else change
        return clean.sum(by=self.pair.by) if self.pair.by else clean.sum()

    def questions(self) -> list[Expr]:
        """Which series reset, both sums as if none did, and the check where it is a vector."""
        asked = [self.reset, self.summed(self.top, False), self.summed(self.bottom, False)]
        return asked + ([self.pair.check] if self.pair.check.type is ValueType.VECTOR else [])


def totals(source: Source, window: Window, pairs: Sequence[Pair]) -> list[Totals]:
    """Exact total changes of every pair's sides per ``by`` group, and its check per group.

    Two requests, asked together, however many pairs (see the module); a
    pair where a series restarted asks its cleaned sums and its stretches.

    Raises
    ------
    QueryError
        When two series of one side have the same labels once the pair's
        ``ignoring`` labels are left out (the pairing would be ambiguous).
    """
    if not pairs:
        return []
    rules = source.info().rules
    plans = [_Plan.of(pair, window.seconds, rules) for pair in pairs]
    selectors = [s for pair in pairs for s in (pair.numerator, pair.denominator)]
    questions = [plan.questions() for plan in plans]
    flat = [expr for asked in questions for expr in asked]
    labelled = soon(partial(series_of, source, selectors, window))
    answered = soon(partial(vectors, source, flat, window.end_s))
    labels, answers = labelled.result(), answered.result()
    finishing = []
    start = 0
    for i, (plan, asked) in enumerate(zip(plans, questions, strict=True)):
        parts = answers[start : start + len(asked)]
        start += len(asked)
        sides = (labels[2 * i], labels[2 * i + 1])
        finishing.append(partial(_finish, source, window, plan, sides, parts))
    return together(finishing)


def _finish(
    source: Source,
    window: Window,
    plan: _Plan,
    labels: tuple[tuple[Labels, ...], tuple[Labels, ...]],
    parts: list[Vector],
) -> Totals:
    """One pair's totals from its series and its part of the joined answer."""
    pair = plan.pair
    reset_part, top_part, bottom_part = parts[:3]
    if len(parts) > 3:
        checked = parts[3].as_dict()
    else:  # a scalar check, asked alone
        checked = {Labels(()): float(cast(float, source.instant(pair.check, window.end_s).value))}
    top_labels, bottom_labels = labels
    unpaired: list[Labels] = []
    matched = pair.pairing is Pairing.MATCHED
    if matched:
        top_keys = _keyed(top_labels, pair.ignoring, pair.numerator)
        bottom_keys = _keyed(bottom_labels, pair.ignoring, pair.denominator)
        unpaired = sorted(set(top_keys) ^ set(bottom_keys), key=repr)
    # A pair where either side reset is worked out from its drops, both sides.
    restarted = reset_part.labels if top_labels or bottom_labels else ()
    drop = pair.ignoring if matched else frozenset()
    wanted = sorted({_key(one, drop) for one in restarted}, key=repr)
    sides: list[Vector] = [top_part, bottom_part]
    changed: list[dict[Labels, float]] = []
    if restarted:
        clean = [plan.summed(plan.top, True), plan.summed(plan.bottom, True)]
        cleaned = soon(partial(vectors, source, clean, window.end_s))
        changed = together(
            [
                partial(reset_changes, source, narrowed(selector, wanted), window)
                for selector in (pair.numerator, pair.denominator)
            ],
        )
        sides = cleaned.result()
    groups: dict[Labels, list[float]] = {}
    present: set[Labels] = set()
    for side, answer in enumerate(sides):
        for group, value in zip(answer.labels, answer.values.tolist(), strict=True):
            groups.setdefault(group, [0.0, 0.0])[side] += value
            present.update([group] if side else [])
    if restarted:
        keyed = [
            {_key(one, drop): (one, amount) for one, amount in side.items()} for side in changed
        ]
        both = set(keyed[0]) & set(keyed[1]) if matched else None
        for side, entries in enumerate(keyed):
            for key, (one, amount) in entries.items():
                if key in wanted and (both is None or key in both):
                    group = Labels((k, v) for k, v in one.items() if k in pair.by)
                    groups.setdefault(group, [0.0, 0.0])[side] += amount
                    present.update([group] if side else [])
    found = {g: (t, b) for g, (t, b) in groups.items()}
    return Totals(found, frozenset(present), tuple(unpaired), checked)
