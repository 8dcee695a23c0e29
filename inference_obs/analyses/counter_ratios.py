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

:func:`counter_ratio` therefore reads the raw samples of both counters
and takes, per series, the change from its first to its last sample in
the window (a drop is a counter reset: the counter restarted from 0). The
ratio is the numerator's total change over the denominator's: exact for
the observations recorded between those samples. The PromQL ratio is
still run, so a report can list it for rechecking, and an annotation
gives its value when it differs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from inference_obs.analyses.measurement import Measurement, Status, local_measurement, measure
from inference_obs.deployment import Deployment
from inference_obs.errors import Annotation
from inference_obs.metrics import builders
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, Matcher, Selector
from inference_obs.samples import Labels, SampleSet, Window
from inference_obs.source.base import Source

__all__ = [
    "EXTRAPOLATION_NOTE_ABOVE",
    "counter_change",
    "counter_ratio",
    "histogram_mean",
    "histogram_share",
]

#: Relative difference between the exact ratio and PromQL's above which it is annotated.
EXTRAPOLATION_NOTE_ABOVE = 1e-6


def counter_change(samples: SampleSet) -> float:
    """Total change of counter series from their first to last sample, resets included.

    Per series, the differences between neighbouring samples are added; a
    drop counts as a reset, so the value after it is added instead (the
    counter restarted from 0), as Prometheus's ``increase`` does before it
    extrapolates. NaN samples (staleness markers) are skipped. Unit: the
    counter's.
    """
    total = 0.0
    for i in range(len(samples)):
        lo, hi = int(samples.offsets[i]), int(samples.offsets[i + 1])
        values = samples.values[lo:hi]
        values = values[~np.isnan(values)]
        steps = np.diff(values)
        total += float(np.where(steps < 0, values[1:], steps).sum())
    return total


def _keyed(samples: SampleSet, ignoring: frozenset[str]) -> dict[Labels, int]:
    keyed = {
        Labels((k, v) for k, v in labels.items() if k not in ignoring): i
        for i, labels in enumerate(samples.labels)
    }
    if len(keyed) != len(samples):
        raise ValueError(f"series are not told apart once {sorted(ignoring)} are ignored")
    return keyed


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
    """
    tops = source.raw(numerator, window)
    bottoms = source.raw(denominator, window)
    unpaired: list[Labels] = []
    if paired:
        drop = frozenset(ignoring)
        top_keys, bottom_keys = _keyed(tops, drop), _keyed(bottoms, drop)
        both = sorted(set(top_keys) & set(bottom_keys), key=repr)
        unpaired = sorted(set(top_keys) ^ set(bottom_keys), key=repr)
        tops = tops.take([top_keys[k] for k in both])
        bottoms = bottoms.take([bottom_keys[k] for k in both])
    below, above = counter_change(bottoms), counter_change(tops)
    value = above / below if below > 0 else None
    missing = [] if len(bottoms) else [f.name for f in families]
    m = local_measurement(
        source, deployment, window, analysis=analysis, statistic=statistic, value=value,
        unit=unit, selectors=[numerator.over(window.seconds), denominator.over(window.seconds)],
        computation=(
            "sum over series of each counter's change from its first to its last sample in "
            "the window (resets added back, no extrapolation); numerator / denominator"
        ),
        caveats=caveats, missing=missing,
    )  # fmt: skip
    check = measure(
        source, deployment, window, analysis=analysis, statistic=statistic, expr=promql,
        unit=unit, families=families, matchers=numerator.matchers,
    )  # fmt: skip
    notes = list(m.annotations)
    status = m.status
    if unpaired and m.value is not None:
        status = Status.PARTIAL
        names = "; ".join(repr(k) for k in unpaired)
        notes.append(Annotation("unpaired_series", f"no partner series for {names}"))
    if m.value and check.value is not None:
        gap = (check.value - m.value) / m.value
        if math.isfinite(gap) and abs(gap) > EXTRAPOLATION_NOTE_ABOVE:
            notes.append(
                Annotation(
                    "extrapolation_bias",
                    f"PromQL's increase() ratio gives {check.value:.6g} ({gap:+.2%}): it "
                    "stretches each counter to the window's edges by its own factor",
                )
            )
    promqls = (*m.provenance.promql, *check.provenance.promql)
    return m.model_copy(
        update={
            "status": status,
            "annotations": tuple(notes),
            "provenance": m.provenance.model_copy(update={"promql": promqls}),
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
