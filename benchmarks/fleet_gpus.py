"""The dcgm-exporter series of one replica of the generated fleet: every default field per GPU.

Values follow the replica's load (:mod:`benchmarks.fleet_series`): utilisation
near the batch's share of its limit, power, clocks, temperatures and the
profiling ratios from it, an energy counter that only grows, memory held as
vLLM preallocates it. dcgm-exporter refreshes values every 30 s, so scrapes in
between repeat them, as real ones do. Names and labels are the catalogue's
(:mod:`inference_obs.metrics.dcgm`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np

from benchmarks.fleet_series import Load, Replica, stamps_of
from inference_obs.metrics import dcgm
from inference_obs.metrics.family import Family
from inference_obs.samples import Floats, Ints, Series

__all__ = ["DCGM_FIELDS", "dcgm_series"]

#: dcgm-exporter 4.x default-CSV fields (profiling ones included).
DCGM_FIELDS: tuple[Family, ...] = tuple(
    f for f in dcgm.FAMILIES if f.condition is None or "4.0.0 default CSV" in f.condition
)
_DCGM_COLLECT_S = dcgm.DEFAULT_COLLECT_INTERVAL_SECONDS
_UUIDS = uuid.UUID("a3c1f6e2-1d4b-4f1e-9a57-2c0d8e5b7f10")


def dcgm_series(replica: Replica, load: Load, rng: np.random.Generator) -> Iterator[Series]:
    """Every DCGM field of each GPU of ``replica``, and ``up`` of its exporter."""
    d, i = replica.deployment, replica.index
    scrape = {"instance": f"10.{d}.{i // 250}.{i % 250 + 1}:9400", "job": "dcgm-exporter"}
    stamps = stamps_of(replica, int(rng.integers(0, round(replica.interval_s * 1000))), rng)
    keep = np.ones(replica.steps, dtype=np.bool_)
    if replica.gpu_gap is not None:
        keep[replica.gpu_gap[0] : replica.gpu_gap[1]] = False
    yield Series(
        "up", {**scrape, "namespace": replica.namespace, "pod": replica.pod}, stamps, keep * 1.0
    )
    # dcgm-exporter refreshes values every collect interval: scrapes in between repeat them.
    hold = max(1, round(_DCGM_COLLECT_S / replica.interval_s))
    fresh = (np.arange(replica.steps) // hold) * hold
    busy = np.clip(load.pressure[replica.warmup :] * 0.8, 0, 1)[fresh]
    for g in range(replica.gpus):
        labels = {
            "gpu": str(g),
            "UUID": f"GPU-{uuid.uuid5(_UUIDS, f'{replica.node}/{g}')}",
            "pci_bus_id": f"00000000:{(0x18 + 0x11 * g) % 256:02X}:00.0",
            "device": f"nvidia{g}",
            "modelName": replica.gpu_model,
            "Hostname": replica.node,
            "DCGM_FI_DRIVER_VERSION": "580.95.05",
            "pod": replica.pod,
            "namespace": replica.namespace,
            "container": "vllm",
            **scrape,
        }
        util = np.clip(np.rint(100 * busy + rng.normal(0, 3, busy.size)[fresh]), 0, 100)
        for field, values in _gpu_fields(replica, util, rng, fresh).items():
            extra = (
                {"err_code": "0", "err_msg": "No Error"} if field == dcgm.XID_ERRORS.name else {}
            )
            yield Series(field, {**labels, **extra}, stamps[keep], values[keep])


def _gpu_fields(
    replica: Replica, util: Floats, rng: np.random.Generator, fresh: Ints
) -> dict[str, Floats]:
    """Every DCGM field of one GPU from its utilisation (percent) at each scrape."""
    ratio = util / 100.0
    n = util.size
    zeros = np.zeros(n)
    power = np.round(85.0 + 600.0 * ratio + rng.normal(0, 4, n)[fresh], 3)
    used = float(round(replica.gpu_memory_mib * 0.9))
    reserved = 512.0
    gr = np.round(np.clip(ratio * 0.95 + rng.normal(0, 0.01, n)[fresh], 0, 1), 6)
    fields = {
        "DCGM_FI_DEV_SM_CLOCK": np.where(util > 0, 1980.0, 345.0),
        "DCGM_FI_DEV_MEM_CLOCK": np.full(n, 2619.0),
        "DCGM_FI_DEV_GPU_TEMP": np.rint(33 + 40 * ratio),
        "DCGM_FI_DEV_MEMORY_TEMP": np.rint(38 + 35 * ratio),
        "DCGM_FI_DEV_POWER_USAGE": power,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 4.1e9
        + np.cumsum(np.rint(power * replica.interval_s * 1000)),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": np.cumsum(rng.poisson(0.001, n)).astype(np.float64),
        "DCGM_FI_DEV_GPU_UTIL": util,
        "DCGM_FI_DEV_MEM_COPY_UTIL": np.rint(util * 0.4),
        "DCGM_FI_DEV_ENC_UTIL": zeros,
        "DCGM_FI_DEV_DEC_UTIL": zeros,
        "DCGM_FI_DEV_XID_ERRORS": zeros,
        "DCGM_FI_DEV_FB_FREE": np.full(n, replica.gpu_memory_mib - used - reserved),
        "DCGM_FI_DEV_FB_USED": np.full(n, used),
        "DCGM_FI_DEV_FB_RESERVED": np.full(n, reserved),
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": np.rint(
            40000.0 * ratio * np.exp(rng.normal(0, 0.1, n)[fresh])
        ),
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": zeros,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": zeros,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": zeros,
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": gr,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": np.round(gr * 0.35, 6),
        "DCGM_FI_PROF_DRAM_ACTIVE": np.round(gr * 0.55, 6),
        "DCGM_FI_PROF_PCIE_TX_BYTES": np.rint(2.0e8 * ratio + 1e6),
        "DCGM_FI_PROF_PCIE_RX_BYTES": np.rint(3.0e8 * ratio + 1e6),
    }
    if set(fields) != {f.name for f in DCGM_FIELDS}:  # the catalogue changed: follow it here
        raise AssertionError(f"DCGM fields {sorted(fields)} differ from the catalogue's")
    return fields
