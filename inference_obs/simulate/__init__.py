"""A deterministic simulator of vLLM replicas and their GPUs, as Prometheus scrapes them.

A scenario (YAML, :mod:`~inference_obs.simulate.scenario`) names deployments,
their traffic, their configuration and hardware, how they are scraped and
which faults to inject. :func:`simulate` runs it and writes an observation
dataset with ground truth; :func:`run_scenario` keeps everything in memory.

The pipeline, one module per step: requests arrive
(:mod:`~.arrivals`), each engine's scheduler serves them
(:mod:`~.scheduler`, :mod:`~.steps`), Prometheus scrapes the servers and
GPU exporters (:mod:`~.scrape`) and stores what vLLM (:mod:`~.emit_vllm`)
and dcgm-exporter (:mod:`~.emit_dcgm`, with PCIe traffic from
:mod:`~.transfers`) expose, and, for deployments with a ``host`` profile,
what the server process, cAdvisor and node_exporter report of the host CPUs
(:mod:`~.emit_host`); :mod:`~.ground_truth` keeps every request's record and
:mod:`~.aggregates` the headline numbers.
Everything random is drawn from generators keyed by the seed.

Examples
--------
>>> from inference_obs.simulate import scenario_names
>>> "pro5000-vs-h20" in scenario_names()
True

Running a scenario needs pandas (the ground-truth records are frames): the names
that run or write one (:func:`simulate`, :func:`run_scenario`,
:func:`write_simulation`, :func:`dataset_manifest`, :class:`Simulation`) load
their modules when first read, so reading a scenario, as ``inference-obs
simulate --help`` does to list them, loads no pandas.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from inference_obs.simulate.load import with_load
from inference_obs.simulate.scenario import (
    Scenario,
    ScenarioError,
    load_scenario,
    parse_scenario,
    scenario_names,
)

if TYPE_CHECKING:
    from inference_obs.simulate.publish import dataset_manifest, simulate, write_simulation
    from inference_obs.simulate.run import Simulation, run_scenario

__all__ = [
    "Scenario",
    "ScenarioError",
    "Simulation",
    "dataset_manifest",
    "load_scenario",
    "parse_scenario",
    "run_scenario",
    "scenario_names",
    "simulate",
    "with_load",
    "write_simulation",
]


def __getattr__(name: str) -> object:
    # PEP 562: a name that runs or writes a scenario, read for the first time.
    module: ModuleType
    if name in {"dataset_manifest", "simulate", "write_simulation"}:
        from inference_obs.simulate import publish as module
    elif name in {"Simulation", "run_scenario"}:
        from inference_obs.simulate import run as module
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value: object = getattr(module, name)
    globals()[name] = value  # found directly from now on
    return value
