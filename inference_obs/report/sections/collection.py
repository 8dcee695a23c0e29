"""Collection health: what was collected, before any number is read from it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from inference_obs import analyses
from inference_obs.analyses.collection import COVERAGE
from inference_obs.analyses.naming import MANY, NAMED
from inference_obs.reading.measurement import Measurement
from inference_obs.reading.wording import cell, number, when
from inference_obs.report.document import Block, Heading, Items, Paragraph, Table

if TYPE_CHECKING:
    from inference_obs.analyses.collection import CollectionResult
    from inference_obs.report.model import Report

__all__ = ["collection"]


def _noted(m: Measurement) -> str:
    """The cell, then what its annotations name (the GPUs, the targets that reset)."""
    named = "; ".join(a.message for a in m.annotations if a.kind != "no_data")
    return f"{cell(m)} ({named})" if named and m.ok and m.value else cell(m)


def _samples(c: CollectionResult) -> str:
    """Per instance while there are few; beyond, how many had the expected count and only
    the exceptions (a fleet's cell stays one line)."""
    if len(c.app_samples) <= MANY or c.expected_app_samples is None:
        counts = ", ".join(f"{k}: {cell(m)}" for k, m in c.app_samples.items())
        return counts or "no data"
    # Expected to within one scrape: a target's first sample may fall either side of the start.
    expected = c.expected_app_samples
    off = {k: m for k, m in c.app_samples.items() if m.value is None or abs(m.value - expected) > 1}
    usual = len(c.app_samples) - len(off)
    text = f"{usual} of {len(c.app_samples)} instances: {number(expected, 3)} each, as expected"
    if off:
        shown = ", ".join(f"{k}: {cell(m)}" for k, m in list(off.items())[:NAMED])
        more = f" and {len(off) - NAMED} more" if len(off) > NAMED else ""
        text += f"; {shown}{more}"
    return text


def collection(report: Report) -> Iterator[Block]:
    yield Heading(2, "Collection health")
    yield Paragraph(
        "Scrape intervals are measured from the samples (median spacing), per deployment. "
        "A gap is a spacing longer than the set multiple of the measured interval; a GPU "
        "stopped if its last sample came that long before the window's end."
    )
    rows = []
    lines = []
    for d in report.deployments:
        c = d.of(analyses.collection)
        expected = "—" if c.expected_app_samples is None else number(c.expected_app_samples, 3)
        rows.append(
            (
                d.deployment.name,
                f"{cell(c.scrape_interval)} / {cell(c.gpu_scrape_interval)}",
                _samples(c),
                expected,
                cell(c.scrape_gaps),
                _noted(c.counter_resets),
                _noted(c.gpus_stopped),
                _noted(c.gpus_silent),
            )
        )
        lines += [a.message + "." for a in c.covered_share.annotations if a.kind == COVERAGE]
        if c.gaps:
            g = c.gaps[0]
            lines.append(
                f"{d.deployment.name}: longest gap {g.target}, no sample from {when(g.start)} "
                f"to {when(g.end)} ({number(g.seconds, 3)} s); {len(c.gaps)} in all."
            )
    yield Table(
        (
            "deployment",
            "interval app / GPU (s)",
            "app samples per instance",
            "expected",
            "scrape gaps",
            "counter resets",
            "GPUs stopped",
            "GPUs never reporting",
        ),
        tuple(rows),
    )
    note = (
        "A new pod is a new series, not a counter reset; a GPU with no series at all is "
        "counted against the declared GPUs, not named (see Deployments compared)."
    )
    yield Items(tuple(lines), lead=note) if lines else Paragraph(note)
