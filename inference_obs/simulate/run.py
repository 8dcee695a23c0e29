"""Running a scenario: traffic, engines, scrapes and exporters, in that order.

:func:`run_scenario` returns a :class:`Simulation` in memory: the sampled
series, the ground-truth request table and the per-engine traces behind
them. Everything is drawn from generators keyed by the seed, so the same
scenario and seed give identical results on every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from inference_obs.samples import Floats, Ints, Series
from inference_obs.simulate.arrivals import Requests, generate_requests
from inference_obs.simulate.emit_dcgm import gpu_series
from inference_obs.simulate.emit_host import host_series
from inference_obs.simulate.emit_vllm import Sampling, engine_series
from inference_obs.simulate.faults import (
    GpusReadIdle,
    GpuStops,
    HostStarved,
    MissingFamily,
    Restart,
    Stall,
    TransferBound,
    of_kind,
)
from inference_obs.simulate.ground_truth import request_table
from inference_obs.simulate.labels import app_labels
from inference_obs.simulate.scenario import Scenario, load_scenario
from inference_obs.simulate.scheduler import EngineFaults, simulate_engine
from inference_obs.simulate.scrape import ScrapePlan, Target, plan_scrapes
from inference_obs.simulate.trace import EngineRun
from inference_obs.simulate.transfers import pcie_events

__all__ = ["Simulation", "run_scenario"]

# Random stream of per-GPU exporter noise (apart from traffic and scrapes).
_GPU_NOISE_STREAM = 201


@dataclass(frozen=True, slots=True)
class Simulation:
    """A simulated observation, in memory.

    Attributes
    ----------
    scenario, seed
        What was simulated.
    series
        Every sampled series (vLLM, DCGM, host where simulated, and ``up``),
        unix-second timestamps.
    requests
        Ground truth, one row per request of every deployment
        (:mod:`~inference_obs.simulate.ground_truth`).
    engines
        Per deployment, the trace of each engine.
    scrapes
        Scrape and collection times of every target.
    """

    scenario: Scenario
    seed: int
    series: tuple[Series, ...]
    requests: pd.DataFrame
    engines: dict[str, tuple[EngineRun, ...]]
    scrapes: ScrapePlan

    @property
    def window_start_ms(self) -> int:
        """The window start, unix milliseconds (sample times are offsets from it)."""
        return round(self.scenario.window.window().start_s * 1000)


def _stamps(start_ms: int, ms: Ints) -> Floats:
    out: Floats = (start_ms + ms) / 1000.0
    return out


def _up(name: str, labels: dict[str, str], target: Target, start_ms: int) -> Series:
    return Series(name, labels, _stamps(start_ms, target.ms), target.up.astype(np.float64))


def _missing(scenario: Scenario, replica: str) -> frozenset[str]:
    return frozenset(f.family for f in of_kind(scenario.faults, MissingFamily, replica))


def _engines(
    scenario: Scenario, seed: int, d: int, requests: Requests, plan: ScrapePlan
) -> list[EngineRun]:
    spec = scenario.deployments[d]
    runs = []
    for r, replica in enumerate(spec.replicas):
        faults = EngineFaults(
            stalls=tuple(
                (f.start, f.end, f.reason == "deferred")
                for f in of_kind(scenario.faults, Stall, replica)
            ),
            restarts=tuple(
                (f.at, f.at + f.downtime) for f in of_kind(scenario.faults, Restart, replica)
            ),
            slowdowns=tuple(
                (f.start, f.end, f.host_ms, 0.0)
                for f in of_kind(scenario.faults, HostStarved, replica)
            )
            + tuple(
                (f.start, f.end, 0.0, f.transfer_ms)
                for f in of_kind(scenario.faults, TransferBound, replica)
            ),
        )
        snapshots = plan.app[replica].seconds
        for e in range(spec.engines_per_replica):
            runs.append(
                simulate_engine(
                    spec,
                    requests,
                    r,
                    e,
                    snapshots,
                    faults,
                    -scenario.scrape.warmup,
                    scenario.window.duration,
                )
            )
    return runs


def _vllm(
    scenario: Scenario, d: int, table: pd.DataFrame, runs: list[EngineRun], plan: ScrapePlan
) -> list[Series]:
    spec = scenario.deployments[d]
    start_ms = round(scenario.window.window().start_s * 1000)
    out = []
    for r, replica in enumerate(spec.replicas):
        target = plan.app[replica]
        out.append(_up("up", app_labels(spec, d, r), target, start_ms))
        sampling = Sampling(
            at=target.seconds[target.up],
            stamps=_stamps(start_ms, target.ms[target.up]),
            resets=np.sort([f.at for f in of_kind(scenario.faults, Restart, replica)]),
            missing=_missing(scenario, replica) | set(scenario.scrape.drop_families),
            drop_buckets=frozenset(scenario.scrape.drop_buckets),
        )
        for run in (run for run in runs if run.replica == r):
            rows = table[(table["replica"] == replica) & (table["engine"] == run.engine)]
            out.extend(engine_series(spec, d, rows.reset_index(drop=True), run, sampling))
    return out


def _dcgm(
    scenario: Scenario,
    seed: int,
    runs: dict[int, list[EngineRun]],
    tables: dict[int, pd.DataFrame],
    plan: ScrapePlan,
) -> list[Series]:
    start_ms = round(scenario.window.window().start_s * 1000)
    scrape = scenario.scrape
    out = []
    for node in plan.nodes:
        spec = scenario.deployments[node.deployment]
        key = (node.deployment, node.index)
        target, collect = plan.gpu[key], plan.collect[key]
        out.append(_up("up", {"instance": node.instance, "job": "dcgm-exporter"}, target, start_ms))
        for slot in node.gpus:
            replica = spec.replicas[slot.replica]
            run = next(
                x
                for x in runs[node.deployment]
                if (x.replica, x.engine) == (slot.replica, slot.engine)
            )
            keep = target.up.copy()
            for stop in of_kind(scenario.faults, GpuStops, replica):
                if stop.gpu == slot.index % spec.hardware.gpus_per_replica:
                    keep &= target.seconds < stop.at
            server_up = np.ones(collect.size)
            for fault in of_kind(scenario.faults, Restart, replica):
                server_up[(collect >= fault.at) & (collect < fault.at + fault.downtime)] = 0.0
            reads_idle = np.zeros(collect.size, dtype=bool)
            for idle in of_kind(scenario.faults, GpusReadIdle, replica):
                reads_idle |= (collect >= idle.start) & (collect < idle.end)
            table = tables[node.deployment]
            rows = table[(table["replica"] == replica) & (table["engine"] == run.engine)]
            rng = np.random.default_rng((seed, _GPU_NOISE_STREAM, *key, slot.index))
            out.extend(
                gpu_series(
                    spec,
                    node,
                    slot,
                    run.activity,
                    collect,
                    target.seconds[keep],
                    _stamps(start_ms, target.ms[keep]),
                    scenario=scenario.name,
                    every=scrape.collect_interval,
                    util_sample=scrape.util_sample,
                    server_up=server_up,
                    reads_idle=reads_idle,
                    rng=rng,
                    exported=frozenset(scrape.gpu_families) - _missing(scenario, replica),
                    transfers=pcie_events(spec, run, rows),
                )
            )
    return out


def run_scenario(scenario: Scenario | str | Path, seed: int | None = None) -> Simulation:
    """Simulate a scenario (a :class:`Scenario`, a shipped name or a YAML path).

    Parameters
    ----------
    scenario
        The scenario, or where to load it from (:func:`~inference_obs.simulate.load_scenario`).
    seed
        Random seed; the scenario's own ``seed`` when None.
    """
    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    seed = scenario.seed if seed is None else seed
    plan = plan_scrapes(scenario, seed)
    series: list[Series] = []
    tables, engines, by_index, by_table = [], {}, {}, {}
    for d, spec in enumerate(scenario.deployments):
        requests = generate_requests(
            spec, seed, d, -scenario.scrape.warmup, scenario.window.duration
        )
        runs = _engines(scenario, seed, d, requests, plan)
        table = request_table(spec, requests, runs)
        series.extend(_vllm(scenario, d, table, runs, plan))
        tables.append(table)
        engines[spec.name] = tuple(runs)
        by_index[d], by_table[d] = runs, table
    series.extend(_dcgm(scenario, seed, by_index, by_table, plan))
    for d in range(len(scenario.deployments)):
        series.extend(host_series(scenario, d, by_table[d], by_index[d], plan, seed))
    requests_table = pd.concat(tables, ignore_index=True)
    return Simulation(scenario, seed, tuple(series), requests_table, engines, plan)
