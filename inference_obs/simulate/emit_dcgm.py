"""dcgm-exporter's GPU series, consistent with what the engines did.

dcgm-exporter refreshes its values every ``collect_interval`` seconds and a
scrape returns the last collection. At a collection at time ``c`` a GPU
reads, from the activity of the engine it serves
(:class:`~inference_obs.simulate.trace.Activity`):

- ``DCGM_FI_DEV_GPU_UTIL``: percent of the last ``util_sample`` seconds
  (NVML's sample period) with a kernel running, as an integer 0-100;
- ``DCGM_FI_PROF_GR_ENGINE_ACTIVE``: busy share of the last collect interval;
- ``PROF_PIPE_TENSOR_ACTIVE``, ``PROF_DRAM_ACTIVE``, ``PROF_SM_ACTIVE``,
  ``PROF_SM_OCCUPANCY``: the busy time split into compute (prefill-like,
  tensor-heavy) and memory-bound (decode-like) work, weighted by the
  deployment's :class:`~inference_obs.simulate.scenario.GpuProfile` levels;
- ``DCGM_FI_DEV_POWER_USAGE``: idle power plus the dynamic range times
  ``0.4 busy + 0.4 dram + 0.2 tensor``;
- ``DCGM_FI_DEV_FB_USED``/``FB_FREE``: what vLLM preallocates
  (``gpu_memory_utilization``) while its server is up, MiB;
- ``DCGM_FI_PROF_PCIE_RX_BYTES``/``TX_BYTES``: the bytes copied in the last
  collect interval (:mod:`~inference_obs.simulate.transfers`) over its
  length, plus the link's full rate times the share of it spent on the
  copies of a ``transfer_bound`` fault, bytes/s.

A ``gpus_read_idle`` fault makes the exporter read idle at the collections
it covers (every activity field 0, power at the idle draw) whatever the
engine did: it watches GPUs the server does not run on.

Each GPU has its own multiplicative noise (``noise``), so the GPUs of one
engine do not read identically.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from inference_obs.metrics import dcgm
from inference_obs.metrics.family import Family
from inference_obs.samples import Floats, Series
from inference_obs.simulate.labels import GpuSlot, Node, gpu_labels
from inference_obs.simulate.scenario import GPU_FAMILIES, DeploymentSpec
from inference_obs.simulate.trace import Activity, Records

__all__ = ["gpu_series"]

# Framebuffer the driver keeps for itself, MiB (FB_USED + FB_FREE is a little below total).
_FB_RESERVED_MIB = 512.0
# Framebuffer a GPU holds with no server on it (driver context), MiB.
_FB_IDLE_MIB = 4.0
# Busy work split of the power draw's dynamic part.
_POWER_BUSY, _POWER_DRAM, _POWER_TENSOR = 0.4, 0.4, 0.2


#: The fields an exporter watching an idle GPU reads 0 on.
_ACTIVITY = (
    dcgm.GPU_UTIL,
    dcgm.PROF_GR_ENGINE_ACTIVE,
    dcgm.PROF_PIPE_TENSOR_ACTIVE,
    dcgm.PROF_DRAM_ACTIVE,
    dcgm.PROF_SM_ACTIVE,
    dcgm.PROF_SM_OCCUPANCY,
)


def _window_mean(activity: Activity, quantity: Floats, ends: Floats, width: float) -> Floats:
    total = activity.integral(quantity, ends) - activity.integral(quantity, ends - width)
    out: Floats = total / width
    return out


def _window_total(records: Records, ends: Floats, width: float) -> Floats:
    """Sum of ``records`` (time-sorted) with times in ``(end - width, end]`` for each end."""
    running = np.concatenate(([0.0], np.cumsum(records.value * records.weight)))
    hi = np.searchsorted(records.time, ends, side="right")
    lo = np.searchsorted(records.time, ends - width, side="right")
    out: Floats = running[hi] - running[lo]
    return out


def _readings(
    spec: DeploymentSpec,
    activity: Activity,
    collect: Floats,
    every: float,
    util_sample: float,
    transfers: tuple[Records, Records],
) -> dict[Family, Floats]:
    profile = spec.gpu
    busy = activity.busy
    compute = busy * activity.compute_share
    memory = busy - compute
    share = _window_mean(activity, busy, collect, every)
    c = _window_mean(activity, compute, collect, every)
    m = _window_mean(activity, memory, collect, every)
    tensor = c * profile.tensor_active_prefill + m * profile.tensor_active_decode
    dram = c * profile.dram_active_prefill + m * profile.dram_active_decode
    dynamic = _POWER_BUSY * share + _POWER_DRAM * dram + _POWER_TENSOR * tensor
    return {
        dcgm.GPU_UTIL: 100.0 * _window_mean(activity, busy, collect, util_sample),
        dcgm.PROF_GR_ENGINE_ACTIVE: share,
        dcgm.PROF_PIPE_TENSOR_ACTIVE: tensor,
        dcgm.PROF_DRAM_ACTIVE: dram,
        dcgm.PROF_SM_ACTIVE: c * profile.sm_active_prefill + m * profile.sm_active_decode,
        dcgm.PROF_SM_OCCUPANCY: c * profile.sm_occupancy_prefill + m * profile.sm_occupancy_decode,
        dcgm.POWER_USAGE: profile.idle_watts + (profile.max_watts - profile.idle_watts) * dynamic,
        dcgm.PROF_PCIE_TX_BYTES: _window_total(transfers[1], collect, every) / every,
        dcgm.PROF_PCIE_RX_BYTES: _window_total(transfers[0], collect, every) / every
        + profile.pcie_bytes_per_second * _window_mean(activity, activity.transfer, collect, every),
    }


def _finish(family: Family, values: Floats, rng: np.random.Generator, noise: float) -> Floats:
    noisy = values * (1.0 + noise * rng.standard_normal(values.size))
    low, high = family.value_range or (0.0, np.inf)
    noisy = np.clip(noisy, low, high)
    if family in (dcgm.GPU_UTIL, dcgm.PROF_PCIE_TX_BYTES, dcgm.PROF_PCIE_RX_BYTES):
        return np.rint(noisy)
    if family is dcgm.POWER_USAGE:
        return np.round(noisy, 3)
    return np.round(noisy, 6)


def gpu_series(
    spec: DeploymentSpec,
    node: Node,
    slot: GpuSlot,
    activity: Activity,
    collect: Floats,
    scrape_at: Floats,
    stamps: Floats,
    *,
    scenario: str,
    every: float,
    util_sample: float,
    server_up: Floats,
    reads_idle: npt.NDArray[np.bool_],
    rng: np.random.Generator,
    exported: frozenset[str],
    transfers: tuple[Records, Records],
) -> Iterator[Series]:
    """The DCGM series of one GPU at the exporter's scrapes.

    ``scrape_at``/``stamps`` are the successful scrape times (seconds from
    the window start / unix seconds); ``server_up`` says, per collection,
    whether the GPU's vLLM server was running (framebuffer held);
    ``reads_idle``, per collection, whether the exporter reads the GPU idle
    (a ``gpus_read_idle`` fault);
    ``exported`` names the families to write; ``transfers`` are the GPU's
    host-to-device and device-to-host copies (:func:`~.transfers.pcie_events`).
    """
    labels = gpu_labels(spec, node, slot, scenario)
    latest = np.searchsorted(collect, scrape_at, side="right") - 1
    keep = latest >= 0
    latest = latest[keep]
    readings = _readings(spec, activity, collect, every, util_sample, transfers)
    for family in _ACTIVITY:
        readings[family] = np.where(reads_idle, 0.0, readings[family])
    readings[dcgm.POWER_USAGE] = np.where(
        reads_idle, spec.gpu.idle_watts, readings[dcgm.POWER_USAGE]
    )
    total = float(spec.gpu.memory_total_mib)
    used = np.where(server_up > 0, total * spec.kv_cache.gpu_memory_utilization, _FB_IDLE_MIB) * (
        1.0 + 0.001 * rng.standard_normal()
    )
    readings[dcgm.FB_USED] = np.rint(used)
    readings[dcgm.FB_FREE] = total - _FB_RESERVED_MIB - np.rint(used)
    for family in GPU_FAMILIES:
        values = readings[family]
        if family not in (dcgm.FB_USED, dcgm.FB_FREE):
            values = _finish(family, values, rng, spec.gpu.noise)
        if family.name in exported:
            yield Series(family.name, labels, stamps[keep], values[latest])
