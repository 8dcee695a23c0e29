"""boundaries(): injected host starvation, PCIe saturation and stalls found and told apart.

``gpu-boundaries`` and its fault-free twin ``gpu-boundaries-healthy`` are
simulated with three fresh seeds each (about 2 s a run). What each replica
should show comes from the scenario's fault schedule (which replica, when,
which kind) and from the ground-truth ``requests.csv``, never from the code
under test:

- a ``host_starved`` fault is a boundary interval attributed to the host, a
  ``transfer_bound`` one to transfer, a ``stall`` (nothing on the host or the
  link) is unexplained, and no sustained interval lies outside a fault;
- every row the queueing analysis classifies ``starved`` or ``inconsistent``
  lies in a boundary interval (the two sections agree), a short one listed
  but not counted toward the reading;
- the healthy fleet has no sustained interval and reads healthy, and the same
  fleet with too few sequence slots (requests queue while the GPUs compute)
  reads saturated;
- the duty cycle is the share of time requests were running (the simulated
  GPUs compute whenever they are), and tokens per GPU-hour are the tokens the
  engines produced over the declared GPU-hours.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from inference_obs.analyses.boundaries.host import counter_rates, nearest_mean, nearest_total
from inference_obs.analyses.boundaries.stages import (
    HEALTHY_WITH_INTERVALS,
    BoundariesResult,
    BoundariesSettings,
    BoundaryCause,
    CapacityReading,
    boundaries,
)
from inference_obs.analyses.queueing import QueueClass, queueing
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import dcgm, host
from inference_obs.reading.measurement import Status
from inference_obs.simulate import parse_scenario, simulate
from inference_obs.simulate.faults import HostStarved, Stall, TransferBound
from inference_obs.simulate.scenario import Scenario, load_scenario
from inference_obs.source.dataset.source import DatasetSource

from .ground_truth import deployment, requests_of, window_of

SEEDS = (11, 23, 37)
FAULTY, HEALTHY = "gpu-boundaries", "gpu-boundaries-healthy"
BUNDLED = Path(__file__).parents[2] / "datasets" / "pro5000-vs-h20"
#: An interval may outlast its fault by the GPU readings' lag: one collect
#: interval, one scrape interval and the alignment tolerance (15 s each).
LAG_S = 45.0
CAUSES = {
    HostStarved: BoundaryCause.HOST,
    TransferBound: BoundaryCause.TRANSFER,
    Stall: BoundaryCause.UNEXPLAINED,
}


def _run(name: str, seed: int, root: Path) -> tuple[DatasetSource, BoundariesResult]:
    source = DatasetSource(simulate(name, root / f"{name}-{seed}", seed=seed))
    dep = source.dataset.manifest.deployments[0]
    return source, boundaries(source, dep, window_of(source))


@pytest.fixture(scope="module", params=SEEDS, ids=lambda s: f"seed{s}")
def faulty(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DatasetSource, BoundariesResult]:
    return _run(FAULTY, request.param, tmp_path_factory.mktemp("faulty"))


@pytest.fixture(scope="module", params=SEEDS, ids=lambda s: f"seed{s}")
def healthy(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[DatasetSource, BoundariesResult]:
    return _run(HEALTHY, request.param, tmp_path_factory.mktemp("healthy"))


def _pod(scenario: Scenario, replica: str) -> str:
    spec = scenario.deployment_of(replica)
    return spec.pod(spec.replicas.index(replica))


def _offset(source: DatasetSource, when: object) -> float:
    assert hasattr(when, "timestamp")
    return float(when.timestamp()) - window_of(source).start_s


def test_each_fault_is_found_and_attributed(faulty: tuple[DatasetSource, BoundariesResult]) -> None:
    source, result = faulty
    scenario = load_scenario(FAULTY)
    interval = scenario.scrape.interval
    for fault in scenario.faults:
        assert isinstance(fault, HostStarved | TransferBound | Stall)
        pod = _pod(scenario, fault.replica)
        found = [
            i
            for i in result.intervals
            if i.replica.endswith(pod)
            and _offset(source, i.end) >= fault.start
            and _offset(source, i.start) <= fault.end + LAG_S
        ]
        assert found, (fault, result.intervals)
        assert {i.cause for i in found} == {CAUSES[type(fault)]}, [i.reason for i in found]
        covered = sum(i.samples for i in found)
        assert covered >= 0.6 * (fault.end - fault.start) / interval, (fault, covered)


def test_no_sustained_interval_outside_the_faults(
    faulty: tuple[DatasetSource, BoundariesResult],
) -> None:
    source, result = faulty
    scenario = load_scenario(FAULTY)
    for found in result.intervals:
        if not found.sustained:  # one row the queue table names: see the agreement test
            assert found.samples < BoundariesSettings().min_samples, found
            continue
        windows = [
            (f.start, f.end + LAG_S)
            for f in scenario.faults
            if isinstance(f, HostStarved | TransferBound | Stall)
            and found.replica.endswith(_pod(scenario, f.replica))
        ]
        start, end = _offset(source, found.start), _offset(source, found.end)
        assert any(a <= start and end <= b for a, b in windows), found


def test_evidence_matches_the_injected_fault(
    faulty: tuple[DatasetSource, BoundariesResult],
) -> None:
    source, result = faulty
    scenario = load_scenario(FAULTY)
    spec = scenario.deployments[0]
    assert spec.host is not None
    for fault in scenario.faults:
        assert isinstance(fault, HostStarved | TransferBound | Stall)
        pod = _pod(scenario, fault.replica)
        mine = [
            i
            for i in result.intervals
            if i.replica.endswith(pod) and fault.start <= _offset(source, i.start) <= fault.end
        ]
        for found in mine:
            if isinstance(fault, HostStarved) and fault.cause == "throttled":
                assert found.throttled_ratio == pytest.approx(fault.throttled_share, abs=0.02)
                assert found.container_cpu_cores == pytest.approx(
                    spec.host.cpu_limit_cores, rel=0.02
                )
                assert found.cpu_limit_cores == spec.host.cpu_limit_cores
            elif isinstance(fault, HostStarved):
                assert found.server_cpu_cores is not None
                assert found.server_cpu_cores >= 0.9
                assert found.throttled_ratio == 0.0
            elif isinstance(fault, TransferBound):
                assert found.pcie_limit_share is not None
                assert found.pcie_limit_share >= 0.7
                assert found.server_cpu_cores is not None
                assert found.server_cpu_cores < 0.5
            assert found.duty < 0.5
            assert found.max_running > 0


def test_every_replica_reads_starved(faulty: tuple[DatasetSource, BoundariesResult]) -> None:
    _, result = faulty
    assert result.reading is CapacityReading.STARVED
    assert result.verdict == "GPUs starved — re-place work before adding GPUs"
    for replica in result.replicas:
        assert replica.reading is CapacityReading.STARVED, replica.reason
        assert replica.boundary_share.value is not None
        assert replica.boundary_share.value >= 0.1


def _busy_share(requests: pd.DataFrame, replica: str, duration: float) -> float:
    """Ground truth: share of the window in which the replica had a request running."""
    rows = requests[(requests["replica"] == replica) & requests["scheduled"].notna()]
    spans = sorted(
        (max(a, 0.0), min(b, duration))
        for a, b in zip(rows["scheduled"], rows["finish"].fillna(duration), strict=True)
        if b > 0 and a < duration
    )
    covered, reach = 0.0, 0.0
    for a, b in spans:
        if b > reach:
            covered += b - max(a, reach)
            reach = b
    return covered / duration


def _on_idle_gpus(source: DatasetSource) -> list[tuple[str, float, float]]:
    """(replica, start, end) of each row queueing classifies starved or inconsistent."""
    dep = source.dataset.manifest.deployments[0]
    found = queueing(source, dep, window_of(source)).intervals
    on_idle = (QueueClass.STARVED, QueueClass.INCONSISTENT)
    return [
        (i.replica, i.start.timestamp(), i.end.timestamp())
        for i in found
        if i.classification in on_idle
    ]


def _agrees_with_queueing(source: DatasetSource, result: BoundariesResult) -> None:
    """Every starved or inconsistent queueing interval lies inside a boundary interval."""
    for replica, start, end in _on_idle_gpus(source):
        holding = [
            i
            for i in result.intervals
            if i.replica == replica and i.start.timestamp() <= start and end <= i.end.timestamp()
        ]
        assert holding, (replica, start, end, result.intervals)
        assert {"starved", "inconsistent"} & {c for i in holding for c in i.queue_classes}


def test_boundaries_name_every_row_queueing_finds_on_idle_gpus(
    faulty: tuple[DatasetSource, BoundariesResult],
    healthy: tuple[DatasetSource, BoundariesResult],
) -> None:
    for source, result in (faulty, healthy):
        _agrees_with_queueing(source, result)
        # What is short of min_samples rows is listed, and queueing named a row of it.
        for found in result.intervals:
            if not found.sustained:
                assert found.samples < BoundariesSettings().min_samples
                assert {"starved", "inconsistent"} & set(found.queue_classes), found


def test_healthy_fleet_has_no_findings(healthy: tuple[DatasetSource, BoundariesResult]) -> None:
    source, result = healthy
    requests = requests_of(source)
    assert float(requests["queue_time"].max()) < 0.5  # ground truth: nothing ever queued
    assert [i for i in result.intervals if i.sustained] == []
    assert result.reading is CapacityReading.HEALTHY
    # Single rows where requests ran while every GPU read 0 (the GPU readings lag the first
    # request after a quiet spell) are listed, and the reading never claims there are none.
    if result.intervals:
        assert result.verdict == HEALTHY_WITH_INTERVALS
        assert "no boundary findings" not in result.reason
        assert f"{len(result.intervals)} interval" in result.reason
    spec = load_scenario(HEALTHY).deployments[0]
    duration = window_of(source).seconds
    for replica, measured in zip(spec.replicas, result.replicas, strict=True):
        assert measured.replica.endswith(spec.pod(spec.replicas.index(replica)))
        assert measured.reading is CapacityReading.HEALTHY
        assert measured.boundary_share.value == 0.0
        assert measured.duty_cycle.value is not None
        assert measured.duty_cycle.value == pytest.approx(
            _busy_share(requests, replica, duration), abs=0.02
        )


def test_tokens_per_gpu_hour_from_the_engines_output(
    healthy: tuple[DatasetSource, BoundariesResult],
) -> None:
    source, result = healthy
    aggregates = source.dataset.aggregates
    assert aggregates is not None
    generated = aggregates["realised"]["FLEET"]["generated_tokens"]
    dep = deployment(source, "FLEET")
    gpu_hours = dep.hardware.gpus_per_replica * len(dep.replicas) * window_of(source).seconds / 3600
    # increase() extrapolates each replica's counter to the window's edges: ~1 %.
    assert result.tokens_per_gpu_hour.value == pytest.approx(generated / gpu_hours, rel=0.02)
    for replica in result.replicas:
        tokens = replica.output_tokens.value
        assert tokens is not None
        per_hour = dep.hardware.gpus_per_replica * window_of(source).seconds / 3600
        assert replica.tokens_per_gpu_hour.value == pytest.approx(tokens / per_hour, rel=1e-12)


def test_without_profiling_fields_duty_falls_back_and_transfer_is_unexplained(
    tmp_path: Path,
) -> None:
    data = yaml.safe_load(load_scenario(FAULTY).model_dump_json())
    data["scrape"]["gpu_families"] = [dcgm.GPU_UTIL.name]
    data["faults"] = [f for f in data["faults"] if f["kind"] == "transfer_bound"]
    scenario = parse_scenario(yaml.safe_dump(data), "util-only.yaml")
    source = DatasetSource(simulate(scenario, tmp_path / "d", seed=SEEDS[0]))
    result = boundaries(source, deployment(source, "FLEET"), window_of(source))
    assert result.duty_family == dcgm.GPU_UTIL.name
    (found,) = [i for i in result.intervals if i.sustained]
    assert found.cause is BoundaryCause.UNEXPLAINED
    assert found.pcie_limit_share is None
    assert "pcie_limit_share" in found.reason
    rx = result.replicas[1].pcie_rx_bytes_per_second
    assert rx.status is Status.NO_DATA
    assert rx.value is None
    assert any(dcgm.PROF_PCIE_RX_BYTES.name in a.message for a in rx.annotations)


def test_a_queue_on_busy_gpus_reads_saturated(tmp_path: Path) -> None:
    # The healthy fleet with room for only four running requests per engine: requests queue
    # while the GPUs compute, and nothing waits on the host or the link.
    data = yaml.safe_load(load_scenario(HEALTHY).model_dump_json())
    data["deployments"][0]["config"]["max_num_seqs"] = 4
    scenario = parse_scenario(yaml.safe_dump(data), "four-seqs.yaml")
    source = DatasetSource(simulate(scenario, tmp_path / "d", seed=SEEDS[0]))
    requests = requests_of(source)
    result = boundaries(source, deployment(source, "FLEET"), window_of(source))
    assert [i for i in result.intervals if i.sustained] == []
    assert result.reading is CapacityReading.SATURATED
    for name, replica in zip(scenario.deployments[0].replicas, result.replicas, strict=True):
        queued = requests.loc[requests["replica"] == name, "queue_time"]
        assert float((queued > 0.5).mean()) > 0.1, name  # ground truth: a real queue
        assert replica.reading is CapacityReading.SATURATED, replica.reason
        assert replica.queued_share.value is not None
        assert replica.queued_share.value >= 0.1


def test_missing_host_families_are_no_data_never_zero() -> None:
    source = DatasetSource(BUNDLED)
    result = boundaries(source, deployment(source, "PRO"), window_of(source))
    (replica,) = result.replicas
    for m, family in (
        (replica.server_cpu_cores, host.PROCESS_CPU_SECONDS),
        (replica.container_cpu_cores, host.CONTAINER_CPU_USAGE),
        (replica.throttled_ratio, host.CONTAINER_CPU_CFS_PERIODS),
    ):
        assert m.status is Status.NO_DATA
        assert m.value is None
        assert any(family.name in a.message for a in m.annotations), m.annotations
    assert replica.duty_cycle.ok


def test_frame_and_table(faulty: tuple[DatasetSource, BoundariesResult]) -> None:
    _, result = faulty
    frame = result.to_frame()
    assert frame["key"].is_unique
    assert set(frame["analysis"]) == {"boundaries"}
    assert (frame["promql"] != "").all()
    found = result.intervals_frame()
    assert len(found) == len(result.intervals)
    assert {"cause", "throttled_ratio", "pcie_limit_share"} <= set(found.columns)
    assert any(
        q.startswith("container_cpu_cfs_throttled_periods_total{") and 'container!=""' in q
        for q in result.evidence_promql
    )
    assert any(q.startswith("node_cpu_seconds_total{node=~") for q in result.evidence_promql)
    html = result._repr_html_()
    assert "re-place work before adding GPUs" in html
    assert html.count("<tr>") >= len(frame) + len(found)


def test_a_deployment_without_series_is_insufficient_data() -> None:
    source = DatasetSource(BUNDLED)
    nothing = deployment(source, "PRO").model_copy(update={"selector": {"pod": "~no-such-.*"}})
    result = boundaries(source, nothing, window_of(source))
    assert result.reading is CapacityReading.INSUFFICIENT_DATA
    assert result.replicas == ()
    assert result.intervals == ()
    for m in (result.duty_cycle, result.tokens_per_gpu_hour):
        assert m.status is Status.NO_DATA
        assert m.value is None
    assert any("DCGM_FI_DEV_GPU_UTIL" in a.message for a in result.duty_cycle.annotations)
    assert any(
        "vllm:num_requests_waiting" in a.message for a in result.tokens_per_gpu_hour.annotations
    )


def test_settings_default_to_the_lines_drawn_before_they_were_settings() -> None:
    assert BoundariesSettings().model_dump() == {
        "idle_below": 0.5,
        "min_samples": 2,
        "process_cores": 0.9,
        "throttled_ratio": 0.25,
        "limit_share": 0.95,
        "node_busy_ratio": 0.95,
        "pcie_share": 0.7,
        "starved_share": 0.1,
        "saturated_duty": 0.85,
        "queued_share": 0.1,
        "pcie_limit_bytes_per_second": 5.0e10,
        "tolerance_s": None,
    }
    assert boundaries.settings is BoundariesSettings


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("pcie_limit_bytes_per_second", 0),
        ("idle_below", 1.5),
        ("min_samples", 0),
        ("tolerance_s", -1.0),
        ("idle_threshold", 0.5),  # not a setting of this analysis
    ],
)
def test_bad_settings_are_refused_naming_them(setting: str, value: float) -> None:
    source = DatasetSource(BUNDLED)
    dep = deployment(source, "PRO")
    overrides: dict[str, Any] = {setting: value}
    with pytest.raises(ConfigurationError, match=rf"boundaries\.{setting}"):
        boundaries(source, dep, window_of(source), **overrides)


def test_a_narrower_link_attributes_to_transfer_what_a_wider_one_leaves(
    faulty: tuple[DatasetSource, BoundariesResult],
) -> None:
    source, result = faulty
    dep = source.dataset.manifest.deployments[0]
    # Half the link rate doubles every interval's share of it: the transfer faults stay
    # transfer, and no interval changes place (the rows and the duty cycle do not move).
    narrower = boundaries(source, dep, window_of(source), pcie_limit_bytes_per_second=2.5e10)
    assert [(i.start, i.end) for i in narrower.intervals] == [
        (i.start, i.end) for i in result.intervals
    ]
    for wide, narrow in zip(result.intervals, narrower.intervals, strict=True):
        if wide.pcie_limit_share is not None:
            assert narrow.pcie_limit_share == pytest.approx(2 * wide.pcie_limit_share)
    # A link no transfer comes near: what was transfer is unexplained (nothing on the host
    # crossed its line in those faults), every other interval keeps its cause.
    wider = boundaries(source, dep, window_of(source), pcie_limit_bytes_per_second=1e15)
    assert BoundaryCause.TRANSFER in {i.cause for i in result.intervals}
    for before, after in zip(result.intervals, wider.intervals, strict=True):
        moved = BoundaryCause.UNEXPLAINED if before.cause is BoundaryCause.TRANSFER else None
        assert after.cause is (moved or before.cause), (before.reason, after.reason)


def test_counter_rates_follow_segments_and_resets() -> None:
    # 0, 30, 60 then a restart to 5, then 35: 1/s, 1/s, a reset (5 over 30 s), 1/s.
    times = np.array([0, 30_000, 60_000, 90_000, 120_000], dtype=np.int64)
    values = np.array([0.0, 30.0, 60.0, 5.0, 35.0])
    at = np.array([10_000, 75_000, 125_000, 200_000], dtype=np.int64)
    rates = counter_rates([(times, values)], at, tolerance_ms=15_000)
    assert rates[:3].tolist() == [1.0, 5.0 / 30.0, 1.0]
    assert math.isnan(rates[3])  # 80 s after the last sample: no evidence, not 0
    # Two series add up; a gauge aligns with each series' nearest sample.
    doubled = counter_rates([(times, values), (times, 2 * values)], at[:1], 15_000)
    assert doubled.tolist() == [3.0]
    gauges = [(times, np.array([1.0, 2, 3, 4, 5])), (times + 1000, np.array([3.0, 4, 5, 6, 7]))]
    assert nearest_mean(gauges, np.array([29_000]), 5_000).tolist() == [3.0]
    assert nearest_total(gauges, np.array([29_000]), 5_000).tolist() == [6.0]
