"""What the GPUs, the host CPUs and the PCIe links did at each row of a replica.

Each row of a replica (:mod:`~inference_obs.reading.rows`: an app scrape of
its vLLM server, ``num_requests_waiting`` and ``num_requests_running`` summed
over its engines, or a tile of ``step`` seconds) becomes one row of a
:class:`Track`, with what was aligned with it: GPU gauges averaged over the
replica's GPUs by the server (:func:`~inference_obs.reading.rows.align_gpu`)
and the host evidence (:mod:`~inference_obs.analyses.boundaries.host`):

- ``duty``: the share of time the GPUs computed (ratio 0-1);
- ``pcie_rx``, ``pcie_tx``: host-to-device and device-to-host bytes/s;
- the server process's and its containers' CPU, throttling and limit, and
  the nodes' CPUs.

Per tile, PCIe and host evidence are asked only for the tiles where work was
present while the GPUs computed less than ``idle_below`` of the time, the
only rows a boundary interval can hold. Rows without evidence are NaN: no
evidence, never 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import numpy.typing as npt

from inference_obs.analyses.boundaries.host import ask_host_evidence, host_evidence
from inference_obs.metrics import dcgm
from inference_obs.metrics.family import Family
from inference_obs.query import Binary, Expr, Number, Selector, on
from inference_obs.reading.alignment import gpu_label_sets, gpu_per_replica, replica_of
from inference_obs.reading.context import Reading
from inference_obs.reading.resolution import series_count
from inference_obs.reading.rows import AppRows, align_gpu, app_rows
from inference_obs.samples import Floats, Ints, Labels

__all__ = ["Evidence", "Track", "gather", "median"]

PCIE = (dcgm.PROF_PCIE_RX_BYTES, dcgm.PROF_PCIE_TX_BYTES)


@dataclass(frozen=True, slots=True)
class Track:
    """One replica's rows and what was aligned with each (arrays of equal length).

    Attributes
    ----------
    times_ms
        App scrape times, or the tiles' ends, unix ms.
    tile_ms
        0 when rows are app scrapes; else the tile width, ms (a row spans
        ``times_ms - tile_ms`` to ``times_ms``).
    waiting, running
        Requests, summed over the replica's engines.
    duty
        Share of time the GPUs computed, mean over GPUs (ratio 0-1).
    pcie_rx, pcie_tx
        PCIe rates, mean over GPUs (bytes/s).
    process, container
        Cores used by the server process and by its containers.
    throttled, periods
        CFS periods throttled and elapsed, per second.
    limit
        CPU limit of the containers (cores).
    node_busy, node_all
        Non-idle and all CPU-seconds per second of the replica's nodes.
    """

    times_ms: Ints
    tile_ms: int
    waiting: Floats
    running: Floats
    duty: Floats
    pcie_rx: Floats
    pcie_tx: Floats
    process: Floats
    container: Floats
    throttled: Floats
    periods: Floats
    limit: Floats
    node_busy: Floats
    node_all: Floats

    def boundary(self, idle_below: float) -> npt.NDArray[np.bool_]:
        """Rows with work present (waiting + running > 0) while the GPUs computed less."""
        out: npt.NDArray[np.bool_] = (self.waiting + self.running > 0) & (self.duty < idle_below)
        return out


def median(values: Floats, rows: Sequence[int] | slice) -> float | None:
    """Median of ``values[rows]`` ignoring NaN; None when every one is NaN."""
    picked = values[rows]
    picked = picked[~np.isnan(picked)]
    return float(np.median(picked)) if picked.size else None


@dataclass(frozen=True, slots=True)
class Evidence:
    """Every replica's :class:`Track`, and what it was read from.

    Attributes
    ----------
    tracks
        By replica name (the values of ``keys``, ``/``-joined).
    names
        By replica, the labels that name it: add them as matchers to select it.
    keys
        Label names identifying a replica on both app and GPU series.
    tolerance_ms
        Per scrape: largest distance of an aligned GPU reading (see
        :meth:`~inference_obs.reading.alignment.GpuScrapes.at`) or host
        sample from its app sample; per tile 0.
    selectors
        Every family's selector (waiting, running and the duty family
        first), for the provenance.
    queries
        What the server reduced: per scrape the GPU families' ``avg by``
        replica, per tile every family's tile query, for rechecking.
    read_raw
        The selectors whose raw samples were read: per scrape the app and
        host families; per tile none.
    missing
        Families (by name) without any series for the deployment.
    """

    tracks: dict[str, Track]
    names: dict[str, Labels]
    keys: tuple[str, ...]
    tolerance_ms: float
    selectors: tuple[Selector, ...]
    queries: tuple[Expr, ...]
    read_raw: tuple[Selector, ...]
    missing: tuple[str, ...]


def _hosts(gpu: Sequence[Labels], keys: tuple[str, ...]) -> dict[str, set[str]]:
    """Per replica, the host names its GPU series (their label sets) carry."""
    out: dict[str, set[str]] = {}
    for labels in gpu:
        name = next((labels[k] for k in dcgm.HOSTNAME_LABELS if k in labels), None)
        if name is not None:
            out.setdefault(replica_of(labels, keys), set()).add(name)
    return out


def _idle_with_work(rows: AppRows, duty: Expr, scale: float, idle_below: float) -> Expr:
    """Per tile: replicas whose GPUs computed under ``idle_below`` while work was present."""
    waiting, running = rows.reads
    work = Binary("or", Binary(">", waiting, Number(0)), Binary(">", running, Number(0)))
    share = duty if scale == 1.0 else duty * scale  # the Track's duty, as the server computes it
    idle = Binary("<", share, Number(idle_below))
    return Binary("and", idle, work, matching=on(*rows.keys))


def gather(
    r: Reading, duty: Family, scale: float, *, tolerance_ms: float | None, idle_below: float
) -> Evidence:
    """Read every family the boundary analysis needs and align it per replica.

    ``duty`` is the GPU family read as the computing share, times ``scale``
    (0.01 for GPU_UTIL's percent). Per scrape (``r.step`` None) the
    tolerance, ms, defaults (None), as in queueing, to the larger of the
    app's median scrape interval and the duty family's scrape interval; per
    tile the rows are tiles of ``r.step`` seconds and PCIe and host evidence
    are asked only where the duty share is under ``idle_below`` with work present.
    """
    source, window = r.source, r.window
    gpus = {family: family.select(r.deployment.gpu_matchers) for family in (duty, *PCIE)}
    # Label sets only: the GPU samples themselves are reduced per replica by the server.
    gpu_labels = gpu_label_sets(source, r.deployment, duty, window)
    rows = app_rows(source, r.deployment, window, gpu_labels, r.step)
    hosts = _hosts(gpu_labels, rows.keys)
    # What needs only the rows is asked now, alongside the duty family: whether the
    # PCIe families have series, their per-replica means (per scrape, where they do
    # not depend on the duty family's answer) and the host evidence's questions.
    counted = {f: r.soon(partial(series_count, source, gpus[f], window)) for f in PCIE}
    if r.step is None:
        for family in PCIE:
            read = partial(gpu_per_replica, reach_ms=rows.interval_ms)  # as align_gpu reads it
            r.soon(partial(read, source, gpus[family], rows.keys, window))
    r.soon(partial(ask_host_evidence, r, rows, hosts))
    busy = align_gpu(source, rows, gpus[duty], window, tolerance_ms=tolerance_ms)
    where = None if r.step is None else _idle_with_work(rows, busy.query, scale, idle_below)
    # A family without series is not asked: its rows are NaN, and it is named missing.
    present = [family for family in PCIE if counted[family].result() > 0]
    aligned = r.together(
        [
            partial(
                align_gpu,
                source,
                rows,
                gpus[f],
                window,
                tolerance_ms=busy.tolerance_ms,
                where=where,
            )
            for f in present
        ],
    )
    pcie = dict(zip(present, aligned, strict=True))

    def pcie_at(family: Family, replica: str) -> Floats:
        found = pcie.get(family)
        return found.means[replica] if found else np.full(rows.times[replica].size, np.nan)

    found = host_evidence(r, rows, hosts, busy.tolerance_ms, where)
    tracks = {}
    for replica, times in rows.times.items():
        tracks[replica] = Track(
            times_ms=times,
            tile_ms=rows.tile_ms,
            waiting=rows.waiting[replica],
            running=rows.running[replica],
            duty=busy.means[replica] * scale,
            pcie_rx=pcie_at(dcgm.PROF_PCIE_RX_BYTES, replica),
            pcie_tx=pcie_at(dcgm.PROF_PCIE_TX_BYTES, replica),
            process=found.process[replica],
            container=found.container[replica],
            throttled=found.throttled[replica],
            periods=found.periods[replica],
            limit=found.limit[replica],
            node_busy=found.node_busy[replica],
            node_all=found.node_all[replica],
        )
    gpu_missing = [
        family.name for family in gpus if not (gpu_labels if family is duty else family in pcie)
    ]
    # Per scrape the app and host samples are read raw and the GPU families averaged by the
    # server; per tile every family is reduced by the server.
    read_raw = (*(rows.selectors if r.step is None else ()), *found.read_raw)
    queries = (
        *(() if r.step is None else rows.reads),
        *busy.reads,
        *(q for p in pcie.values() for q in p.reads),
        *found.queries,
    )
    return Evidence(
        tracks=tracks,
        names=rows.names,
        keys=rows.keys,
        tolerance_ms=busy.tolerance_ms,
        selectors=(*rows.selectors, *gpus.values(), *found.selectors),
        queries=queries,
        read_raw=read_raw,
        missing=(*rows.missing, *gpu_missing, *found.missing),
    )
