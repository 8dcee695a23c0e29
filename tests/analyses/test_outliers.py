"""Outlying replicas: the rule on hand-made values, and a 64-replica fleet with two bad replicas.

The fleet (:mod:`tests.analyses.fleets`) is simulated with one replica
whose every engine step also waits 60 ms on its host for the whole window
(``host_starved``: slow) and one whose GPU exporter reads its GPUs idle
while it serves (``gpus_read_idle``), and one that restarts once. Each must be
named among the deployment's outliers for what makes it one, the first two
in the Summary, and nothing else; the slow
replica's TTFT P50 must carry the bucket that holds the true median of its
own requests in ``requests.csv``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import inference_obs as obs
from inference_obs.analyses.outliers import (
    ReplicaValue,
    _exact_outliers,
    _quantile_outliers,
)
from inference_obs.query import Selector
from inference_obs.reading.measurement import Bounds
from inference_obs.report import Report
from inference_obs.report.markdown import to_markdown
from inference_obs.report.report_json import report_json
from inference_obs.report.sections import sections
from inference_obs.source.dataset.source import DatasetSource

from .fleets import fleet_scenario, simulated
from .ground_truth import EXACT, deployment, requests_of, scrapes, true_quantile, window_of

SLOW, IDLE, RESTARTED = "F-07", "F-23", "F-41"


def _values(statistic: str, values: list[float], unit: str = "x") -> list[ReplicaValue]:
    return [
        ReplicaValue(replica=f"r{k}", statistic=statistic, value=v, unit=unit)
        for k, v in enumerate(values)
    ]


def test_an_exact_number_far_from_the_median_by_mad_is_an_outlier_either_way() -> None:
    # Median 10; absolute deviations 0, 1, 1, 0.5, 0.5, 20, 10, whose median (MAD) is 1.
    # 30: z = 0.6745 * 20 / 1 = 13.5; 0: z = -6.7; 11 and 9: 0.67 each (and only 10 % off
    # the median, under the 25 % floor).
    found = _exact_outliers("s", _values("s", [10, 11, 9, 10.5, 9.5, 30, 0]))
    assert {(o.replica, o.reason.split()[0]) for o in found} == {("r5", "above"), ("r6", "below")}
    thirty = next(o for o in found if o.replica == "r5")
    # The others' median: 10, 11, 9, 10.5, 9.5, 0 -> (9.5 + 10) / 2.
    assert thirty.fleet_median == 9.75


def test_with_every_other_replica_equal_any_difference_beyond_the_floor_is_an_outlier() -> None:
    found = _exact_outliers("restarts", _values("restarts", [0, 0, 0, 0, 1]))
    assert [o.replica for o in found] == ["r4"]
    assert "half the replicas or more at the median" in found[0].reason


def test_a_share_must_also_differ_by_ten_points() -> None:
    """6 % of TTFT spent queueing against 4 % is the same behaviour, however tight the
    others are; 30 % against 4 % is not."""
    shares = [0.043, 0.044, 0.043, 0.062]
    assert _exact_outliers("queue_share_of_ttft", _values("q", shares, "ratio")) == []
    (far,) = _exact_outliers("queue_share_of_ttft", _values("q", [*shares[:3], 0.30], "ratio"))
    assert far.replica == "r3"
    # A percent the same way, and a number with another unit by its relative rule alone.
    assert _exact_outliers("gpu", _values("g", [40.0, 40.5, 39.5, 40.2, 48.0], "percent")) == []
    assert _exact_outliers("rate", _values("r", [0.043, 0.044, 0.043, 0.062], "tokens/s"))


def test_fewer_than_four_replicas_are_not_judged() -> None:
    assert _exact_outliers("s", _values("s", [1, 1, 100])) == []


def test_a_quantile_is_an_outlier_only_when_its_bucket_lies_above_the_others_and_it_is_far() -> (
    None
):
    def q(replica: str, value: float, lower: float, upper: float) -> ReplicaValue:
        return ReplicaValue(
            replica=replica,
            statistic="ttft_p50",
            value=value,
            unit="seconds",
            bounds=Bounds(lower=lower, upper=upper),
        )

    fleet = [q(f"r{k}", 0.045 + 0.001 * k, 0.04, 0.06) for k in range(6)]
    # One bucket up but close (0.062 against 0.047): above the median bucket, not far.
    near = q("near", 0.062, 0.06, 0.08)
    # Far by value but inside the median bucket: the bucket cannot tell it apart.
    same = ReplicaValue(replica="same", statistic="ttft_p50", value=0.0599, unit="seconds",
                        bounds=Bounds(lower=0.04, upper=0.06))  # fmt: skip
    slow = q("slow", 0.12, 0.1, 0.25)
    found = _quantile_outliers("ttft_p50", [*fleet, near, same, slow])
    assert [o.replica for o in found] == ["slow"]
    assert found[0].bounds == Bounds(lower=0.1, upper=0.25)
    assert "[0.04, 0.06]" in found[0].reason


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    faults = (
        # From before the warm-up to after the window: the whole window.
        {"kind": "host_starved", "replica": SLOW, "start": "-3m", "end": "11m", "host_ms": 60},
        {"kind": "gpus_read_idle", "replica": IDLE, "start": "-3m", "end": "11m"},
        {"kind": "restart", "replica": RESTARTED, "at": "5m", "downtime": 40},
    )
    return simulated(fleet_scenario(64, faults=faults), tmp_path_factory.mktemp("fleet") / "d")


@pytest.fixture(scope="module")
def source(fleet: Path) -> DatasetSource:
    return DatasetSource(fleet)


@pytest.fixture(scope="module")
def report(source: DatasetSource) -> Report:
    return obs.report(source)


def _pod(source: DatasetSource, replica: str) -> str:
    """The pod of ``replica`` (requests.csv's name): pods sorted follow the replicas' order."""
    dep = deployment(source, "FLEET")
    running = Selector("vllm:num_requests_running", tuple(dep.matchers))
    pods = sorted({labels["pod"] for labels in source.series(running, window_of(source))})
    return pods[dep.replicas.index(replica)]


def test_the_slow_idle_and_restarted_replicas_are_named_and_nothing_else(
    source: DatasetSource, report: Report
) -> None:
    slow, idle, restarted = (_pod(source, r) for r in (SLOW, IDLE, RESTARTED))
    found = report.fleet["FLEET"].outliers
    assert {o.replica for o in found} == {slow, idle, restarted}
    assert {o.statistic for o in found if o.replica == idle} == {"gpu_utilization"}
    assert {(o.statistic, o.value) for o in found if o.replica == restarted} == {("restarts", 1)}
    assert {"ttft_p50", "ttft_mean", "e2e_mean"} <= {
        o.statistic for o in found if o.replica == slow
    }
    gpu = next(o for o in found if o.replica == idle)
    assert gpu.value == 0.0
    assert gpu.fleet_median > 30


def test_the_slow_replicas_ttft_p50_holds_its_own_true_median(
    source: DatasetSource, report: Report
) -> None:
    dep, requests = deployment(source, "FLEET"), requests_of(source)
    offsets = scrapes(source, dep, window_of(source))[dep.replicas.index(SLOW)]
    rows = requests[requests["replica"] == SLOW]
    # TTFT is observed at the first token: those between the replica's first and last scrape.
    keep = (rows["first_token"] > offsets[0]) & (rows["first_token"] <= offsets[-1])
    ttft = rows.loc[keep & rows["ttft"].notna(), "ttft"].to_numpy(np.float64)
    statistics = report.deployments[0].results["replicas"].measurements()
    pod = _pod(source, SLOW)
    p50 = next(m for m in statistics if m.statistic == f"ttft_p50[{pod}]")
    mean = next(m for m in statistics if m.statistic == f"ttft_mean[{pod}]")
    truth = true_quantile(ttft, 0.5)
    assert p50.bounds is not None
    assert p50.bounds.lower < truth <= p50.bounds.upper
    # The exact mean: the change of _sum over the change of _count, the same requests.
    assert mean.value == pytest.approx(float(ttft.mean()), rel=EXACT)
    # The deployment's merged median lies lower: the slow replica is 1 of 64.
    merged = report.deployments[0].results["latency"].measurements()
    whole = next(m for m in merged if m.statistic == "ttft_p50")
    assert whole.bounds is not None
    assert whole.bounds.upper <= p50.bounds.lower


def test_the_summary_names_both_and_report_json_lists_them(
    source: DatasetSource, report: Report
) -> None:
    slow, idle = _pod(source, SLOW), _pod(source, IDLE)
    found = [c for c in report.conclusions.entries if c.kind == "replica_outliers"]
    assert len(found) == 1
    assert slow in found[0].text
    assert idle in found[0].text
    assert len(found[0].text) < 900
    data = json.loads(json.dumps(report_json(report)))
    listed = data["deployments"][0]["outliers"]
    assert {slow, idle} <= {o["replica"] for o in listed}
    p50 = next(o for o in listed if o["replica"] == slow and o["statistic"] == "ttft_p50")
    assert p50["bounds"]["lower"] < p50["value"] <= p50["bounds"]["upper"]
    frame = report.replicas
    assert len(frame[(frame.statistic == "ttft_p50")]) == 64
    assert {slow, idle} <= set(frame[frame.outlier].replica)


def test_the_body_stays_short(report: Report) -> None:
    text = to_markdown(sections(report))
    body = text[: text.index("## Appendix")].splitlines()
    assert len(body) < 400
    assert max(len(line) for line in body) <= 1500
