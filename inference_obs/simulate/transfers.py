"""Host-device copies of a simulated engine: what DCGM's PCIe rates are made of.

Every GPU of an engine sees, host to device (``DCGM_FI_PROF_PCIE_RX_BYTES``):

- each engine step's inputs (token ids, positions, block tables, sampling
  parameters): ``pcie_rx_bytes_per_step`` of the deployment's
  :class:`~inference_obs.simulate.engine_spec.GpuProfile`;
- a request's prompt token ids when it is first scheduled, and the KV
  blocks of its external cache hits (``kv_bytes_per_token`` per token,
  split over the engine's GPUs, as tensor parallelism shards the KV cache);

and device to host (``TX``) each step's sampled tokens,
``pcie_tx_bytes_per_step``. A ``transfer_bound`` fault adds copies that run
the link at its full rate (:attr:`~inference_obs.simulate.trace.Activity.transfer`);
:mod:`~inference_obs.simulate.emit_dcgm` turns both into rates.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from inference_obs.samples import Floats
from inference_obs.simulate.scenario import DeploymentSpec
from inference_obs.simulate.trace import EngineRun, Records

__all__ = ["TOKEN_ID_BYTES", "pcie_events"]

TOKEN_ID_BYTES = 4
"""Bytes of one token id in the engine's input tensors (int32)."""


def _sorted(time: Floats, amount: Floats) -> Records:
    order = np.argsort(time, kind="stable")
    return Records(time[order], amount[order], np.ones(time.size))


def pcie_events(
    spec: DeploymentSpec, run: EngineRun, rows: pd.DataFrame
) -> tuple[Records, Records]:
    """Bytes copied host-to-device and device-to-host on each GPU of one engine.

    Parameters
    ----------
    spec
        The deployment (its GPU profile sets the bytes per step and per token).
    run
        The engine's trace: its step records give the per-step copies.
    rows
        The engine's requests in the ground-truth table (``scheduled``,
        ``prompt_tokens``, ``external_hit_tokens``).

    Returns
    -------
    tuple of Records
        Receive (host to device) and transmit (device to host) events: at
        ``time`` (seconds from the window start), ``value`` bytes, per GPU.
    """
    gpu = spec.gpu
    gpus = spec.hardware.gpus_per_replica // spec.engines_per_replica
    steps = run.iteration_tokens
    scheduled = rows["scheduled"].to_numpy(dtype=np.float64)
    known = ~np.isnan(scheduled)
    prompt = rows["prompt_tokens"].to_numpy(dtype=np.float64)[known] * TOKEN_ID_BYTES
    external = rows["external_hit_tokens"].to_numpy(dtype=np.float64)[known]
    kv = external * gpu.kv_bytes_per_token / gpus
    rx = _sorted(
        np.concatenate((steps.time, scheduled[known])),
        np.concatenate((steps.weight * gpu.pcie_rx_bytes_per_step, prompt + kv)),
    )
    tx = _sorted(steps.time.copy(), steps.weight * gpu.pcie_tx_bytes_per_step)
    return rx, tx
