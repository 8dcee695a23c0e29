"""A fleet-sized observation dataset, generated on demand with numpy (never committed).

Two deployments (H100 and H200 halves of ``--replicas``), each replica one
vLLM V1 server (tensor parallel over ``--gpus-per-replica`` GPUs, prefix
caching and speculative decoding on) exporting every family a real one
exports, with the catalogue's default buckets, and one dcgm-exporter with
the 4.x default fields for each of its GPUs. Series shapes come from
:mod:`benchmarks.fleet_series` and :mod:`benchmarks.fleet_gpus`: load-driven
histograms, counters that start above zero and restart from zero on two
replicas (two scrapes lost each), gauges that follow the load, and one GPU
exporter that misses ten minutes.

The default, 32 replicas x 8 GPUs over 6 h at 15 s, holds about 17,900
series and 25.8 million samples (about 5.9 GB of OpenMetrics text), written
with :func:`~inference_obs.source.dataset.write_dataset` like any dataset::

    python -m benchmarks.fleet --out DIR [--replicas 32] [--gpus-per-replica 8]
        [--hours 6] [--interval 15] [--seed 7]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from benchmarks.fleet_gpus import dcgm_series
from benchmarks.fleet_series import Replica, load_of, vllm_series
from inference_obs import __version__
from inference_obs.deployment import Deployment
from inference_obs.samples import Series
from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.writer import write_dataset

__all__ = [
    "FleetShape",
    "fleet_manifest",
    "fleet_replicas",
    "fleet_series",
    "replica_series",
    "write_fleet",
]

#: Where every generated fleet's window starts (any fixed time will do).
START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
_NAMESPACE = "llm"
_MODEL = "meta-llama/Llama-3.1-70B-Instruct"
# Simulated before the window so counters start above zero: 1 h of scrapes.
_WARMUP_S = 3600.0
# (name, pod prefix, GPU model, memory per GPU in MiB, max_num_seqs) of the two halves.
_DEPLOYMENTS = (
    ("H100", "fleet-h100", "NVIDIA H100 80GB HBM3", 81559, 128),
    ("H200", "fleet-h200", "NVIDIA H200", 143771, 256),
)
_SPEC_TOKENS = 3


@dataclass(frozen=True, slots=True)
class FleetShape:
    """How big a fleet to generate."""

    replicas: int = 32
    gpus_per_replica: int = 8
    hours: float = 6.0
    interval_s: float = 15.0
    seed: int = 7

    @property
    def steps(self) -> int:
        """Scrapes per target in the window."""
        return int(self.hours * 3600 / self.interval_s)


def _split(shape: FleetShape) -> list[int]:
    """Replicas per deployment: the first half (rounded up) H100, the rest H200."""
    first = -(-shape.replicas // 2)
    return [n for n in (first, shape.replicas - first) if n]


def _pod(prefix: str, k: int, total: int) -> str:
    return f"{prefix}-{k + 1:0{max(2, len(str(total)))}d}"


def fleet_replicas(shape: FleetShape) -> list[Replica]:
    """Every replica of the fleet, with its restart and exporter gap where it has one."""
    if shape.replicas < 1 or shape.gpus_per_replica < 1 or shape.steps < 8:
        raise ValueError(f"{shape}: need at least one replica, one GPU and eight scrapes")
    warmup = int(_WARMUP_S / shape.interval_s)
    replicas: list[Replica] = []
    for d, count in enumerate(_split(shape)):
        _, prefix, gpu_model, memory, seqs = _DEPLOYMENTS[d]
        for k in range(count):
            index = len(replicas)
            # Replicas 1 and 5 restart (40 % and 75 % into the window); the GPU
            # exporter of replica 2 misses ten minutes from 60 %.
            restart = {1: 0.4, 5: 0.75}.get(index)
            gap = int(0.6 * shape.steps) if index == 2 else None
            replicas.append(
                Replica(
                    deployment=d,
                    index=index,
                    pod=_pod(prefix, k, count),
                    node=_pod(f"{prefix}-node", k, count),
                    namespace=_NAMESPACE,
                    model=_MODEL,
                    gpu_model=gpu_model,
                    gpu_memory_mib=memory,
                    gpus=shape.gpus_per_replica,
                    max_num_seqs=seqs,
                    spec_tokens=_SPEC_TOKENS,
                    start_ms=round(START.timestamp() * 1000),
                    interval_s=shape.interval_s,
                    steps=shape.steps,
                    warmup=warmup,
                    seed=shape.seed * 100_003 + index,
                    restart=None if restart is None else max(2, int(restart * shape.steps)),
                    gpu_gap=None
                    if gap is None
                    else (gap, min(shape.steps, gap + int(600 / shape.interval_s))),
                )
            )
    return replicas


def replica_series(replica: Replica) -> Iterator[Series]:
    """Every vLLM and DCGM series of ``replica``, plus ``up`` of both scrape targets."""
    rng = np.random.default_rng(replica.seed)
    load = load_of(replica, rng)
    yield from vllm_series(replica, load, rng)
    yield from dcgm_series(replica, load, rng)


def fleet_series(shape: FleetShape) -> Iterator[Series]:
    """Every series of the fleet, replica by replica."""
    for replica in fleet_replicas(shape):
        yield from replica_series(replica)


def fleet_manifest(shape: FleetShape) -> Manifest:
    """The manifest: the window, the two deployments (selected by pod prefix), the generator."""
    deployments = []
    for d, count in enumerate(_split(shape)):
        name, prefix, gpu_model, memory, seqs = _DEPLOYMENTS[d]
        deployments.append(
            Deployment.model_validate(
                {
                    "name": name,
                    "replicas": [f"{name}-{k + 1:02d}" for k in range(count)],
                    "selector": {"namespace": _NAMESPACE, "pod": f"~{prefix}-.*"},
                    "hardware": {
                        "gpu_model": gpu_model,
                        "gpu_memory_gib": round(memory / 1024, 1),
                        "gpus_per_replica": shape.gpus_per_replica,
                    },
                    "engine": {"name": "vllm", "version": "0.33.0"},
                    "config": {
                        "tensor_parallel_size": shape.gpus_per_replica,
                        "max_num_seqs": seqs,
                        "prefix_caching": True,
                        "num_speculative_tokens": _SPEC_TOKENS,
                    },
                }
            )
        )
    end = START + timedelta(hours=shape.hours)
    return Manifest(
        title=(
            f"Generated fleet: {shape.replicas} replicas x {shape.gpus_per_replica} GPUs, "
            f"{shape.hours:g} h at {shape.interval_s:g} s (benchmark data)"
        ),
        synthetic=True,
        window={"start": START, "end": end},
        scrape_interval_seconds=shape.interval_s,
        deployments=tuple(deployments),
        methodology=(
            "Generated by benchmarks/fleet.py for benchmarks: series shaped like a vLLM and "
            "dcgm-exporter fleet, not simulated request by request; no service was measured.",
        ),
        generator={"scenario": "benchmarks/fleet.py", "seed": shape.seed, "version": __version__},
    )


def write_fleet(out: Path, shape: FleetShape) -> Dataset:
    """Generate the fleet and write it as a dataset directory ``out`` (new or empty)."""
    return write_dataset(out, fleet_manifest(shape), fleet_series(shape))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="new dataset directory")
    parser.add_argument("--replicas", type=int, default=32)
    parser.add_argument("--gpus-per-replica", type=int, default=8)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--interval", type=float, default=15.0, help="scrape interval, s")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    shape = FleetShape(args.replicas, args.gpus_per_replica, args.hours, args.interval, args.seed)
    started = time.perf_counter()
    dataset = write_fleet(args.out, shape)
    samples = dataset.samples
    size = (dataset.path / "samples.om").stat().st_size
    print(
        f"wrote {dataset.path}: {len(samples):,} series, {int(samples.offsets[-1]):,} samples, "
        f"{size / 1e9:.2f} GB of OpenMetrics in {time.perf_counter() - started:.1f} s"
    )
    print("mode: the data the runners read, generated once; not a comparison")


if __name__ == "__main__":
    main()
