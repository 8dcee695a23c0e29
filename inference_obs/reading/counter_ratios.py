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
A sample exactly at the window's start is one of them on every engine
(:func:`~inference_obs.reading.counter_resets.closed_range`): an engine
whose ranges leave their start out would drop the first scrape interval's
requests from both sides, a bias no annotation would show.

The changes are computed where the samples are, so a fleet's raw samples
never travel: a series without a reset only grows, so its change is
``max_over_time - min_over_time``, and the source sums those (``unless
resets > 0``) in one small answer per side. The series that did reset (a
restart) are worked out by :mod:`~inference_obs.reading.counter_resets`
from the stretches of samples around their drops, and their changes added
locally. The PromQL ratio of
``increase()`` is still run, so a report can list it for rechecking, and an
annotation gives its value when it differs.

Several ratios (:func:`counter_ratios`) are one query: which series
reset, both sides' sums, the recheck ratios and the checks of each pairing
(see :mod:`~inference_obs.reading.counter_totals`). Only a restart asks
more.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from inference_obs.errors import Annotation
from inference_obs.metrics import builders
from inference_obs.metrics.family import Family
from inference_obs.query import Binary, Expr, Matcher, Selector, to_promql
from inference_obs.reading.context import Reading, missing_families, missing_families_by
from inference_obs.reading.counter_resets import closed_range, series_change
from inference_obs.reading.counter_totals import Pair, Pairing, Totals, totals
from inference_obs.reading.measurement import Measurement, Status
from inference_obs.reading.schedule import together
from inference_obs.samples import Labels, SampleSet

__all__ = [
    "EXTRAPOLATION_NOTE_ABOVE",
    "Pairing",
    "Ratio",
    "counter_change",
    "counter_ratio",
    "counter_ratios",
    "counter_ratios_by",
    "counter_ratios_grouped",
    "histogram_mean",
    "histogram_share",
    "mean_ratio",
    "share_ratio",
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


@dataclass(frozen=True, slots=True)
class Ratio:
    """One exact counter ratio to ask: the total change of ``numerator``'s series over that
    of ``denominator``'s.

    Attributes
    ----------
    numerator, denominator
        Counter selectors. With :attr:`Pairing.MATCHED`, each series of one
        must have a partner in the other with the same labels, except the
        ``ignoring`` ones (``le`` when two buckets are divided); with
        :attr:`Pairing.PART_OF_WHOLE`, the totals are divided as they are (one
        finish reason over all).
    promql
        The PromQL expression of the same ratio (extrapolated), run for the
        record and listed in the provenance.
    statistic, unit, caveats
        Labels of the Measurement.
    """

    numerator: Selector
    denominator: Selector
    promql: Expr
    statistic: str
    unit: str
    ignoring: tuple[str, ...] = ()
    pairing: Pairing = Pairing.MATCHED
    caveats: tuple[str, ...] = ()

    def pair(self, by: Sequence[str] = ()) -> Pair:
        """What :func:`~inference_obs.reading.counter_totals.totals` asks for this ratio."""
        return Pair(
            self.numerator,
            self.denominator,
            frozenset(self.ignoring),
            self.pairing,
            tuple(by),
            self.promql,
        )


def counter_ratios(r: Reading, ratios: Sequence[Ratio]) -> list[Measurement]:
    """Each of ``ratios``, exactly, in order, in a fixed number of requests.

    However many ratios: one joined query
    (:func:`~inference_obs.reading.counter_totals.totals`), so an analysis
    that needs several ratios asks them as one.

    Returns
    -------
    list of Measurement
        ``no_data`` naming the families when the denominator has no series
        or did not change; ``partial`` when a series of one side has no
        partner in the other (named in an annotation; only pairs are used).

    Raises
    ------
    QueryError
        When series of one side have the same labels once ``ignoring`` is
        left out (the pairing would be ambiguous).
    """
    whole = Labels(())
    found = totals(r.source, r.window, [ratio.pair() for ratio in ratios])
    return [
        _ratio_measurement(r, ratio, one, whole, ratio.statistic)
        for ratio, one in zip(ratios, found, strict=True)
    ]


def counter_ratio(r: Reading, ratio: Ratio) -> Measurement:
    """One exact counter ratio (see :func:`counter_ratios`)."""
    return counter_ratios(r, [ratio])[0]


def counter_ratios_by(
    r: Reading,
    ratio: Ratio,
    *,
    by: Sequence[str],
    groups: Sequence[Labels],
    statistic: Callable[[Labels], str],
) -> dict[Labels, Measurement]:
    """``ratio`` per group of the ``by`` labels, in a fixed number of requests.

    ``groups`` are the ``by`` label sets wanted (each gets a Measurement,
    ``no_data`` where it has no series); ``statistic`` names each group's
    Measurement (``ratio.statistic`` is not used); ``ratio.promql`` is the
    extrapolated ratio grouped ``by`` the same labels, run once for the record.
    """
    (found,) = totals(r.source, r.window, [ratio.pair(by)])
    both = Binary("/", ratio.numerator, ratio.denominator)
    absent = missing_families_by(r.source, both, r.window, by)
    return {
        group: _ratio_measurement(r, ratio, found, group, statistic(group), absent)
        for group in groups
    }


def counter_ratios_grouped(
    r: Reading,
    ratios: Sequence[Ratio],
    *,
    by: Sequence[str],
    groups: Sequence[Labels],
    statistic: Callable[[Ratio, Labels], str],
) -> list[dict[Labels, Measurement]]:
    """Each of ``ratios`` per group of the ``by`` labels, all in one fixed set of requests.

    :func:`counter_ratios_by` for several ratios at once: however many
    ratios and groups, one joined query and one series request (a restart
    asks more). ``statistic`` names each ratio's Measurement of one group;
    each ratio's ``promql`` should be grouped ``by`` the same labels.
    """
    found = totals(r.source, r.window, [ratio.pair(by) for ratio in ratios])

    def each_group(ratio: Ratio, one: Totals) -> dict[Labels, Measurement]:
        # The groups without series (a family some or all replicas do not export) name
        # their missing families from one series request per family, however many groups.
        both = Binary("/", ratio.numerator, ratio.denominator)
        absent = missing_families_by(r.source, both, r.window, by)
        return {
            group: _ratio_measurement(r, ratio, one, group, statistic(ratio, group), absent)
            for group in groups
        }

    # The ratios together: the series requests of every ratio go out at once.
    return together(
        [partial(each_group, ratio, one) for ratio, one in zip(ratios, found, strict=True)]
    )


def _ratio_measurement(
    r: Reading,
    ratio: Ratio,
    found: Totals,
    group: Labels,
    statistic: str,
    absent: Callable[[Labels], list[str]] | None = None,
) -> Measurement:
    """One group's ratio; ``absent``: a group's families without series, when grouped."""
    top, bottom = found.groups.get(group, (0.0, 0.0))
    value = top / bottom if bottom > 0 else None
    rules = r.source.info().rules
    sides = [closed_range(side, r.seconds, rules) for side in (ratio.numerator, ratio.denominator)]
    both = Binary("/", ratio.numerator, ratio.denominator)
    missing = (
        []
        if group in found.present
        else absent(group)
        if absent is not None
        else missing_families(r.source, both, r.window, group)
    )
    m = r.local(
        statistic,
        value,
        ratio.unit,
        reads=sides,
        computation=_COMPUTATION,
        caveats=ratio.caveats,
        missing=missing,
    )
    unpaired = [u for u in found.unpaired if all(u.get(k) == v for k, v in group.items())]
    notes = list(m.annotations)
    status = m.status
    if unpaired and m.value is not None:
        status = Status.PARTIAL
        names = "; ".join(repr(k) for k in unpaired)
        notes.append(Annotation("unpaired_series", f"no partner series for {names}"))
    check = found.check.get(group)
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
    return r.made(
        statistic,
        m.value,
        ratio.unit,
        status,
        promql=(*m.provenance.promql, to_promql(ratio.promql)),
        computation=_COMPUTATION,
        annotations=notes,
        caveats=ratio.caveats,
    )


def mean_ratio(
    r: Reading,
    family: Family,
    statistic: str,
    *,
    matchers: Sequence[Matcher] | None = None,
    caveats: Sequence[str] = (),
    by: Sequence[str] = (),
) -> Ratio:
    """The :class:`Ratio` of :func:`histogram_mean`, to ask with others; ``by``: the labels
    its recheck PromQL is grouped by (for :func:`counter_ratios_grouped`)."""
    chosen = tuple(r.matchers if matchers is None else matchers)
    return Ratio(
        numerator=family.select(chosen, "sum"),
        denominator=family.select(chosen, "count"),
        promql=builders.histogram_mean(family, chosen, r.seconds, by=tuple(by)),
        statistic=statistic,
        unit=family.unit,
        caveats=tuple(caveats),
    )


def histogram_mean(
    r: Reading,
    family: Family,
    statistic: str,
    *,
    matchers: Sequence[Matcher] | None = None,
    caveats: Sequence[str] = (),
) -> Measurement:
    """Exact observation-weighted mean of ``family`` over the window, in the family's unit.

    The change of ``_sum`` over the change of ``_count`` across every
    series of the deployment (or of ``matchers``): the request-weighted mean
    for request histograms. See :func:`counter_ratios` for the statuses.
    """
    return counter_ratio(r, mean_ratio(r, family, statistic, matchers=matchers, caveats=caveats))


def share_ratio(
    r: Reading, family: Family, bound: float, statistic: str, *, caveats: Sequence[str] = ()
) -> Ratio:
    """The :class:`Ratio` of :func:`histogram_share`, to ask with others."""
    m = r.matchers
    return Ratio(
        numerator=family.select((*m, builders.le_matcher(bound)), "bucket"),
        denominator=family.select((*m, builders.le_matcher(math.inf)), "bucket"),
        promql=builders.share_at_or_below(family, bound, m, r.seconds),
        statistic=statistic,
        unit="ratio",
        ignoring=("le",),
        caveats=tuple(caveats),
    )


def histogram_share(
    r: Reading, family: Family, bound: float, statistic: str, *, caveats: Sequence[str] = ()
) -> Measurement:
    """Exact share (ratio 0-1) of ``family``'s observations at or below the bucket bound ``bound``.

    The change of the ``le=bound`` bucket over the change of ``le="+Inf"``
    across every series of the deployment. ``no_data`` when no bucket has
    that bound (the caller interpolates between bounds instead).
    """
    return counter_ratio(r, share_ratio(r, family, bound, statistic, caveats=caveats))
