"""Exact counter changes read the sample at the window's start on real servers.

The pods and the fleet of :mod:`tests.analyses.window_edges`, backfilled
into Prometheus 2.42 (ranges closed at both ends) and imported into
VictoriaMetrics 1.79 (ranges open at their start), give the hand-worked
means and counts and the fleet's ground truth, as the local engine does
under every rule set (:mod:`tests.analyses.test_counter_ratios_edges`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inference_obs.engine.rules import Rules
from inference_obs.metrics import vllm
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import histogram_mean
from inference_obs.samples import Window
from inference_obs.source.dataset.reader import SAMPLES
from inference_obs.source.prometheus import PrometheusSource
from tests.analyses.test_counter_ratios_edges import LONG, WINDOW
from tests.analyses.window_edges import (
    START,
    RawWindows,
    edge_deployment,
    edge_series,
    edges_dataset,
    exact_mean_and_count,
    finished_count,
    fleet_deployment,
    fleet_series,
    fleet_truth,
    fleet_window,
)
from tests.integration.servers import PrometheusFactory, VictoriaMetricsServer

pytestmark = pytest.mark.integration

#: Pod names of this module's series in the VictoriaMetrics all tests share.
VM_PREFIX = "edges-"
#: The hand-worked (mean, count) of each pod over :data:`WINDOW`.
POD_ANSWERS = {"one": (2.0, 30), "reset": (2.0, 22), "early": (2.0, 30)}
#: VictoriaMetrics keeps about 12 significant digits of a value.
VM_DIGITS = 1e-9


@dataclass(frozen=True, slots=True)
class Served:
    """A server holding the series: its source, rules, pod prefix and time shift (s)."""

    source: PrometheusSource
    rules: Rules
    prefix: str
    shift: float

    def window(self, window: Window) -> Window:
        """``window`` moved as the series were."""
        start = datetime.fromtimestamp(window.start_s + self.shift, UTC)
        return Window.parse(start, window.seconds)


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, prometheus_factory: PrometheusFactory
) -> Iterator[Served]:
    dataset = edges_dataset(Path(tmp_path_factory.mktemp("edges")))
    server = prometheus_factory((dataset.path / SAMPLES).read_text())
    yield Served(PrometheusSource(server.base_url), Rules.PROMETHEUS_2, "", 0.0)
    server.stop()


@pytest.fixture(scope="module")
def victoria(victoria_metrics: VictoriaMetricsServer) -> Served:
    # VM's retention counts from now: the same samples a day back, whole minutes moved.
    shift_s = (int(time.time()) - 86400) // 60 * 60 - int(START.timestamp())
    rows = [
        (
            {"__name__": s.name, **s.labels, "pod": VM_PREFIX + s.labels["pod"]},
            list(zip((s.t_ms + shift_s * 1000).tolist(), s.values.tolist(), strict=True)),
        )
        for s in [*edge_series(START.timestamp()), *fleet_series()]
    ]
    victoria_metrics.import_series(rows)
    source = PrometheusSource(victoria_metrics.base_url)
    return Served(source, Rules.VICTORIAMETRICS, VM_PREFIX, float(shift_s))


@pytest.fixture(params=["prometheus", "victoria"])
def served(request: pytest.FixtureRequest) -> Served:
    chosen: Served = request.getfixturevalue(request.param)
    return chosen


def test_each_server_is_known_by_its_rules(served: Served) -> None:
    # Prometheus 2.42 closes its ranges, VictoriaMetrics leaves their start open.
    assert served.source.info().rules is served.rules
    assert served.rules.left_open is (served.rules is Rules.VICTORIAMETRICS)


@pytest.mark.parametrize("pod", sorted(POD_ANSWERS))
def test_a_scrape_at_the_start_is_read(served: Served, pod: str) -> None:
    deployment, window = edge_deployment(served.prefix + pod), served.window(WINDOW)
    assert exact_mean_and_count(served.source, deployment, window) == POD_ANSWERS[pod]
    family = vllm.TIME_TO_FIRST_TOKEN
    measured = histogram_mean(Reading(served.source, deployment, window, "t"), family, "m")
    assert measured.value == 2.0


def test_a_restart_after_the_start_scrape_reads_stretches_only(served: Served) -> None:
    reads = RawWindows(served.source)
    deployment, window = edge_deployment(served.prefix + "restart"), served.window(LONG)
    assert exact_mean_and_count(reads, deployment, window) == (2.0, 632)
    assert reads.seconds
    assert max(reads.seconds) <= LONG.seconds / 16


def test_a_fleet_scraped_at_the_start_counts_every_request(served: Served) -> None:
    truth, window = fleet_truth(), served.window(fleet_window())
    deployment = fleet_deployment(served.prefix)
    mean, counted = exact_mean_and_count(served.source, deployment, window)
    # The count behind the TTFT mean is every request, the first interval of
    # the replica scraped at the start included, as the finished count is.
    assert counted == truth.ttft_count
    assert finished_count(served.source, deployment, window) == truth.finished
    assert mean == pytest.approx(truth.ttft_mean, rel=VM_DIGITS)
