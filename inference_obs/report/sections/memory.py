"""Memory and errors: the largest sampled memory use, Xid codes and KV-connector failures."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.naming import MANY
from inference_obs.reading.measurement import Measurement, Status
from inference_obs.reading.wording import cell
from inference_obs.report.document import Block, Heading, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.report.model import Report

__all__ = ["memory_and_errors"]

#: Bytes per GiB: working sets are shown in GiB.
GIB = 2.0**30
ABSENCE = "no series (not evidence of absence)"


def _or_absent(m: Measurement, scale: float = 1.0) -> str:
    """The cell, or a no-series note that does not read as 'none happened'."""
    return cell(m, scale) if m.ok or m.status is not Status.NO_DATA else ABSENCE


def _each(values: Mapping[str, Measurement], scale: float = 1.0) -> str:
    """Every replica's value while there are few; beyond, the range (the distribution and
    the outliers are under Replicas)."""
    if len(values) <= MANY:
        return ", ".join(f"{k}: {cell(m, scale)}" for k, m in values.items()) or "—"
    known = sorted((m for m in values.values() if m.value is not None), key=lambda m: m.value or 0)
    if not known:
        return f"{len(values)} replicas, no data"
    low, high = known[0], known[-1]
    return f"{len(values)} replicas, {cell(low, scale)} to {cell(high, scale)}: see Replicas"


def memory_and_errors(report: Report) -> Iterator[Block]:
    yield Heading(2, "Memory and errors")
    yield Paragraph(
        "Sampled maxima over the window: a peak between two scrapes is not seen. KV-cache "
        "usage is the fraction (0-1) of logical KV blocks held by live requests: GPU memory "
        "near capacity does not mean a full KV cache. The working set is host memory of "
        "one container (CPU offload included). The Xid value is the last code a GPU "
        "reported (0: none), not a count. A family with no series says nothing either way: "
        "no Xid series is not the absence of Xid errors. A Mooncake operation mean is per "
        "operation, not waiting added to each request."
    )
    rows = []
    for d in report.deployments:
        m, e = d.of(analyses.memory), d.of(analyses.errors)
        rows.append(
            (
                d.deployment.name,
                f"{_or_absent(m.kv_cache_usage_max)} ({_each(m.kv_cache_usage_max_per_replica)})"
                if m.kv_cache_usage_max.ok
                else _or_absent(m.kv_cache_usage_max),
                _or_absent(m.working_set_max, 1 / GIB),
                _or_absent(e.xid_last),
                _or_absent(e.mooncake_failed_keys),
                _each(e.mooncake_operation_mean, 1000) if e.mooncake_operation_mean else ABSENCE,
            )
        )
    yield Table(
        (
            "deployment",
            "KV-cache usage max (per replica)",
            "container working set max (GiB)",
            "last Xid code (max over GPUs)",
            "Mooncake failed keys",
            "Mooncake operation mean (ms)",
        ),
        tuple(rows),
    )
