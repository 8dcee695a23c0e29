"""Exact ratios of counters: histogram means and shares from changes without extrapolation.

PromQL's ``sum(increase(h_sum[w])) / sum(increase(h_count[w]))`` is the
mean Grafana shows, but it is not exact. ``increase`` extrapolates each
counter towards the window's edges, and stops extrapolating where a
counter would fall below zero. When ``_sum`` starts the window near zero
and ``_count`` does not (or the reverse), the two are stretched by
different factors and the ratio is biased: 0.5% on a published queue-time
mean, for instance. Replicas scraped at different phases are stretched by
different factors too, which weights them unevenly. Shares of bucket
counts and of finish reasons have the same flaw.

:func:`counter_ratio` therefore takes, per series, the change from its
first to its last sample in the window (a drop is a counter reset: the
counter restarted from 0), and divides the numerator's total change by the
denominator's: exact for the observations recorded between those samples.

The changes are computed where the samples are, so a fleet's raw samples
never travel: a series without a reset only grows, so its change is
``max_over_time - min_over_time``, and the source sums those (``unless
resets > 0``) in one small answer per side. The series that did reset (a
restart) are worked out by :mod:`~inference_obs.analyses.counter_resets`
from the stretches of samples around their drops, and their changes added
locally. The PromQL ratio of
``increase()`` is still run, so a report can list it for rechecking, and an
annotation gives its value when it differs.

A ratio is two requests, asked at once: one query
(:mod:`~inference_obs.analyses.joined`) for which series reset, both sides'
sums and the recheck ratio, and one series request for both sides (shared
by every ratio on the same family). Only a restart asks more.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import cast

from inference_obs.analyses.counter_resets import narrowed, reset_changes, series_change
from inference_obs.analyses.joined import joined, split
from inference_obs.analyses.measurement import Measurement, Status, local_measurement
from inference_obs.deployment import Deployment
from inference_obs.engine.vector import NAME, Vector
from inference_obs.errors import Annotation
from inference_obs.metrics import builders
from inference_obs.metrics.family import Family
from inference_obs.query import (
    Binary,
    Expr,
    Matcher,
    Number,
    Selector,
    ValueType,
    ignoring,
    max_over_time,
    min_over_time,
    resets,
    to_promql,
)
from inference_obs.samples import Labels, SampleSet, Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import soon, together

__all__ = [
    "EXTRAPOLATION_NOTE_ABOVE",
    "counter_change",
    "counter_ratio",
    "counter_ratios_by",
    "histogram_mean",
    "histogram_share",
]

#: Relative difference between the exact ratio and PromQL's above which it is annotated.
EXTRAPOLATION_NOTE_ABOVE = 1e-6

_COMPUTATION = (
    "sum over series of each counter's change from its first to its last sample in the "
    "window (resets added back, no extrapolation): max_over_time - min_over_time summed by "
    "the source for series without a reset, raw samples around the drops for those with one; "
    "numerator / denominator"
)


def counter_change(samples: SampleSet) -> float:
    """Total change of counter series from their first to last sample, resets included.

    Per series, the differences between neighbouring samples are added; a
    drop counts as a reset, so the value after it is added instead (the
    counter restarted from 0), as Prometheus's ``increase`` does before it
    extrapolates. NaN samples (staleness markers) are skipped. Unit: the
    counter's.
    """
    return sum((series_change(samples, i) for i in range(len(samples))), 0.0)


def _key(labels: Labels, drop: frozenset[str]) -> Labels:
    return Labels((k, v) for k, v in labels.items() if k not in drop and k != "__name__")


def _keyed(labels: Sequence[Labels], ignoring_: frozenset[str]) -> dict[Labels, Labels]:
    """Each series' key (labels less ``ignoring_``) mapped to its label set; collisions refused."""
    keyed = {_key(one, ignoring_): one for one in labels}
    if len(keyed) != len(labels):
        raise ValueError(f"series are not told apart once {sorted(ignoring_)} are ignored")
    return keyed


@dataclass(frozen=True, slots=True)
class _Totals:
    """Total changes per group (``by`` labels -> (numerator, denominator)), and the pairing."""

    groups: dict[Labels, tuple[float, float]]
    #: Groups where the denominator has at least one (paired) series.
    present: frozenset[Labels]
    unpaired: tuple[Labels, ...]
    #: The extrapolated PromQL ratio per group, for the record.
    check: dict[Labels, float]


def _changes(selector: Selector, seconds: float) -> Expr:
    """Per series, ``max_over_time - min_over_time``: the exact change where nothing reset."""
    window = selector.over(seconds)
    return max_over_time(window) - min_over_time(window)


def _did_reset(selector: Selector, seconds: float) -> Expr:
    return Binary(">", resets(selector.over(seconds)), Number(0))


def _selects(selector: Selector, labels: Labels) -> bool:
    """Whether ``selector`` selects the series of ``labels`` (``__name__`` included)."""
    name = labels.get(NAME, "")
    if selector.metric is not None and name != selector.metric:
        return False
    return all(
        m.matches(name if m.label == NAME else labels.get(m.label, "")) for m in selector.matchers
    )


def _both_series(
    source: Source, a: Selector, b: Selector, window: Window
) -> tuple[tuple[Labels, ...], tuple[Labels, ...]]:
    """The series of ``a`` and of ``b`` in ``window``, from one request where the two differ
    in the metric name or in matchers only one of them has.

    The request selects the matchers both share, of either name; each side's
    series are picked from the answer by its own selector. Both sides' series
    of a family (a bucket and ``+Inf``, ``_sum`` and ``_count``, one finish
    reason and all) are then one request, and one for every ratio on that
    family, since the shared part is the same.
    """
    if a.metric is None or b.metric is None or (a.offset, a.at) != (b.offset, b.at):
        return source.series(a, window), source.series(b, window)
    common = tuple(m for m in a.matchers if m in b.matchers)
    if a.metric == b.metric:
        broad = Selector(a.metric, common, a.offset, a.at)
    else:
        names = Matcher.one_of(NAME, sorted({a.metric, b.metric}))
        broad = Selector(None, (names, *common), a.offset, a.at)
    found = source.series(broad, window)
    return (
        tuple(labels for labels in found if _selects(a, labels)),
        tuple(labels for labels in found if _selects(b, labels)),
    )


def _together(source: Source, asked: dict[str, Expr], window: Window) -> dict[str, Vector]:
    """Several instant vectors, by name, from one query (:func:`~.joined.joined`)."""
    answer = joined(source, list(asked.values()), window.end_s)
    return dict(zip(asked, split(answer, len(asked)), strict=True))


def _totals(
    source: Source,
    window: Window,
    numerator: Selector,
    denominator: Selector,
    ignoring_: frozenset[str],
    paired: bool,
    by: tuple[str, ...],
    check: Expr,
) -> _Totals:
    """Exact total changes of both sides per ``by`` group (see the module docstring), and the
    extrapolated ratio ``check`` per group."""
    w = window.seconds
    match = ignoring(*ignoring_) if ignoring_ else None
    top_change, bottom_change = _changes(numerator, w), _changes(denominator, w)
    if paired:
        top_change, bottom_change = (
            Binary("and", top_change, _changes(denominator, w), matching=match),
            Binary("and", bottom_change, _changes(numerator, w), matching=match),
        )
    reset = Binary("or", _did_reset(numerator, w), _did_reset(denominator, w))
    unless = ignoring(*ignoring_) if paired and ignoring_ else None

    def summed(change: Expr, restarted: bool) -> Expr:
        clean = Binary("unless", change, reset, matching=unless) if restarted else change
        return clean.sum(by=by) if by else clean.sum()

    # One query: which series reset, both sides' sums as if none did (what a
    # window without restarts, the usual case, needs; a restart asks again),
    # and the check; the two sides' series are asked alongside.
    questions = {"reset": reset, "top": summed(top_change, False)}
    questions["bottom"] = summed(bottom_change, False)
    if check.type is ValueType.VECTOR:
        questions["check"] = check
    labelled, asked = (
        soon(source, lambda: _both_series(source, numerator, denominator, window)),
        soon(source, lambda: _together(source, questions, window)),
    )
    checked = (
        asked.result()["check"].as_dict()
        if "check" in questions
        else {Labels(()): float(cast(float, source.instant(check, window.end_s).value))}
    )
    top_labels, bottom_labels = labelled.result()
    unpaired: list[Labels] = []
    if paired:
        top_keys = _keyed(top_labels, ignoring_)
        bottom_keys = _keyed(bottom_labels, ignoring_)
        unpaired = sorted(set(top_keys) ^ set(bottom_keys), key=repr)
    # A pair where either side reset is worked out from its drops, both sides.
    any_series = top_labels or bottom_labels
    restarted = asked.result()["reset"].labels if any_series else ()
    drop = ignoring_ if paired else frozenset()
    wanted = sorted({_key(labels, drop) for labels in restarted}, key=repr)
    if restarted:
        clean = {"top": summed(top_change, True), "bottom": summed(bottom_change, True)}
        cleaned = soon(source, lambda: _together(source, clean, window))
        changed = together(
            source,
            [
                partial(reset_changes, source, narrowed(selector, wanted), window)
                for selector in (numerator, denominator)
            ],
        )
        sides = [cleaned.result()["top"], cleaned.result()["bottom"]]
    else:
        sides, changed = [asked.result()["top"], asked.result()["bottom"]], []
    groups: dict[Labels, list[float]] = {}
    present: set[Labels] = set()
    for side, answer in enumerate(sides):
        for labels, value in zip(answer.labels, answer.values.tolist(), strict=True):
            groups.setdefault(labels, [0.0, 0.0])[side] += value
            present.update([labels] if side else [])
    if restarted:
        keyed = [
            {_key(labels, drop): (labels, amount) for labels, amount in side.items()}
            for side in changed
        ]
        both = set(keyed[0]) & set(keyed[1]) if paired else None
        for side, entries in enumerate(keyed):
            for key, (labels, amount) in entries.items():
                if key in wanted and (both is None or key in both):
                    group = Labels((k, v) for k, v in labels.items() if k in by)
                    groups.setdefault(group, [0.0, 0.0])[side] += amount
                    present.update([group] if side else [])
    totals = {g: (t, b) for g, (t, b) in groups.items()}
    return _Totals(totals, frozenset(present), tuple(unpaired), checked)


def counter_ratio(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    numerator: Selector,
    denominator: Selector,
    promql: Expr,
    families: Sequence[Family],
    analysis: str,
    statistic: str,
    unit: str,
    ignoring: Sequence[str] = (),
    paired: bool = True,
    caveats: Sequence[str] = (),
) -> Measurement:
    """Total change of ``numerator``'s series over that of ``denominator``'s, exactly.

    Parameters
    ----------
    source, deployment, window
        Where, whose series and the window.
    numerator, denominator
        Counter selectors. With ``paired``, each series of one must have a
        partner in the other with the same labels, except the ``ignoring``
        ones (``le`` when two buckets are divided); without, the totals are
        divided as they are (a part over a whole, such as one finish reason
        over all).
    promql
        The PromQL expression of the same ratio (extrapolated), run for the
        record and listed in the provenance.
    families
        The families the ratio needs, named when it has no data.
    analysis, statistic, unit, caveats
        Labels of the Measurement.

    Returns
    -------
    Measurement
        ``no_data`` naming the families when the denominator has no series
        or did not change; ``partial`` when a series of one side has no
        partner in the other (named in an annotation; only pairs are used).

    Raises
    ------
    ValueError
        When two series of one side have the same labels once ``ignoring``
        is left out (the pairing would be ambiguous).
    """
    whole = Labels(())
    return counter_ratios_by(
        source, deployment, window, numerator=numerator, denominator=denominator,
        promql=promql, families=families, analysis=analysis, statistic=lambda _: statistic,
        unit=unit, by=(), groups=[whole], ignoring=ignoring, paired=paired, caveats=caveats,
    )[whole]  # fmt: skip


def counter_ratios_by(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    numerator: Selector,
    denominator: Selector,
    promql: Expr,
    families: Sequence[Family],
    analysis: str,
    statistic: Callable[[Labels], str],
    unit: str,
    by: Sequence[str],
    groups: Sequence[Labels],
    ignoring: Sequence[str] = (),
    paired: bool = True,
    caveats: Sequence[str] = (),
) -> dict[Labels, Measurement]:
    """:func:`counter_ratio` per group of the ``by`` labels, in a fixed number of requests.

    ``groups`` are the ``by`` label sets wanted (each gets a Measurement,
    ``no_data`` where it has no series); ``statistic`` names each group's
    Measurement; ``promql`` is the extrapolated ratio grouped ``by`` the
    same labels, run once for the record.
    """
    keys = tuple(by)
    totals = _totals(
        source, window, numerator, denominator, frozenset(ignoring), paired, keys, promql
    )
    check = totals.check
    out: dict[Labels, Measurement] = {}
    for group in groups:
        top, bottom = totals.groups.get(group, (0.0, 0.0))
        out[group] = _ratio_measurement(
            source, deployment, window, top, bottom, group in totals.present,
            [u for u in totals.unpaired if all(u.get(k) == v for k, v in group.items())],
            check.get(group), promql, numerator, denominator, families, analysis,
            statistic(group), unit, caveats,
        )  # fmt: skip
    return out


def _ratio_measurement(
    source: Source,
    deployment: Deployment,
    window: Window,
    top: float,
    bottom: float,
    present: bool,
    unpaired: Sequence[Labels],
    check: float | None,
    promql: Expr,
    numerator: Selector,
    denominator: Selector,
    families: Sequence[Family],
    analysis: str,
    statistic: str,
    unit: str,
    caveats: Sequence[str],
) -> Measurement:
    value = top / bottom if bottom > 0 else None
    m = local_measurement(
        source, deployment, window, analysis=analysis, statistic=statistic, value=value,
        unit=unit, selectors=[numerator.over(window.seconds), denominator.over(window.seconds)],
        computation=_COMPUTATION, caveats=caveats,
        missing=[] if present else [f.name for f in families],
    )  # fmt: skip
    notes = list(m.annotations)
    status = m.status
    if unpaired and m.value is not None:
        status = Status.PARTIAL
        names = "; ".join(repr(k) for k in unpaired)
        notes.append(Annotation("unpaired_series", f"no partner series for {names}"))
    if m.value and check is not None:
        gap = (check - m.value) / m.value
        if math.isfinite(gap) and abs(gap) > EXTRAPOLATION_NOTE_ABOVE:
            notes.append(
                Annotation(
                    "extrapolation_bias",
                    f"PromQL's increase() ratio gives {check:.6g} ({gap:+.2%}): it "
                    "stretches each counter to the window's edges by its own factor",
                )
            )
    return m.model_copy(
        update={
            "status": status,
            "annotations": tuple(notes),
            "provenance": m.provenance.model_copy(
                update={"promql": (*m.provenance.promql, to_promql(promql))}
            ),
        }
    )


def histogram_mean(
    source: Source,
    deployment: Deployment,
    window: Window,
    family: Family,
    *,
    analysis: str,
    statistic: str,
    matchers: Sequence[Matcher] | None = None,
    caveats: Sequence[str] = (),
) -> Measurement:
    """Exact observation-weighted mean of ``family`` over ``window``, in the family's unit.

    The change of ``_sum`` over the change of ``_count`` across every
    series of the deployment (or of ``matchers``): the request-weighted mean
    for request histograms. See :func:`counter_ratio` for the statuses.
    """
    chosen = tuple(deployment.matchers if matchers is None else matchers)
    return counter_ratio(
        source, deployment, window,
        numerator=family.select(chosen, "sum"),
        denominator=family.select(chosen, "count"),
        promql=builders.histogram_mean(family, chosen, window.seconds),
        families=[family], analysis=analysis, statistic=statistic, unit=family.unit,
        caveats=caveats,
    )  # fmt: skip


def histogram_share(
    source: Source,
    deployment: Deployment,
    window: Window,
    family: Family,
    bound: float,
    *,
    analysis: str,
    statistic: str,
    caveats: Sequence[str] = (),
) -> Measurement:
    """Exact share (ratio 0-1) of ``family``'s observations at or below the bucket bound ``bound``.

    The change of the ``le=bound`` bucket over the change of ``le="+Inf"``
    across every series of the deployment. ``no_data`` when no bucket has
    that bound (the caller interpolates between bounds instead).
    """
    m = deployment.matchers
    return counter_ratio(
        source, deployment, window,
        numerator=family.select((*m, builders.le_matcher(bound)), "bucket"),
        denominator=family.select((*m, builders.le_matcher(math.inf)), "bucket"),
        promql=builders.share_at_or_below(family, bound, m, window.seconds),
        families=[family], analysis=analysis, statistic=statistic, unit="ratio",
        ignoring=("le",), caveats=caveats,
    )  # fmt: skip
