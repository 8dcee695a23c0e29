"""Simulated fleets of any size, for the per-replica statistics, the outliers and the body's
length: one deployment of ``replicas`` small replicas at 15 s scrapes.

A *lean* fleet keeps what a report of a large fleet must still read (the
TTFT, TPOT and E2E histograms, the counters and gauges, GPU utilisation of
one GPU per replica) and drops the other histograms, the other GPU fields
and the host series, so that a thousand replicas simulate in about twenty
seconds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from inference_obs.simulate import simulate
from inference_obs.simulate.scenario import Scenario, parse_scenario

#: Histograms a lean fleet does not export (the per-replica statistics read none of them).
LEAN_MISSING = (
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_params_max_tokens",
    "vllm:request_generation_tokens",
    "vllm:iteration_tokens_total",
)


def replica_names(replicas: int) -> list[str]:
    """``F-01`` .. (zero-padded to the count's width, at least two digits)."""
    width = max(2, len(str(replicas)))
    return [f"F-{k:0{width}d}" for k in range(1, replicas + 1)]


def fleet_scenario(
    replicas: int,
    *,
    minutes: float = 10,
    rate_per_second: float = 20.0,
    lean: bool = False,
    faults: tuple[dict[str, Any], ...] = (),
    halves: bool = False,
) -> Scenario:
    """One deployment ``FLEET`` of ``replicas`` replicas (2 GPUs each, 1 when lean) serving
    ``rate_per_second`` requests in all, over ``minutes`` after a warm-up; with ``halves``,
    two deployments ``FLEET`` and ``OTHER`` of half the replicas each (compared, as a
    report compares two deployments)."""
    if halves:
        first = -(-replicas // 2)
        one = _deployment("FLEET", "chat", replica_names(first), rate_per_second / 2, lean)
        names = [n.replace("F-", "G-") for n in replica_names(replicas - first)]
        other = _deployment("OTHER", "other", names, rate_per_second / 2, lean)
        deployments = [one, other]
    else:
        deployments = [_deployment("FLEET", "chat", replica_names(replicas), rate_per_second, lean)]
    return _scenario(replicas, minutes, lean, deployments, faults)


def _deployment(
    name: str, prefix: str, replicas: list[str], rate_per_second: float, lean: bool
) -> dict[str, Any]:
    gpus = 1 if lean else 2
    deployment: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "pod_prefix": prefix,
        "namespace": "serving",
        "model_name": "test-model",
        "hardware": {
            "gpu_model": "NVIDIA H100 80GB HBM3",
            "gpu_memory_gib": 80,
            "gpus_per_replica": gpus,
        },
        "engine": {"name": "vllm", "version": "0.33.0"},
        "config": {
            "tensor_parallel_size": gpus,
            "max_num_batched_tokens": 8192,
            "max_num_seqs": 32,
        },
        "kv_cache": {"block_size": 16, "num_gpu_blocks": 20000},
        "step": {
            "base_ms": 18,
            "per_token_ms": 0.02,
            "per_sequence_ms": 0.3,
            "per_kilo_context_ms": 0.05,
        },
        "gpu": {"memory_total_mib": 81559, "idle_watts": 70, "max_watts": 700},
        "workload": [
            {
                "name": "chat",
                "rate_per_second": rate_per_second,
                "prompt_tokens": {"kind": "lognormal", "median": 1000, "sigma": 0.6, "max": 8000},
                "output_tokens": {"kind": "lognormal", "median": 150, "sigma": 0.5},
            }
        ],
    }
    if not lean:  # host_starved needs the host profile
        deployment["host"] = {"cpu_limit_cores": 6, "node_cpus": 8, "node_other_cores": 0.5}
    return deployment


def _scenario(
    replicas: int,
    minutes: float,
    lean: bool,
    deployments: list[dict[str, Any]],
    faults: tuple[dict[str, Any], ...],
) -> Scenario:
    families = ["DCGM_FI_DEV_GPU_UTIL"]
    if not lean:
        families += ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_POWER_USAGE"]
    missing = [{"kind": "missing_family", "family": f} for f in LEAN_MISSING] if lean else []
    data = {
        "name": "fleet",
        "title": f"Test: a fleet of {replicas} replicas",
        "seed": 1,
        "window": {"start": "2026-02-03T10:00:00+01:00", "duration": f"{minutes:g}m"},
        "scrape": {
            "interval": "15s",
            "jitter": 0.005,
            "warmup": "30s" if lean else "2m",
            "collect_interval": "15s",
            "gpu_families": families,
        },
        "deployments": deployments,
        "faults": [*faults, *missing],
    }
    return parse_scenario(yaml.safe_dump(data), f"a fleet of {replicas} replicas")


def simulated(scenario: Scenario, out: Path, seed: int = 3) -> Path:
    """``scenario`` simulated at ``seed`` into ``out`` (an empty or new dataset directory)."""
    simulate(scenario, out, seed=seed)
    return out
