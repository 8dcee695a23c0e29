"""Exact total changes of counter pairs, for many ratios in one request.

What :mod:`~inference_obs.reading.counter_ratios` divides: per ``by`` group,
the total change of a numerator's series and of a denominator's, each
series from its first to its last sample in the window (see there why).
A series without a reset only grows, so its change is ``max_over_time -
min_over_time``, summed by the source; a restarted series is worked out by
:mod:`~inference_obs.reading.counter_resets`. Every range holds the sample
exactly at the window's start, on every engine
(:func:`~inference_obs.reading.counter_resets.closed_range`).

However many ratios an analysis asks for at once, :func:`totals` makes one
joined request (:func:`~inference_obs.reading.joined.vectors`; several at
once only past the length a query may have) holding, for every
ratio, which series reset, both sides' sums as if none did (what a window
without restarts, the usual case, needs), the extrapolated recheck ratio,
and the checks of the pairing, answered where the series are: the series
of one side without a partner in the other (``unless``), and the groups of
one side that the ignored labels would merge (``count without ... > 1``).
Those answers are empty in a healthy fleet, so the client never holds a
label set per series, however many replicas there are. Only a restart asks
more: the cleaned sums of that ratio and the stretches around its drops.
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
    reset_changes_of,
)
from inference_obs.reading.joined import vectors
from inference_obs.reading.schedule import soon, together
from inference_obs.samples import NAME, Labels, Vector, Window
from inference_obs.source.base import Source

__all__ = ["Pair", "Pairing", "Totals", "totals"]


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


def _changes(selector: Selector, seconds: float, rules: Rules) -> Expr:
    """Per series, ``max_over_time - min_over_time``: the exact change where nothing reset."""
    window = closed_range(selector, seconds, rules)
    return max_over_time(window) - min_over_time(window)


def _did_reset(selector: Selector, seconds: float, rules: Rules) -> Expr:
    return Binary(">", counted_resets(selector, seconds, rules), Number(0))


@dataclass(frozen=True, slots=True)
class _Plan:
    """One pair's change expressions, and the checks of its pairing."""

    pair: Pair
    top: Expr
    bottom: Expr
    reset: Expr
    unless: Matching | None
    #: Each side's series without a partner in the other (matched pairs only).
    unpaired: Expr | None
    #: Per side, the groups the ignored labels would merge (matched pairs ignoring some).
    merged: tuple[Expr, Expr] | None

    @classmethod
    def of(cls, pair: Pair, seconds: float, rules: Rules) -> _Plan:
        """The expressions of ``pair`` over ``seconds``, as an engine of ``rules`` needs them."""
        match = ignoring(*pair.ignoring) if pair.ignoring else None
        top = _changes(pair.numerator, seconds, rules)
        bottom = _changes(pair.denominator, seconds, rules)
        reset = Binary(
            "or",
            _did_reset(pair.numerator, seconds, rules),
            _did_reset(pair.denominator, seconds, rules),
        )
        if pair.pairing is not Pairing.MATCHED:
            return cls(pair, top, bottom, reset, None, None, None)
        unpaired = Binary(
            "or",
            Binary("unless", top, bottom, matching=match),
            Binary("unless", bottom, top, matching=match),
        )
        merged = None
        if pair.ignoring:
            without = tuple(sorted(pair.ignoring))
            merged = (
                Binary(">", top.count(without=without), Number(1)),
                Binary(">", bottom.count(without=without), Number(1)),
            )
        return cls(
            pair,
            Binary("and", top, bottom, matching=match),
            Binary("and", bottom, top, matching=match),
            reset,
            match,
            unpaired,
            merged,
        )

    def summed(self, change: Expr, restarted: bool) -> Expr:
        """``change`` summed ``by`` the pair's groups, without series that reset if asked."""
        clean = Binary("unless", change, self.reset, matching=self.unless) if restarted else change
        return clean.sum(by=self.pair.by) if self.pair.by else clean.sum()

    def questions(self) -> list[Expr]:
        """Which series reset, both sums as if none did, the pairing's checks, and the
        recheck query where it is a vector."""
        asked = [self.reset, self.summed(self.top, False), self.summed(self.bottom, False)]
        asked += [self.unpaired] if self.unpaired is not None else []
        asked += list(self.merged) if self.merged is not None else []
        return asked + ([self.pair.check] if self.pair.check.type is ValueType.VECTOR else [])


def totals(source: Source, window: Window, pairs: Sequence[Pair]) -> list[Totals]:
    """Exact total changes of every pair's sides per ``by`` group, and its check per group.

    One joined request however many pairs (see the module); a pair where a
    series restarted asks its cleaned sums and its stretches.

    Raises
    ------
    QueryError
        When series of one side have the same labels once the pair's
        ``ignoring`` labels are left out (the pairing would be ambiguous).
    """
    if not pairs:
        return []
    rules = source.info().rules
    plans = [_Plan.of(pair, window.seconds, rules) for pair in pairs]
    questions = [plan.questions() for plan in plans]
    answers = vectors(source, [expr for asked in questions for expr in asked], window.end_s)
    finishing = []
    start = 0
    for plan, asked in zip(plans, questions, strict=True):
        parts = answers[start : start + len(asked)]
        start += len(asked)
        finishing.append(partial(_finish, source, window, plan, parts))
    return together(finishing)


def _refuse_merged(pair: Pair, merged: tuple[Vector, Vector]) -> None:
    """Refuse a side whose series the pair's ignored labels would merge, naming one group.

    Two series of one side with one key would make the pairing ambiguous, as
    PromQL's one-to-one matching refuses duplicate series in a match group.
    """
    for selector, answer in zip((pair.numerator, pair.denominator), merged, strict=True):
        if answer.labels:
            group, count = answer.labels[0], int(answer.values[0])
            raise QueryError(
                f"{to_promql(selector)}: {count} series have the labels {dict(group)} once "
                f"{sorted(pair.ignoring)} are ignored, so they are not told apart; ignore "
                "fewer labels, or select fewer series"
            )


def _finish(source: Source, window: Window, plan: _Plan, parts: list[Vector]) -> Totals:
    """One pair's totals from its part of the joined answer."""
    pair = plan.pair
    reset_part, top_part, bottom_part = parts[:3]
    rest = parts[3:]
    unpaired: list[Labels] = []
    if plan.unpaired is not None:
        unpaired = sorted({_key(one, pair.ignoring) for one in rest[0].labels}, key=repr)
        rest = rest[1:]
    if plan.merged is not None:
        _refuse_merged(pair, (rest[0], rest[1]))
        rest = rest[2:]
    if rest:
        checked = rest[0].as_dict()
    else:  # a scalar check, asked alone
        checked = {Labels(()): float(cast(float, source.instant(pair.check, window.end_s).value))}
    # A pair where either side reset is worked out from its drops, both sides.
    restarted = reset_part.labels
    matched = pair.pairing is Pairing.MATCHED
    drop = pair.ignoring if matched else frozenset()
    wanted = sorted({_key(one, drop) for one in restarted}, key=repr)
    sides: list[Vector] = [top_part, bottom_part]
    changed: list[dict[Labels, float]] = []
    if restarted:
        clean = [plan.summed(plan.top, True), plan.summed(plan.bottom, True)]
        cleaned = soon(partial(vectors, source, clean, window.end_s))
        changed = together(
            [
                partial(reset_changes_of, source, selector, wanted, window)
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
