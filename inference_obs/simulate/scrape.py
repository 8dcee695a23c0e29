"""When Prometheus scrapes each target, which scrapes fail, and when dcgm-exporter collects.

Every target (a replica's vLLM server, a node's GPU exporter) is scraped
every ``interval`` seconds at its own phase, as Prometheus spreads targets
over the interval, and each scrape lands up to ``jitter`` seconds off its
slot. Scrape times are whole milliseconds, as Prometheus stores them, and are
kept from ``lead_in`` seconds before the window to its end.

A scrape fails (no samples; ``up`` 0) inside a ``scrape_gap`` fault and, for
a vLLM target, while its server is down after a ``restart``. A
``misaligned_scrapes`` fault puts a node's GPU exporter ``offset`` seconds
after the application scrapes of its first replica instead of at its own
phase. dcgm-exporter refreshes its values every ``collect_interval`` at its
own phase; a scrape returns the values of the last collection. Nodes of a
deployment with a ``host`` profile also have a kubelet (cAdvisor) and a
node_exporter target, each at its own phase.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from inference_obs.samples import Floats, Ints
from inference_obs.simulate.faults import MisalignedScrapes, Restart, ScrapeGap, of_kind
from inference_obs.simulate.labels import Node, nodes_of
from inference_obs.simulate.scenario import Scenario

__all__ = ["ScrapePlan", "Target", "plan_scrapes"]

Bools = npt.NDArray[np.bool_]

# Random streams of the scrape plan (apart from the traffic's).
_APP_STREAM, _GPU_STREAM, _COLLECT_STREAM = 101, 102, 103
_KUBELET_STREAM, _NODE_STREAM = 104, 105


@dataclass(frozen=True, slots=True)
class Target:
    """The scrapes of one target: times in ms from the window start, and success."""

    ms: Ints
    up: Bools

    @property
    def seconds(self) -> Floats:
        """Scrape times, seconds from the window start."""
        out: Floats = self.ms / 1000.0
        return out


@dataclass(frozen=True, slots=True)
class ScrapePlan:
    """Scrapes of every target of a scenario."""

    app: dict[str, Target]
    """By replica name."""
    gpu: dict[tuple[int, int], Target]
    """By (deployment index, node index)."""
    collect: dict[tuple[int, int], Floats]
    """dcgm-exporter collection times by node, seconds from the window start."""
    nodes: tuple[Node, ...]
    kubelet: dict[tuple[int, int], Target] = field(default_factory=dict)
    """cAdvisor scrapes by node, for deployments with a host profile."""
    node_exporter: dict[tuple[int, int], Target] = field(default_factory=dict)
    """node_exporter scrapes by node, for deployments with a host profile."""


def _slots(phase: float, interval: float, begin: float, end: float) -> Floats:
    first = np.ceil((begin - phase) / interval)
    last = np.floor((end - phase) / interval)
    out: Floats = phase + interval * np.arange(first, last + 1)
    return out


def _target(
    phase: float, scenario: Scenario, rng: np.random.Generator, down: list[tuple[float, float]]
) -> Target:
    scrape = scenario.scrape
    end = scenario.window.duration
    times = _slots(phase, scrape.interval, -scrape.lead_in, end)
    jitter = min(scrape.jitter, scrape.interval / 4)
    times = times + rng.uniform(-jitter, jitter, times.size)
    ms = np.rint(times * 1000.0).astype(np.int64)
    ms = ms[(ms >= -scrape.lead_in * 1000.0) & (ms <= end * 1000.0)]
    seconds = ms / 1000.0
    up = np.ones(ms.size, dtype=bool)
    for start, stop in down:
        up &= ~((seconds >= start) & (seconds < stop))
    return Target(ms, up)


def plan_scrapes(scenario: Scenario, seed: int) -> ScrapePlan:
    """Scrape times of every target, and dcgm-exporter collection times of every node."""
    interval = scenario.scrape.interval
    app: dict[str, Target] = {}
    phases: dict[str, float] = {}
    for d, spec in enumerate(scenario.deployments):
        for r, replica in enumerate(spec.replicas):
            rng = np.random.default_rng((seed, _APP_STREAM, d, r))
            phases[replica] = float(rng.uniform(0, interval))
            down = [
                (g.start, g.end)
                for g in of_kind(scenario.faults, ScrapeGap, replica)
                if g.target == "app"
            ]
            down += [(f.at, f.at + f.downtime) for f in of_kind(scenario.faults, Restart, replica)]
            app[replica] = _target(phases[replica], scenario, rng, down)
    gpu: dict[tuple[int, int], Target] = {}
    collect: dict[tuple[int, int], Floats] = {}
    nodes = tuple(n for d, spec in enumerate(scenario.deployments) for n in nodes_of(spec, d))
    for node in nodes:
        spec = scenario.deployments[node.deployment]
        names = [spec.replicas[r] for r in node.replicas]
        key = (node.deployment, node.index)
        rng = np.random.default_rng((seed, _GPU_STREAM, *key))
        phase = float(rng.uniform(0, interval))
        for fault in (f for r in names for f in of_kind(scenario.faults, MisalignedScrapes, r)):
            phase = (phases[names[0]] + fault.offset) % interval
        down = [
            (g.start, g.end)
            for r in names
            for g in of_kind(scenario.faults, ScrapeGap, r)
            if g.target == "gpu"
        ]
        gpu[key] = _target(phase, scenario, rng, down)
        every = scenario.scrape.collect_interval
        offset = float(np.random.default_rng((seed, _COLLECT_STREAM, *key)).uniform(0, every))
        begin = -scenario.scrape.warmup
        collect[key] = _slots(offset, every, begin, scenario.window.duration)
    kubelet: dict[tuple[int, int], Target] = {}
    node_exporter: dict[tuple[int, int], Target] = {}
    for node in nodes:
        if scenario.deployments[node.deployment].host is None:
            continue
        key = (node.deployment, node.index)
        for stream, targets in ((_KUBELET_STREAM, kubelet), (_NODE_STREAM, node_exporter)):
            rng = np.random.default_rng((seed, stream, *key))
            targets[key] = _target(float(rng.uniform(0, interval)), scenario, rng, [])
    return ScrapePlan(app, gpu, collect, nodes, kubelet, node_exporter)
