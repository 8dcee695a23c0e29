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
restart) are worked out by :mod:`~inference_obs.reading.counter_resets`
from the stretches of samples around their drops, and their changes added
locally. The PromQL ratio of
``increase()`` is still run, so a report can list it for rechecking, and an
annotation gives its value when it differs.

Several ratios (:func:`counter_ratios`) are two requests, asked at once:
one query for which series reset, both sides' sums and the recheck ratios,
and one series request for every side (see
:mod:`~inference_obs.reading.counter_totals`). Only a restart asks more.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from inference_obs.deployment import Deployment
from inference_obs.errors import Annotation
from inference_obs.metrics import builders
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, Matcher, Selector, to_promql
from inference_obs.reading.counter_resets import series_change
from inference_obs.reading.counter_totals import Pair, Pairing, totals
from inference_obs.reading.measurement import Measurement, Status, local_measurement
from inference_obs.samples import Labels, SampleSet, Window
from inference_obs.source.base import Source

__all__ = [
    "EXTRAPOLATION_NOTE_ABOVE",
    "Pairing",
    "Ratio",
    "counter_change",
    "counter_ratio",
    "counter_ratios",
    "counter_ratios_by",
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
    """One exact counter ratio to ask, as :func:`counter_ratio`'s arguments name its parts."""

    numerator: Selector
    denominator: Selector
    promql: Expr
    families: tuple[Family, ...]
    analysis: str
    statistic: str
    unit: str
    ignoring: tuple[str, ...] = ()
    pairing: Pairing = Pairing.MATCHED
    caveats: tuple[str, ...] = ()


def counter_ratios(
    source: Source, deployment: Deployment, window: Window, ratios: Sequence[Ratio]
) -> list[Measurement]:
    """:func:`counter_ratio` of each of ``ratios``, in order, in a fixed number of requests.

    However many ratios: one joined query and one series request, asked
    together (:func:`~inference_obs.reading.counter_totals.totals`), so an
    analysis that needs several ratios asks them as one.
    """
    whole = Labels(())
    pairs = [
        Pair(r.numerator, r.denominator, frozenset(r.ignoring), r.pairing, (), r.promql)
        for r in ratios
    ]
    return [
        _ratio_measurement(
            source, deployment, window, *found.groups.get(whole, (0.0, 0.0)),
            whole in found.present, found.unpaired, found.check.get(whole), r.promql,
            r.numerator, r.denominator, r.families, r.analysis, r.statistic, r.unit, r.caveats,
        )
        for r, found in zip(ratios, totals(source, window, pairs), strict=True)
    ]  # fmt: skip


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
    pairing: Pairing = Pairing.MATCHED,
    caveats: Sequence[str] = (),
) -> Measurement:
    """Total change of ``numerator``'s series over that of ``denominator``'s, exactly.

    Parameters
    ----------
    source, deployment, window
        Where, whose series and the window.
    numerator, denominator
        Counter selectors.
    promql
        The PromQL expression of the same ratio (extrapolated), run for the
        record and listed in the provenance.
    families
        The families the ratio needs, named when it has no data.
    analysis, statistic, unit
        Labels of the Measurement.
    ignoring
        Labels left out when series are paired (``le`` when two buckets are
        divided).
    pairing
        :attr:`Pairing.MATCHED`: each series of one side must have a partner
        in the other with the same labels, except the ``ignoring`` ones;
        :attr:`Pairing.PART_OF_WHOLE`: the totals are divided as they are
        (one finish reason over all).
    caveats
        Caveats the Measurement carries.

    Returns
    -------
    Measurement
        ``no_data`` naming the families when the denominator has no series
        or did not change; ``partial`` when a series of one side has no
        partner in the other (named in an annotation; only pairs are used).

    Raises
    ------
    QueryError
        When two series of one side have the same labels once ``ignoring``
        is left out (the pairing would be ambiguous).
    """
    ratio = Ratio(
        numerator, denominator, promql, tuple(families), analysis, statistic, unit,
        tuple(ignoring), pairing, tuple(caveats),
    )  # fmt: skip
    return counter_ratios(source, deployment, window, [ratio])[0]


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
    pairing: Pairing = Pairing.MATCHED,
    caveats: Sequence[str] = (),
) -> dict[Labels, Measurement]:
    """:func:`counter_ratio` per group of the ``by`` labels, in a fixed number of requests.

    ``groups`` are the ``by`` label sets wanted (each gets a Measurement,
    ``no_data`` where it has no series); ``statistic`` names each group's
    Measurement; ``promql`` is the extrapolated ratio grouped ``by`` the
    same labels, run once for the record.
    """
    pair = Pair(numerator, denominator, frozenset(ignoring), pairing, tuple(by), promql)
    (found,) = totals(source, window, [pair])
    out: dict[Labels, Measurement] = {}
    for group in groups:
        top, bottom = found.groups.get(group, (0.0, 0.0))
        out[group] = _ratio_measurement(
            source, deployment, window, top, bottom, group in found.present,
            [u for u in found.unpaired if all(u.get(k) == v for k, v in group.items())],
            found.check.get(group), promql, numerator, denominator, families, analysis,
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


def mean_ratio(
    deployment: Deployment,
    window: Window,
    family: Family,
    *,
    analysis: str,
    statistic: str,
    matchers: Sequence[Matcher] | None = None,
    caveats: Sequence[str] = (),
) -> Ratio:
    """The :class:`Ratio` of :func:`histogram_mean`, to ask with others."""
    chosen = tuple(deployment.matchers if matchers is None else matchers)
    return Ratio(
        numerator=family.select(chosen, "sum"),
        denominator=family.select(chosen, "count"),
        promql=builders.histogram_mean(family, chosen, window.seconds),
        families=(family,), analysis=analysis, statistic=statistic, unit=family.unit,
        caveats=tuple(caveats),
    )  # fmt: skip


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
    ratio = mean_ratio(
        deployment, window, family, analysis=analysis, statistic=statistic, matchers=matchers,
        caveats=caveats,
    )  # fmt: skip
    return counter_ratios(source, deployment, window, [ratio])[0]


def share_ratio(
    deployment: Deployment,
    window: Window,
    family: Family,
    bound: float,
    *,
    analysis: str,
    statistic: str,
    caveats: Sequence[str] = (),
) -> Ratio:
    """The :class:`Ratio` of :func:`histogram_share`, to ask with others."""
    m = deployment.matchers
    return Ratio(
        numerator=family.select((*m, builders.le_matcher(bound)), "bucket"),
        denominator=family.select((*m, builders.le_matcher(math.inf)), "bucket"),
        promql=builders.share_at_or_below(family, bound, m, window.seconds),
        families=(family,), analysis=analysis, statistic=statistic, unit="ratio",
        ignoring=("le",), caveats=tuple(caveats),
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
    ratio = share_ratio(
        deployment, window, family, bound, analysis=analysis, statistic=statistic,
        caveats=caveats,
    )  # fmt: skip
    return counter_ratios(source, deployment, window, [ratio])[0]
