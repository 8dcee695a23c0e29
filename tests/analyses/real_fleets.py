"""Datasets made of real ``/metrics`` text (tests/fixtures/real), scraped as a fleet would be.

Each fixture is served ``SCRAPES`` times, 15 s apart, with counters and
histograms grown by :func:`~tests.source.fake_exporters.advancing` (10
observations of 1 ms per histogram and scrape); a Kubernetes scrape adds its
target labels (the scraped pod's ``pod``/``namespace``/``container``) as
Prometheus does with ``honor_labels: false``. The report is the CLI's, with
its defaults.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from inference_obs.cli import main
from inference_obs.deployment import Deployment
from inference_obs.samples import Labels
from inference_obs.source.capture import Recording
from inference_obs.source.openmetrics.exposition import parse_exposition
from inference_obs.source.scrape import Target, parse_target
from tests.source.fake_exporters import advancing, real_text

SCRAPES = 9
START_MS = 1_777_000_000_000
INTERVAL_MS = 15_000

#: The workload pod of dcgm_4x_pod_uid_empty.prom (GPU 6), and its namespace and container.
WORKLOAD = {
    "pod": "llama-3-2-1b-7577f87fc7-dhb97",
    "namespace": "nim-workload",
    "container": "llama-3-2-1b-ctr",
}
#: The dcgm-exporter pod a GPU Operator runs on that node, as its ServiceMonitor labels it.
EXPORTER = {
    "pod": "nvidia-dcgm-exporter-5tc8x",
    "namespace": "gpu-operator",
    "container": "nvidia-dcgm-exporter",
}


def target(url: str, labels: Mapping[str, str] = {}) -> Target:
    """``[JOB=]URL`` with Kubernetes target ``labels``."""
    found, _ = parse_target(url)
    return replace(found, labels=Labels(labels))


def record(
    out: Path,
    served: Sequence[tuple[Target, str, int]],
    deployments: Sequence[Deployment],
) -> Path:
    """A dataset of ``SCRAPES`` scrapes of each (target, fixture text, offset ms)."""
    recording = Recording()
    for n in range(SCRAPES):
        for where, text, offset_ms in served:
            body = advancing(text, n).encode()
            at = START_MS + n * INTERVAL_MS + offset_ms
            recording.add(where, at, parse_exposition(body, source=where.url))
    recording.write(
        out,
        interval_s=INTERVAL_MS / 1000,
        title="real fixtures",
        method=["real /metrics text, served again"],
        deployments=deployments,
    )
    return out


def fixture(name: str) -> str:
    """A real fixture's text."""
    return real_text(name)


def report(dataset: Path, out: Path) -> dict[str, Any]:
    """The JSON report of ``dataset`` as ``inference-obs report`` writes it by default (its
    Markdown beside it, in ``out``)."""
    status = main(["report", "--dataset", str(dataset), "--format", "md,json", "--out", str(out)])
    assert status == 0
    document: dict[str, Any] = json.loads((out / "report.json").read_text())
    return document


def measurements(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The report's measurements by key."""
    return {m["key"]: m for m in document["measurements"]}


def kinds(measurement: Mapping[str, Any]) -> list[str]:
    """The kinds of a measurement's annotations."""
    return [a["kind"] for a in measurement["annotations"]]
