"""Host CPU and PCIe series of the simulator, and the host_starved / transfer_bound faults.

``gpu-boundaries`` injects, per replica, a CPU-throttled container, PCIe
copies at the link's rate and a saturated API-server process;
``gpu-boundaries-healthy`` is the same fleet without faults. Each fault must
show in the data as its kind says: GPUs idle while requests run, with the
host or the link at its limit. Expected numbers come from the scenario files
(fault windows, limits, shares) and the ground-truth requests.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml

from inference_obs.metrics import dcgm, host, vllm
from inference_obs.samples import Floats, Series
from inference_obs.simulate import ScenarioError, Simulation, parse_scenario, run_scenario
from inference_obs.simulate.faults import HostStarved, Stall, TransferBound
from inference_obs.simulate.scenario import load_scenario
from inference_obs.simulate.transfers import TOKEN_ID_BYTES

from .conftest import SMALL

FAULTY, HEALTHY = "gpu-boundaries", "gpu-boundaries-healthy"
#: GPU readings average the collect interval before them: skip one at a fault's edges.
EDGE_S = 30.0


@pytest.fixture(scope="module")
def faulty() -> Simulation:
    return run_scenario(FAULTY)


@pytest.fixture(scope="module")
def healthy() -> Simulation:
    return run_scenario(HEALTHY)


def _pod(sim: Simulation, replica: str) -> str:
    spec = sim.scenario.deployment_of(replica)
    return spec.pod(spec.replicas.index(replica))


def _select(sim: Simulation, name: str, **labels: str) -> list[Series]:
    return [
        s
        for s in sim.series
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def _offsets(sim: Simulation, series: Series) -> Floats:
    out: Floats = series.timestamps - sim.window_start_ms / 1000.0
    return out


def _gauge(sim: Simulation, name: str, start: float, end: float, **labels: str) -> Floats:
    """Samples of every matching series taken in ``[start, end]`` (window offsets)."""
    picked = [
        s.values[(_offsets(sim, s) >= start) & (_offsets(sim, s) <= end)]
        for s in _select(sim, name, **labels)
    ]
    assert picked, (name, labels)
    return np.concatenate(picked)


def _rate(sim: Simulation, series: Series, start: float, end: float) -> float:
    """Per-second increase between the first and last sample in ``[start, end]`` (no reset)."""
    at = _offsets(sim, series)
    inside = np.flatnonzero((at >= start) & (at <= end))
    assert inside.size >= 2
    first, last = inside[0], inside[-1]
    return float((series.values[last] - series.values[first]) / (at[last] - at[first]))


def _one(sim: Simulation, name: str, **labels: str) -> Series:
    (series,) = _select(sim, name, **labels)
    return series


def test_host_and_pcie_series_are_opt_in() -> None:
    sim = run_scenario(SMALL)
    new = {f.name for f in host.FAMILIES} | {
        dcgm.PROF_PCIE_RX_BYTES.name,
        dcgm.PROF_PCIE_TX_BYTES.name,
    }
    assert not new & {s.name for s in sim.series}


def test_throttled_host_starves_the_gpus(faulty: Simulation) -> None:
    (fault,) = [
        f for f in faulty.scenario.faults if isinstance(f, HostStarved) and f.cause == "throttled"
    ]
    pod = _pod(faulty, fault.replica)
    profile = faulty.scenario.deployment_of(fault.replica).host
    assert profile is not None
    inside = (fault.start + EDGE_S, fault.end)
    duty = _gauge(faulty, dcgm.PROF_GR_ENGINE_ACTIVE.name, *inside, pod=pod)
    assert 0.05 < duty.mean() < 0.5
    assert (_gauge(faulty, vllm.NUM_REQUESTS_RUNNING.name, *inside, pod=pod) > 0).all()
    usage = _one(faulty, host.CONTAINER_CPU_USAGE.name, pod=pod, container="vllm")
    assert _rate(faulty, usage, *inside) == pytest.approx(profile.cpu_limit_cores, rel=0.01)
    periods = _rate(faulty, _one(faulty, host.CONTAINER_CPU_CFS_PERIODS.name, pod=pod), *inside)
    throttled = _one(faulty, host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.name, pod=pod)
    assert periods == pytest.approx(1.0 / profile.cfs_period_s, rel=0.01)
    assert _rate(faulty, throttled, *inside) / periods == pytest.approx(
        fault.throttled_share, abs=0.01
    )
    before = (60.0, fault.start)
    assert _rate(faulty, throttled, *before) == 0.0
    assert _rate(faulty, usage, *before) < profile.cpu_limit_cores / 2
    assert (
        _gauge(
            faulty, dcgm.PROF_GR_ENGINE_ACTIVE.name, before[0] + EDGE_S, before[1], pod=pod
        ).mean()
        > 0.8
    )


def test_saturated_server_process_starves_the_gpus(faulty: Simulation) -> None:
    (fault,) = [
        f for f in faulty.scenario.faults if isinstance(f, HostStarved) and f.cause == "saturated"
    ]
    pod = _pod(faulty, fault.replica)
    inside = (fault.start + EDGE_S, fault.end)
    assert _gauge(faulty, dcgm.PROF_GR_ENGINE_ACTIVE.name, *inside, pod=pod).mean() < 0.5
    process = _one(faulty, host.PROCESS_CPU_SECONDS.name, pod=pod)
    # A process held by its GIL: just under one core, and far above its usual load.
    assert 0.93 < _rate(faulty, process, *inside) <= 1.0
    assert _rate(faulty, process, 60.0, fault.start) < 0.5
    throttled = _one(faulty, host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.name, pod=pod)
    assert _rate(faulty, throttled, *inside) == 0.0


def test_transfer_bound_fills_the_link_while_the_gpus_wait(faulty: Simulation) -> None:
    (fault,) = [f for f in faulty.scenario.faults if isinstance(f, TransferBound)]
    pod = _pod(faulty, fault.replica)
    link = faulty.scenario.deployment_of(fault.replica).gpu.pcie_bytes_per_second
    inside = (fault.start + EDGE_S, fault.end)
    rx = _gauge(faulty, dcgm.PROF_PCIE_RX_BYTES.name, *inside, pod=pod)
    duty = _gauge(faulty, dcgm.PROF_GR_ENGINE_ACTIVE.name, *inside, pod=pod)
    assert rx.mean() > 0.7 * link
    assert duty.mean() < 0.5
    # Each step computes, then copies: the two shares of the time add up to one.
    assert duty.mean() + rx.mean() / link == pytest.approx(1.0, abs=0.03)
    assert _rate(faulty, _one(faulty, host.PROCESS_CPU_SECONDS.name, pod=pod), *inside) < 0.5
    throttled = _one(faulty, host.CONTAINER_CPU_CFS_THROTTLED_PERIODS.name, pod=pod)
    assert _rate(faulty, throttled, *inside) == 0.0


def test_a_stall_idles_gpus_host_and_link(faulty: Simulation) -> None:
    (fault,) = [f for f in faulty.scenario.faults if isinstance(f, Stall)]
    pod = _pod(faulty, fault.replica)
    inside = (fault.start + EDGE_S, fault.end)
    assert (_gauge(faulty, dcgm.PROF_GR_ENGINE_ACTIVE.name, *inside, pod=pod) == 0).all()
    assert _gauge(faulty, dcgm.PROF_PCIE_RX_BYTES.name, *inside, pod=pod).max() == 0
    usage = _one(faulty, host.CONTAINER_CPU_USAGE.name, pod=pod, container="vllm")
    assert _rate(faulty, usage, *inside) < 0.5


def test_pcie_carries_the_steps_prompts_and_kv_blocks(healthy: Simulation) -> None:
    spec = healthy.scenario.deployments[0]
    gpus = spec.hardware.gpus_per_replica
    start, end = 120.0, 1080.0
    table = healthy.requests
    for r, run in enumerate(healthy.engines[spec.name]):
        steps = run.iteration_tokens
        in_window = (steps.time > start) & (steps.time <= end)
        rows = table[
            (table["replica"] == spec.replicas[r]) & table["scheduled"].between(start, end, "right")
        ]
        expected = (
            steps.weight[in_window].sum() * spec.gpu.pcie_rx_bytes_per_step
            + rows["prompt_tokens"].sum() * TOKEN_ID_BYTES
            + rows["external_hit_tokens"].sum() * spec.gpu.kv_bytes_per_token / gpus
        ) / (end - start)
        assert rows["external_hit_tokens"].sum() > 0
        measured = _gauge(healthy, dcgm.PROF_PCIE_RX_BYTES.name, start, end, pod=spec.pod(r))
        assert measured.mean() == pytest.approx(expected, rel=0.05), spec.replicas[r]
        tx = _gauge(healthy, dcgm.PROF_PCIE_TX_BYTES.name, start, end, pod=spec.pod(r))
        tx_expected = (
            steps.weight[in_window].sum() * spec.gpu.pcie_tx_bytes_per_step / (end - start)
        )
        assert tx.mean() == pytest.approx(tx_expected, rel=0.05)


def test_pod_cgroup_repeats_its_container(healthy: Simulation) -> None:
    spec = healthy.scenario.deployments[0]
    usage = _select(healthy, host.CONTAINER_CPU_USAGE.name, pod=spec.pod(0))
    assert len(usage) == 2
    pod_level = next(s for s in usage if "container" not in s.labels)
    container = next(s for s in usage if s.labels.get("container") == "vllm")
    assert _rate(healthy, pod_level, 0, 1200) == pytest.approx(
        _rate(healthy, container, 0, 1200) + 0.001, rel=1e-3
    )
    quota = _one(healthy, host.CONTAINER_SPEC_CPU_QUOTA.name, pod=spec.pod(0))
    period = _one(healthy, host.CONTAINER_SPEC_CPU_PERIOD.name, pod=spec.pod(0))
    assert spec.host is not None
    assert (quota.values / period.values == spec.host.cpu_limit_cores).all()


def test_node_cpus_add_up_and_carry_the_containers(healthy: Simulation) -> None:
    spec = healthy.scenario.deployments[0]
    assert spec.host is not None
    node = "chat-node-01"
    cpus = _select(healthy, host.NODE_CPU_SECONDS.name, node=node)
    assert len(cpus) == spec.host.node_cpus * len(host.CPU_MODES)
    total = sum(_rate(healthy, s, 0, 1200) for s in cpus)
    # Counters are kept to 0.01 s: 64 series over 1200 s add up to 1e-4 relative.
    assert total == pytest.approx(spec.host.node_cpus, rel=1e-4)
    busy = sum(_rate(healthy, s, 0, 1200) for s in cpus if s.labels["mode"] != "idle")
    container = _one(healthy, host.CONTAINER_CPU_USAGE.name, pod=spec.pod(0), container="vllm")
    # Other work on the node plus the one replica's container; iowait is a sliver of idle time.
    assert busy == pytest.approx(
        spec.host.node_other_cores + _rate(healthy, container, 0, 1200), rel=0.02
    )


def _variant(name: str, **changes: Any) -> str:
    data = yaml.safe_load(load_scenario(name).model_dump_json())
    data.update(changes)
    return yaml.safe_dump(data)


def test_a_restart_resets_process_and_container_counters() -> None:
    restart = {"kind": "restart", "replica": "B-02", "at": 600.0, "downtime": 30.0}
    sim = run_scenario(parse_scenario(_variant(HEALTHY, faults=[restart]), "restart.yaml"))
    for name, labels in (
        (host.PROCESS_CPU_SECONDS.name, {}),
        (host.CONTAINER_CPU_USAGE.name, {"container": "vllm"}),
        (host.CONTAINER_CPU_CFS_PERIODS.name, {}),
    ):
        series = _one(sim, name, pod="chat-02", **labels)
        drops = np.flatnonzero(np.diff(series.values) < 0)
        assert drops.size == 1, name
        assert 600.0 <= _offsets(sim, series)[drops[0] + 1] <= 660.0
    pod_level = next(
        s
        for s in _select(sim, host.CONTAINER_CPU_USAGE.name, pod="chat-02")
        if "container" not in s.labels
    )
    assert (np.diff(pod_level.values) >= 0).all()


def test_host_starved_needs_a_host_profile() -> None:
    data = yaml.safe_load(_variant(FAULTY))
    del data["deployments"][0]["host"]
    with pytest.raises(ScenarioError, match=r"faults\[0\]: host_starved on B-01.*host profile"):
        parse_scenario(yaml.safe_dump(data), "no-host.yaml")


def test_fault_windows_must_be_ordered() -> None:
    bad = {"kind": "transfer_bound", "replica": "B-01", "start": 300, "end": 200, "transfer_ms": 5}
    with pytest.raises(ScenarioError, match=r"faults\[0\]: .*end 200.0 s is not after start"):
        parse_scenario(_variant(HEALTHY, faults=[bad]), "bad.yaml")
