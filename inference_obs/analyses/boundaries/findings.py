"""Boundary intervals: app scrapes in a row where work waited or ran while the GPUs idled.

:func:`find_intervals` walks one replica's :class:`~.evidence.Track`
and keeps runs of boundary rows: work present (waiting + running > 0) and a
duty cycle under ``idle_below``, or a row the queueing analysis classified
``starved`` (requests waited on idle GPUs) or ``inconsistent`` (requests ran
while every GPU read 0). A run of ``min_samples`` rows or more is
*sustained* and counts toward the starved reading; a shorter one is kept,
not sustained, only where queueing named a row of it, so that every such row
of the queue table is named here too (a single row may be misaligned scrapes).
Each run is attributed from the medians, over its scrapes, of the evidence
aligned with them, so scrapes at its edges (where the GPU readings lag) do
not dilute it:

- **host** when the server process uses ``process_cores`` or more (a Python
  process holds its GIL: near one core it is saturated), the containers are
  throttled in ``throttled_ratio`` of their CFS periods or use
  ``limit_share`` of their CPU limit, or the node's CPUs are
  ``node_busy_ratio`` busy;
- **transfer** when the larger PCIe direction carries ``pcie_share`` of the
  link's rate (``pcie_limit_bytes_per_second``) or more;
- the cause with the larger margin over its line when both hold;
- **unexplained** otherwise, naming the evidence that had no data.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

import numpy as np
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from inference_obs.analyses.boundaries import evidence as ev
from inference_obs.analyses.boundaries.host import ratio
from inference_obs.analyses.queueing import QueueClass
from inference_obs.analyses.unit import Settings
from inference_obs.samples import Window

__all__ = [
    "ON_IDLE_GPUS",
    "BoundariesSettings",
    "BoundaryCause",
    "BoundaryInterval",
    "find_intervals",
]

#: The queueing classes of rows where requests waited or ran on idle GPUs.
ON_IDLE_GPUS = frozenset({QueueClass.STARVED.value, QueueClass.INCONSISTENT.value})


class BoundaryCause(StrEnum):
    """What the GPUs of a boundary interval waited on."""

    HOST = "host"
    TRANSFER = "transfer"
    UNEXPLAINED = "unexplained"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BoundariesSettings(Settings):
    """Where the boundary analysis draws its lines; the link rate and tolerance it reads with."""

    idle_below: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Duty cycle (ratio 0-1) below which a replica's GPUs idle: a row with work "
        "present (waiting + running > 0) and a duty cycle under it is a boundary row. Times "
        "100, the GPU_UTIL percent the rows are classified at as queueing classifies them "
        "(queueing.busy_threshold defaults to the same 50).",
    )
    min_samples: int = Field(
        2,
        ge=1,
        description="Boundary rows (app scrapes, or tiles) in a row that make a sustained "
        "boundary interval, the kind the starved reading counts; a shorter one is listed only "
        "where queueing classified a row of it starved or inconsistent.",
    )
    process_cores: float = Field(
        0.9,
        gt=0,
        description="Server process CPU, cores, from which it counts as saturated (a Python "
        "process holds its GIL) and an interval is attributed to the host.",
    )
    throttled_ratio: float = Field(
        0.25,
        gt=0,
        le=1,
        description="Share (ratio 0-1) of the containers' CFS periods throttled from which an "
        "interval is attributed to the host.",
    )
    limit_share: float = Field(
        0.95,
        gt=0,
        le=1,
        description="The containers' CPU use over their CPU limit (ratio 0-1) from which an "
        "interval is attributed to the host.",
    )
    node_busy_ratio: float = Field(
        0.95,
        gt=0,
        le=1,
        description="Busy share (ratio 0-1) of the nodes' CPUs from which an interval is "
        "attributed to the host.",
    )
    pcie_share: float = Field(
        0.7,
        gt=0,
        le=1,
        description="The larger PCIe direction over the link rate (ratio 0-1) from which an "
        "interval is attributed to transfer.",
    )
    starved_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="Share (ratio 0-1) of the rows with work that lie in boundary intervals "
        "from which a replica reads starved.",
    )
    saturated_duty: float = Field(
        0.85,
        gt=0,
        le=1,
        description="Duty cycle (ratio 0-1) from which a replica whose requests wait in "
        "queued_share of the rows with work reads saturated.",
    )
    queued_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="Share (ratio 0-1) of the rows with work where requests waited from which "
        "a replica at saturated_duty reads saturated.",
    )
    pcie_limit_bytes_per_second: float = Field(
        5.0e10,
        gt=0,
        description="Usable PCIe rate of one GPU's link, per direction, bytes/s: what "
        "pcie_share is a share of (5e10: Gen5 x16; about 2.5e10 for Gen4 x16).",
    )
    tolerance_s: float | None = Field(
        None,
        ge=0,
        description="Per scrape only (refused with a tile step): largest distance, seconds, "
        "between an app scrape and the GPU reading or host sample aligned with it. None: the "
        "larger of the app's median scrape interval and the duty family's scrape interval.",
    )


class BoundaryInterval(_Frozen):
    """App scrapes of one replica in a row where work was present and the GPUs idled.

    Evidence values are medians over the interval's scrapes (None: not exported).
    """

    replica: str
    cause: BoundaryCause
    reason: str
    start: AwareDatetime
    end: AwareDatetime
    samples: int
    max_waiting: float = Field(description="Largest sampled queue, requests.")
    max_running: float = Field(description="Largest sampled batch, requests.")
    duty: float = Field(description="Share of time the GPUs computed, ratio 0-1.")
    server_cpu_cores: float | None = Field(description="API-server process, cores.")
    container_cpu_cores: float | None = Field(description="Server containers, cores.")
    cpu_limit_cores: float | None = Field(description="Their CPU limit, cores.")
    throttled_ratio: float | None = Field(description="Throttled share of CFS periods, 0-1.")
    node_cpu_busy_ratio: float | None = Field(description="Busy share of the node's CPUs.")
    pcie_rx_bytes_per_second: float | None = Field(description="Host to GPU, mean per GPU.")
    pcie_tx_bytes_per_second: float | None = Field(description="GPU to host, mean per GPU.")
    pcie_limit_share: float | None = Field(description="Larger direction / link rate, 0-1.")
    queue_classes: tuple[str, ...] = Field(
        default=(),
        description="The classes queueing gave its rows (starved, inconsistent, busy, ...), "
        "in order of first appearance; empty where no queueing row aligns.",
    )
    sustained: bool = Field(
        default=True,
        description="min_samples rows or more: counts toward the starved reading. A shorter "
        "interval is kept only where queueing classified a row of it starved or inconsistent.",
    )


def _attribute(
    track: ev.Track, rows: slice, th: BoundariesSettings
) -> tuple[BoundaryCause, str, dict[str, float | None]]:
    """Cause of the interval ``rows`` of ``track``, why, and its evidence (medians)."""
    pcie = np.fmax(track.pcie_rx, track.pcie_tx) / th.pcie_limit_bytes_per_second
    found = {
        "server_cpu_cores": ev.median(track.process, rows),
        "container_cpu_cores": ev.median(track.container, rows),
        "cpu_limit_cores": ev.median(track.limit, rows),
        "throttled_ratio": ev.median(ratio(track.throttled, track.periods), rows),
        "node_cpu_busy_ratio": ev.median(ratio(track.node_busy, track.node_all), rows),
        "pcie_rx_bytes_per_second": ev.median(track.pcie_rx, rows),
        "pcie_tx_bytes_per_second": ev.median(track.pcie_tx, rows),
        "pcie_limit_share": ev.median(pcie, rows),
    }
    used = ev.median(ratio(track.container, track.limit), rows)
    throttled = found["throttled_ratio"]
    host_tests = (
        ("server process at {:.3g} cores", found["server_cpu_cores"], th.process_cores),
        ("containers throttled in {:.0%} of CFS periods", throttled, th.throttled_ratio),
        ("containers at {:.0%} of their CPU limit", used, th.limit_share),
        ("node CPUs {:.0%} busy", found["node_cpu_busy_ratio"], th.node_busy_ratio),
    )
    transfer_test = ("PCIe at {:.0%} of the link rate", found["pcie_limit_share"], th.pcie_share)
    margins: dict[BoundaryCause, tuple[float, list[str]]] = {}
    for cause, tests in (
        (BoundaryCause.HOST, host_tests),
        (BoundaryCause.TRANSFER, [transfer_test]),
    ):
        hits = [
            (v / line, text.format(v)) for text, v, line in tests if v is not None and v >= line
        ]
        if hits:
            margins[cause] = (max(h[0] for h in hits), [h[1] for h in hits])
    if not margins:
        absent = [k for k, v in found.items() if v is None]
        why = "no host or transfer evidence crossed its threshold"
        return (
            BoundaryCause.UNEXPLAINED,
            why + (f" (no data: {', '.join(absent)})" if absent else ""),
            found,
        )
    cause = max(margins, key=lambda c: margins[c][0])
    return cause, "; ".join(text for c in margins for text in margins[c][1]), found


def find_intervals(
    replica: str,
    track: ev.Track,
    th: BoundariesSettings,
    window: Window,
    classes: Sequence[str] = (),
) -> list[BoundaryInterval]:
    """The boundary intervals of one replica, attributed (see the module).

    ``classes`` holds the queueing class of each row of ``track`` (``""``
    where none aligns; empty: none known). Interval times are in
    ``window``'s timezone.
    """
    named = np.array([c in ON_IDLE_GPUS for c in classes] or [False] * track.times_ms.size)
    flags = track.boundary(th.idle_below) | named
    out = []
    start = 0
    for k in range(1, flags.size + 1):
        if k < flags.size and flags[k] == flags[start]:
            continue
        sustained = k - start >= th.min_samples
        if flags[start] and (sustained or named[start:k].any()):
            rows = slice(start, k)
            cause, reason, found = _attribute(track, rows, th)
            zone = window.start.tzinfo
            seen = [c for c in classes[start:k] if c]
            out.append(
                BoundaryInterval(
                    replica=replica,
                    cause=cause,
                    reason=reason,
                    start=datetime.fromtimestamp(
                        (int(track.times_ms[start]) - track.tile_ms) / 1000.0, tz=zone
                    ),
                    end=datetime.fromtimestamp(int(track.times_ms[k - 1]) / 1000.0, tz=zone),
                    samples=k - start,
                    max_waiting=float(track.waiting[rows].max()),
                    max_running=float(track.running[rows].max()),
                    duty=float(np.median(track.duty[rows])),
                    queue_classes=tuple(dict.fromkeys(seen)),
                    sustained=sustained,
                    **found,
                )
            )
        start = k
    return out
