"""The host series of a replica: its server process, its container and its node's CPUs.

Only deployments with a ``host`` profile
(:class:`~inference_obs.simulate.engine_spec.HostProfile`) have them. CPU use
is built as rates (cores) on a one-second grid from the warm-up to the end of
the window, then integrated into the counters the scrapes read:

- the API-server process (``process_cpu_seconds_total``, scraped with vLLM's
  series): ``server_idle_cores``, plus tokenising each prompt when it
  arrives, detokenising each output token and ``step_cpu_ms`` per engine step;
- the server container (cAdvisor, labels of
  :func:`~inference_obs.simulate.labels.cadvisor_labels`): the process plus
  ``engine_cores`` for each engine while it steps, capped at the CPU limit.
  CFS periods elapse one per ``cfs_period_s``; periods are throttled only
  where demand passes the limit. The pod's own cgroup (no ``container``
  label) repeats the container's usage plus the pause container's;
- the node (node_exporter): ``node_other_cores`` plus its replicas'
  containers, spread over ``node_cpus`` logical CPUs and split by mode.

A ``host_starved`` fault pins the container at its limit with
``throttled_share`` of its periods throttled (cause ``throttled``), or the
API-server process at one core (``saturated``). A ``restart`` resets the
process's and the container's counters; nothing runs while the server is down.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from inference_obs.metrics import host
from inference_obs.samples import Floats, Series
from inference_obs.simulate.faults import HostStarved, Restart, of_kind
from inference_obs.simulate.labels import (
    Node,
    app_labels,
    cadvisor_labels,
    cadvisor_pod_labels,
    node_labels,
)
from inference_obs.simulate.scenario import Scenario
from inference_obs.simulate.scrape import ScrapePlan, Target
from inference_obs.simulate.trace import Activity, EngineRun, Records

__all__ = ["host_series"]

_GRID_S = 1.0  # rate resolution: far below any scrape interval
_SATURATED_CORES = 0.98  # a Python process bound by its GIL: just under one core
_PAUSE_CORES = 0.001  # the pod's pause container
_PAUSE_BYTES = 700e3  # its working set
_UPTIME_S = 3 * 86400.0  # node counters count from boot, days before the window
_NOISE = 0.03  # relative noise of each second's CPU use
# How busy and idle CPU time split over node_exporter's modes (nice and steal stay 0).
_BUSY_MODES = {"user": 0.72, "system": 0.22, "softirq": 0.04, "irq": 0.02}
_IDLE_MODES = {"idle": 0.995, "iowait": 0.005}
# Random streams of host noise (apart from traffic, scrapes and GPUs).
_HOST_STREAM, _NODE_STREAM = 202, 203


class _Grid:
    """One-second bins from the simulation's start to the window's end."""

    def __init__(self, begin: float, end: float) -> None:
        count = int(np.ceil((end - begin) / _GRID_S))
        self.edges: Floats = begin + _GRID_S * np.arange(count + 1, dtype=np.float64)
        self.mid: Floats = self.edges[:-1] + _GRID_S / 2

    def per_second(self, time: Floats, amount: Floats) -> Floats:
        """Amounts recorded at ``time``, summed per bin and divided by its length."""
        index = np.clip(np.searchsorted(self.edges, time, side="right") - 1, 0, self.mid.size - 1)
        out: Floats = np.bincount(index, weights=amount, minlength=self.mid.size) / _GRID_S
        return out

    def stepping(self, activity: Activity) -> Floats:
        """Share of each bin in which the engine steps (GPU busy or waiting within a step)."""
        total = activity.integral((activity.busy > 0).astype(np.float64), self.edges)
        out: Floats = np.diff(total) / _GRID_S
        return out

    def inside(self, start: float, end: float) -> Floats:
        """1 for bins whose middle lies in ``[start, end)``, else 0."""
        out: Floats = ((self.mid >= start) & (self.mid < end)).astype(np.float64)
        return out

    def counter(self, rates: Floats, at: Floats, resets: Floats) -> Floats:
        """Integral of ``rates`` up to each time ``at``, from the latest reset before it."""
        cumulative = np.concatenate(([0.0], np.cumsum(rates * _GRID_S)))
        since = np.concatenate(([-np.inf], np.sort(resets)))
        last = since[np.searchsorted(since, at, side="right") - 1]
        start = np.interp(np.maximum(last, self.edges[0]), self.edges, cumulative)
        out: Floats = np.interp(at, self.edges, cumulative) - start
        return out


def _amounts(records: Records, per_unit: float, *, steps: bool = False) -> tuple[Floats, Floats]:
    """Times and CPU-seconds of ``records``: per unit of value, or per step (its weight)."""
    amount = records.weight if steps else records.value * records.weight
    return records.time, amount * per_unit


class _ReplicaCpu:
    """CPU rates of one replica's server process and container, cores per bin."""

    def __init__(
        self,
        scenario: Scenario,
        d: int,
        r: int,
        table: pd.DataFrame,
        runs: list[EngineRun],
        grid: _Grid,
        rng: np.random.Generator,
    ) -> None:
        spec = scenario.deployments[d]
        profile = spec.host
        if profile is None:
            # An invariant, not input: host_series returns before this without a profile.
            raise ValueError(f"deployment {spec.name} has no host profile")
        replica = spec.replicas[r]
        self.resets: Floats = np.sort([f.at for f in of_kind(scenario.faults, Restart, replica)])
        self.up: Floats = np.ones(grid.mid.size)
        for restart in of_kind(scenario.faults, Restart, replica):
            self.up -= grid.inside(restart.at, restart.at + restart.downtime)
        rows = table[table["replica"] == replica]
        prompts = rows["prompt_tokens"].to_numpy(dtype=np.float64)
        work = grid.per_second(
            rows["arrival"].to_numpy(dtype=np.float64),
            prompts * profile.tokenize_cpu_ms_per_kilo_token / 1e6,
        )
        stepping = np.zeros(grid.mid.size)
        for run in (run for run in runs if run.replica == r):
            detokenise = profile.detokenize_cpu_ms_per_token / 1e3
            work += grid.per_second(*_amounts(run.generation_tokens, detokenise))
            steps = profile.step_cpu_ms / 1e3
            work += grid.per_second(*_amounts(run.iteration_tokens, steps, steps=True))
            stepping += grid.stepping(run.activity)
        noise = np.clip(1.0 + _NOISE * rng.standard_normal((2, grid.mid.size)), 0.0, None)
        process = (profile.server_idle_cores + work) * self.up * noise[0]
        engines = profile.engine_cores * stepping * noise[1]
        throttled = np.zeros(grid.mid.size)
        limit = profile.cpu_limit_cores
        for fault in of_kind(scenario.faults, HostStarved, replica):
            during = grid.inside(fault.start, fault.end) > 0
            if fault.cause == "saturated":
                process[during] = np.minimum(_SATURATED_CORES * noise[0][during], 1.0)
            else:
                # Demand beyond the quota: the container gets its limit and waits the rest.
                engines[during] = limit / (1.0 - fault.throttled_share)
                throttled[during] = fault.throttled_share
        demand = process + engines
        over = (demand > limit) & (throttled == 0)
        throttled[over] = 1.0 - limit / demand[over]
        self.process: Floats = process
        self.container: Floats = np.minimum(demand, limit)
        self.throttled: Floats = throttled * self.up


def _scraped(target: Target, start_ms: int) -> tuple[Floats, Floats]:
    """Successful scrapes of ``target``: offsets from the window start, and unix seconds."""
    at: Floats = target.seconds[target.up]
    stamps: Floats = (start_ms + target.ms[target.up]) / 1000.0
    return at, stamps


def _cadvisor(
    scenario: Scenario,
    d: int,
    node: Node,
    r: int,
    cpu: _ReplicaCpu,
    grid: _Grid,
    at: Floats,
    stamps: Floats,
    rng: np.random.Generator,
) -> Iterator[Series]:
    spec = scenario.deployments[d]
    profile = spec.host
    assert profile is not None
    own = cadvisor_labels(spec, node, r, scenario.name)
    pod = cadvisor_pod_labels(spec, node, r, scenario.name)
    period_us = profile.cfs_period_s * 1e6
    periods = cpu.up / profile.cfs_period_s
    memory = np.rint(profile.memory_working_set_bytes * (1.0 + 0.01 * rng.standard_normal(at.size)))
    counters = (
        (host.CONTAINER_CPU_USAGE, own, np.round(grid.counter(cpu.container, at, cpu.resets), 6)),
        (
            host.CONTAINER_CPU_USAGE,
            pod,
            np.round(grid.counter(cpu.container + _PAUSE_CORES, at, np.zeros(0)), 6),
        ),
        (host.CONTAINER_CPU_CFS_PERIODS, own, np.floor(grid.counter(periods, at, cpu.resets))),
        (
            host.CONTAINER_CPU_CFS_THROTTLED_PERIODS,
            own,
            np.floor(grid.counter(periods * cpu.throttled, at, cpu.resets)),
        ),
        (
            host.CONTAINER_SPEC_CPU_QUOTA,
            own,
            np.full(at.size, np.rint(profile.cpu_limit_cores * period_us)),
        ),
        (host.CONTAINER_SPEC_CPU_PERIOD, own, np.full(at.size, period_us)),
        (host.CONTAINER_MEMORY_WORKING_SET, own, memory),
        (host.CONTAINER_MEMORY_WORKING_SET, pod, memory + _PAUSE_BYTES),
    )
    for family, labels, values in counters:
        yield Series(family.name, labels, stamps, values)


def _node(
    node: Node,
    busy: Floats,
    cpus: int,
    grid: _Grid,
    target: Target,
    start_ms: int,
    rng: np.random.Generator,
) -> Iterator[Series]:
    at, stamps = _scraped(target, start_ms)
    weights = np.clip(1.0 + 0.2 * rng.standard_normal(cpus), 0.2, None)
    weights *= cpus / weights.sum()
    for cpu in range(cpus):
        share = np.clip(busy / cpus * weights[cpu], 0.0, 0.98)
        rates = {mode: share * part for mode, part in _BUSY_MODES.items()}
        rates |= {mode: (1.0 - share) * part for mode, part in _IDLE_MODES.items()}
        for mode in host.CPU_MODES:
            rate = rates.get(mode, np.zeros(grid.mid.size))
            values = _UPTIME_S * float(rate[0]) + grid.counter(rate, at, np.zeros(0))
            yield Series(
                host.NODE_CPU_SECONDS.name,
                node_labels(node, cpu, mode),
                stamps,
                np.round(values, 2),
            )


def host_series(
    scenario: Scenario,
    d: int,
    table: pd.DataFrame,
    runs: list[EngineRun],
    plan: ScrapePlan,
    seed: int,
) -> list[Series]:
    """Every host series of deployment ``d`` (empty without a ``host`` profile).

    Parameters
    ----------
    scenario, d
        The scenario and the deployment's index in it.
    table
        The deployment's ground-truth requests (prompt lengths, arrivals).
    runs
        The deployment's engine traces (steps, output tokens, activity).
    plan
        The scrapes: vLLM targets for the process, kubelet and node_exporter targets.
    seed
        Random seed of the simulation.
    """
    spec = scenario.deployments[d]
    if spec.host is None:
        return []
    start_ms = round(scenario.window.window().start_s * 1000)
    grid = _Grid(-scenario.scrape.warmup, scenario.window.duration)
    nodes = [n for n in plan.nodes if n.deployment == d]
    usage: dict[int, Floats] = {}
    out: list[Series] = []
    for r, replica in enumerate(spec.replicas):
        rng = np.random.default_rng((seed, _HOST_STREAM, d, r))
        cpu = _ReplicaCpu(scenario, d, r, table, runs, grid, rng)
        usage[r] = cpu.container
        at, stamps = _scraped(plan.app[replica], start_ms)
        process = np.round(grid.counter(cpu.process, at, cpu.resets), 6)
        out.append(Series(host.PROCESS_CPU_SECONDS.name, app_labels(spec, d, r), stamps, process))
        node = next(n for n in nodes if r in n.replicas)
        at, stamps = _scraped(plan.kubelet[(d, node.index)], start_ms)
        out.extend(_cadvisor(scenario, d, node, r, cpu, grid, at, stamps, rng))
    for node in nodes:
        rng = np.random.default_rng((seed, _NODE_STREAM, d, node.index))
        busy = spec.host.node_other_cores + sum(
            (usage[r] for r in node.replicas), np.zeros(grid.mid.size)
        )
        target = plan.node_exporter[(d, node.index)]
        out.extend(_node(node, busy, spec.host.node_cpus, grid, target, start_ms, rng))
    return out
