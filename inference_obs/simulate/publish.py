"""A simulation written as an observation dataset, and the ``simulate`` entry point."""

from __future__ import annotations

import json
from pathlib import Path

from inference_obs.simulate.aggregates import headline_numbers
from inference_obs.simulate.ground_truth import published_requests
from inference_obs.simulate.run import Simulation, run_scenario
from inference_obs.simulate.scenario import Scenario
from inference_obs.source.dataset.manifest import Generator, Manifest, ManifestWindow
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.writer import write_dataset
from inference_obs.version import __version__

__all__ = ["dataset_manifest", "simulate", "write_simulation"]

_METHOD = (
    "Synthetic: every sample was produced by the inference_obs simulator (scenario {name!r}, "
    "seed {seed}); no service was measured.",
    "Each engine's vLLM V1 scheduler was simulated event by event (sequence, token-budget "
    "and KV-block limits, chunked prefill, speculative decoding, external KV fetches); "
    "requests.csv is the ground truth the series were made from.",
    "Replicas were scraped every {interval:g} s at their own phases (jitter up to "
    "{jitter:g} s); GPU exporters independently, their values refreshed every {collect:g} s.",
    "Traffic was simulated from {warmup:g} s before the window, so counters start above 0.",
)


def _configuration(scenario: Scenario) -> tuple[str, ...]:
    """Methodology lines for what the scrape configuration and faults change in the data."""
    scrape = scenario.scrape
    lines = [f"The GPU exporters exported {', '.join(scrape.gpu_families)}."]
    if scrape.drop_buckets:
        lines.append(
            f"Metric relabelling dropped the _bucket series of {', '.join(scrape.drop_buckets)} "
            "(their _sum and _count are kept)."
        )
    if scrape.drop_families:
        lines.append(f"Metric relabelling dropped {', '.join(scrape.drop_families)}.")
    for spec in scenario.deployments:
        if spec.host is not None:
            lines.append(
                f"{spec.name}'s host CPUs were simulated: the server process, its container "
                f"(cAdvisor, CPU limit {spec.host.cpu_limit_cores:g} cores) and its nodes "
                f"({spec.host.node_cpus} CPUs, node_exporter)."
            )
        if spec.custom_histogram_buckets:
            text = json.dumps(
                {k: list(v) for k, v in spec.custom_histogram_buckets.items()}, sort_keys=True
            )
            lines.append(f"{spec.name} ran with --custom-histogram-buckets '{text}'.")
    for fault in scenario.faults:
        fields = fault.model_dump(exclude={"kind"})
        detail = ", ".join(f"{k}={v}" for k, v in fields.items())
        lines.append(f"Injected fault {fault.kind}: {detail} (times in s from the window start).")
    return tuple(lines)


def dataset_manifest(sim: Simulation) -> Manifest:
    """The manifest of a simulation's dataset: deployments as declared, how it was made."""
    scenario = sim.scenario
    window = scenario.window.window()
    scrape = scenario.scrape
    method = tuple(
        line.format(
            name=scenario.name,
            seed=sim.seed,
            interval=scrape.interval,
            jitter=scrape.jitter,
            collect=scrape.collect_interval,
            warmup=scrape.warmup,
        )
        for line in _METHOD
    )
    method += _configuration(scenario)
    return Manifest(
        title=scenario.title,
        synthetic=True,
        window=ManifestWindow(start=window.start, end=window.end),
        scrape_interval_seconds=scrape.interval,
        deployments=tuple(d.deployment() for d in scenario.deployments),
        methodology=(*method, *scenario.methodology),
        generator=Generator(scenario=scenario.name, seed=sim.seed, version=__version__),
    )


def simulate(scenario: str | Path | Scenario, out: Path, seed: int | None = None) -> Dataset:
    """Simulate a scenario and write it as a dataset directory.

    Parameters
    ----------
    scenario
        A shipped scenario's name (``"pro5000-vs-h20"``), a scenario YAML
        file, or a :class:`~inference_obs.simulate.scenario.Scenario`.
    out
        A directory that does not exist yet or is empty.
    seed
        Random seed; the scenario's default when None. The same scenario and
        seed always give byte-identical files.

    Returns
    -------
    Dataset
        The dataset written: ``samples.om``, ``requests.csv`` (ground truth),
        ``aggregates.json`` (targets and realised headline numbers) and
        ``manifest.json``.
    """
    return write_simulation(run_scenario(scenario, seed), Path(out))


def write_simulation(sim: Simulation, out: Path) -> Dataset:
    """Write a simulation as a dataset directory (see :func:`simulate`)."""
    return write_dataset(
        Path(out),
        dataset_manifest(sim),
        sim.series,
        aggregates=headline_numbers(sim),
        requests=published_requests(sim.requests, -sim.scenario.scrape.lead_in),
    )
