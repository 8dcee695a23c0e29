"""How a simulated engine behaves: its KV pool, its step time, how its GPUs and host read."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BucketFamily", "GpuProfile", "HostProfile", "KvCache", "StepModel"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class KvCache(_Model):
    """The engine's KV block pool (the labels of ``vllm:cache_config_info``)."""

    block_size: int = Field(16, ge=1, description="Tokens per KV block.")
    num_gpu_blocks: int = Field(ge=1, description="Blocks in each engine's pool.")
    cache_dtype: str = Field("auto", description="e.g. 'fp8', 'auto'.")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)


class StepModel(_Model):
    """Engine step time: ``base + per_token * tokens + per_sequence * decodes + context``.

    ``tokens`` are the tokens computed in the step (prefill chunks plus one
    verification token per decoding sequence and draft token);
    ``per_kilo_context`` is paid per 1000 context tokens read by decoding
    sequences. The token term is compute (tensor cores), the rest memory
    traffic; the split drives the DCGM activity ratios.
    """

    base_ms: float = Field(gt=0, description="Fixed cost of a step, ms (weights read).")
    per_token_ms: float = Field(ge=0, description="Per computed token, ms.")
    per_sequence_ms: float = Field(0.0, ge=0, description="Per decoding sequence, ms.")
    per_kilo_context_ms: float = Field(0.0, ge=0, description="Per 1000 context tokens, ms.")
    frontend_ms: float = Field(2.0, ge=0, description="API-server overhead before the engine, ms.")
    tokenize_ms_per_kilo_token: float = Field(0.3, ge=0, description="Tokenisation, ms/1000.")
    external_load_base_ms: float = Field(5.0, ge=0, description="External KV fetch latency, ms.")
    external_load_ms_per_kilo_token: float = Field(
        1.0, ge=0, description="External KV transfer time per 1000 tokens, ms."
    )


class GpuProfile(_Model):
    """How engine activity reads on dcgm-exporter (ratios are while busy, 0-1)."""

    memory_total_mib: int = Field(gt=0, description="Framebuffer per GPU, MiB.")
    idle_watts: float = Field(gt=0)
    max_watts: float = Field(gt=0)
    tensor_active_prefill: float = Field(0.6, ge=0, le=1)
    tensor_active_decode: float = Field(0.1, ge=0, le=1)
    dram_active_prefill: float = Field(0.3, ge=0, le=1)
    dram_active_decode: float = Field(0.8, ge=0, le=1)
    sm_active_prefill: float = Field(0.9, ge=0, le=1)
    sm_active_decode: float = Field(0.75, ge=0, le=1)
    sm_occupancy_prefill: float = Field(0.45, ge=0, le=1)
    sm_occupancy_decode: float = Field(0.3, ge=0, le=1)
    noise: float = Field(0.02, ge=0, le=0.5, description="Relative per-sample noise.")
    driver_version: str = "580.95.05"
    pci_bus_ids: tuple[str, ...] | None = Field(
        None, description="PCI bus id of each GPU of a node; generated when unset."
    )
    pcie_bytes_per_second: float = Field(
        5.0e10, gt=0, description="Usable PCIe rate per direction, bytes/s (Gen5 x16: ~50e9)."
    )
    pcie_rx_bytes_per_step: float = Field(
        262144.0, ge=0, description="Host-to-GPU bytes per engine step (inputs, block tables)."
    )
    pcie_tx_bytes_per_step: float = Field(
        65536.0, ge=0, description="GPU-to-host bytes per engine step (sampled tokens)."
    )
    kv_bytes_per_token: float = Field(
        70000.0, ge=0, description="KV-cache bytes per token, all GPUs of an engine together."
    )


class HostProfile(_Model):
    """The CPUs of a replica's pod and node, as cAdvisor and node_exporter see them.

    The API-server process spends CPU on tokenising prompts, detokenising
    output tokens and handling each engine step; the engine core and GPU
    workers spin ``engine_cores`` while the engine steps. The container's
    usage is both, capped by its CPU limit; the node adds other work.
    """

    cpu_limit_cores: float = Field(8.0, gt=0, description="Container CPU limit, cores.")
    cfs_period_s: float = Field(0.1, gt=0, description="CFS period, s (quota = limit x period).")
    server_idle_cores: float = Field(0.08, ge=0, description="API server at rest, cores.")
    tokenize_cpu_ms_per_kilo_token: float = Field(1.0, ge=0, description="CPU ms per 1000.")
    detokenize_cpu_ms_per_token: float = Field(0.05, ge=0, description="CPU ms per token.")
    step_cpu_ms: float = Field(0.4, ge=0, description="API-server CPU ms per engine step.")
    engine_cores: float = Field(
        1.5, ge=0, description="Engine core and GPU workers while the engine steps, cores."
    )
    node_cpus: int = Field(16, ge=1, description="Logical CPUs of each node.")
    node_other_cores: float = Field(1.0, ge=0, description="Other work on each node, cores.")
    memory_working_set_bytes: float = Field(
        24e9, gt=0, description="Host memory working set of the server container, bytes."
    )


BucketFamily = Literal[
    "ttft", "inter_token_latency", "request_latency", "request_tokens", "iteration_tokens"
]
"""Keys of vLLM's ``--custom-histogram-buckets``: each replaces one default bucket set."""
