"""A counter ratio's pairing checked where the series are, on both real servers, hostile pods.

:func:`~inference_obs.reading.counter_totals.totals` finds the series of one
side without a partner in the other (``unless``) and the series the ignored
labels would merge (``count without ... > 1``) in the query that sums the
sides, so no label set per series travels. Here Prometheus 2.42 (remote
write) and VictoriaMetrics 1.79 (JSON import) hold ``_sum``/``_count`` and
bucket counters of pods named with quotes, backslashes and newlines, one
pod without its ``_count``: the totals are the hand-worked changes, the
pod without a partner is named exactly, a merging selector is refused
naming its group, and no series listing is asked.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from inference_obs.errors import QueryError
from inference_obs.query import Expr, Matcher, Selector
from inference_obs.reading.counter_totals import Pair, Pairing, Totals, totals
from inference_obs.samples import Labels, Window
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import (
    PrometheusServer,
    SeriesSamples,
    VictoriaMetricsServer,
    write_series,
)

pytestmark = pytest.mark.integration

BASE = "pairing_live_seconds"
# Quotes, backslashes (one before an "n", one last), newlines (one first, one last).
PODS = ['h20-model-01\nx"q\\', 'say "hi"', "C:\\path\\", "a\\nb", "\nlead", "trail\n"]
ALONE = "alone"  # has a _sum and buckets, no _count


class Unlisted(PrometheusSource):
    """A server source that fails the test if a series listing is asked."""

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        raise AssertionError(f"a series listing was asked: {selector}")


def counters(start_ms: int) -> list[SeriesSamples]:
    """Pod i, two samples a minute apart: _sum 5 -> 5 + (i + 1), _count 10 -> 10 + 2 (i + 1),
    buckets le=1 then +Inf gaining (i + 1) and 2 (i + 1)."""
    series: list[SeriesSamples] = []
    end_ms = start_ms + 60_000
    for i, pod in enumerate([*PODS, ALONE]):
        grow = float(i + 1)
        sides = [("_sum", {}, 5.0, grow), ("_bucket", {"le": "1"}, 3.0, grow)]
        sides += [("_bucket", {"le": "+Inf"}, 10.0, 2 * grow)]
        sides += [("_count", {}, 10.0, 2 * grow)] if pod != ALONE else []
        for suffix, extra, first, gain in sides:
            labels = {"__name__": BASE + suffix, "pod": pod, **extra}
            series.append((labels, [(start_ms, first), (end_ms, first + gain)]))
    return series


def _by_pod(found: Totals) -> dict[str, tuple[float, float]]:
    return {group["pod"]: values for group, values in found.groups.items()}


@pytest.mark.parametrize("server", ["empty_prometheus", "victoria_metrics"])
def test_pairs_are_checked_by_the_server_and_hostile_pods_come_back_exact(
    request: pytest.FixtureRequest, server: str
) -> None:
    store: PrometheusServer | VictoriaMetricsServer = request.getfixturevalue(server)
    start_ms = (int(time.time()) - 600) * 1000  # recent: remote write and retention count from now
    write_series(store, counters(start_ms))
    source = Unlisted(store.base_url)
    window = Window(
        datetime.fromtimestamp(start_ms / 1000, UTC),
        datetime.fromtimestamp(start_ms / 1000 + 60, UTC),
    )
    check: Expr = Selector(BASE + "_count").sum(by=("pod",))
    mean = Pair(
        Selector(BASE + "_sum"), Selector(BASE + "_count"), frozenset(), Pairing.MATCHED,
        ("pod",), check,
    )  # fmt: skip
    bucket = Pair(
        Selector(BASE + "_bucket", (Matcher.equal("le", "1"),)),
        Selector(BASE + "_bucket", (Matcher.equal("le", "+Inf"),)),
        frozenset({"le"}), Pairing.MATCHED, ("pod",), check,
    )  # fmt: skip
    mean_totals, bucket_totals = totals(source, window, [mean, bucket])
    expected = {pod: (float(i + 1), 2.0 * (i + 1)) for i, pod in enumerate(PODS)}
    assert _by_pod(mean_totals) == expected
    # Every pod pairs its bucket with +Inf, the one without a _count too.
    assert _by_pod(bucket_totals) == {**expected, ALONE: (7.0, 14.0)}
    assert mean_totals.unpaired == (Labels({"pod": ALONE}),)
    assert bucket_totals.unpaired == ()
    assert {group["pod"] for group in mean_totals.present} == set(PODS)
    # Every bucket of a pod, its le ignored: two series a pod, one group; refused.
    merging = Pair(
        Selector(BASE + "_bucket"), Selector(BASE + "_count"), frozenset({"le"}),
        Pairing.MATCHED, (), check,
    )  # fmt: skip
    with pytest.raises(QueryError, match=r"_bucket: 2 series have the labels \{'pod': .*le"):
        totals(source, window, [merging])


def restarted(start_ms: int, pods: list[str]) -> list[SeriesSamples]:
    """Every pod restarted once, four samples a minute apart: _sum 100 110 5 15 (+25),
    _count 10 20 2 6 (+16), a drop counted as a restart from zero."""
    times = [start_ms + 30_000 + 60_000 * k for k in range(4)]
    series: list[SeriesSamples] = []
    for pod in pods:
        for suffix, values in (("_sum", (100, 110, 5, 15)), ("_count", (10, 20, 2, 6))):
            labels = {"__name__": RESTARTED + suffix, "pod": pod}
            series.append((labels, [(t, float(v)) for t, v in zip(times, values, strict=True)]))
    return series


RESTARTED = "pairing_live_restarted_seconds"


@pytest.mark.parametrize("server", ["empty_prometheus", "victoria_metrics"])
def test_a_fleet_restarted_whole_is_read_in_narrowings_a_query_may_hold(
    request: pytest.FixtureRequest, server: str
) -> None:
    store: PrometheusServer | VictoriaMetricsServer = request.getfixturevalue(server)
    # 60 pods with 250-character names (and the hostile ones): one alternation of them
    # all is 15 KB, and a question repeats it; VictoriaMetrics takes 16 KiB a query.
    pods = [f"{i:03d}-{'x' * 246}" for i in range(60)] + PODS
    start_ms = (int(time.time()) - 900) * 1000
    write_series(store, restarted(start_ms, pods))
    window = Window(
        datetime.fromtimestamp(start_ms / 1000, UTC),
        datetime.fromtimestamp(start_ms / 1000 + 240, UTC),
    )
    check: Expr = Selector(RESTARTED + "_count").sum(by=("pod",))
    mean = Pair(
        Selector(RESTARTED + "_sum"), Selector(RESTARTED + "_count"), frozenset(),
        Pairing.MATCHED, ("pod",), check,
    )  # fmt: skip
    (found,) = totals(Unlisted(store.base_url), window, [mean])
    assert _by_pod(found) == dict.fromkeys(pods, (25.0, 16.0))
    assert found.unpaired == ()
