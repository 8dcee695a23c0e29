"""Deployments found in a source: what ``inference-obs discover`` writes, and selector checks.

:func:`discover` reads the label sets of a live Prometheus or a dataset
(:mod:`~.inventory`: serving replicas, their models and engines, the GPUs
each holds), groups the replicas into one deployment per model and hardware
class with explicit selectors (:mod:`~.group`), and :func:`deployments_yaml`
writes them as a commented deployments file that ``report --deployments``
reads as is. :func:`unmatched_selectors` (:mod:`~.check`) names the
selectors of a deployments file that match nothing in a window.

Examples
--------
>>> from pathlib import Path
>>> from inference_obs.source.dataset.source import DatasetSource
>>> source = DatasetSource(Path("datasets/r1-decode"))
>>> found = discover(source, source.dataset.manifest.window.window())
>>> [(d.name, d.replicas, d.selector) for d in found.deployments]
[('DeepSeek-R1-0528', ('r1-01', 'r1-02'), {'namespace': 'llm', 'pod': '~r1-.*'})]
"""

from __future__ import annotations

from dataclasses import dataclass

from inference_obs.deployment import Deployment
from inference_obs.discover.check import unmatched_selectors
from inference_obs.discover.group import Found, deployments
from inference_obs.discover.inventory import Gpu, Inventory, Replica, inventory
from inference_obs.discover.yaml_file import deployments_yaml
from inference_obs.samples import Window
from inference_obs.source.base import Source

__all__ = [
    "Discovery",
    "Found",
    "Gpu",
    "Inventory",
    "Replica",
    "deployments_yaml",
    "discover",
    "inventory",
    "unmatched_selectors",
]


@dataclass(frozen=True)
class Discovery:
    """What :func:`discover` found.

    Attributes
    ----------
    found
        One entry per deployment, with its replicas and notes.
    inventory
        Every replica and GPU seen.
    notes
        Findings about the whole source: GPUs no serving replica holds, GPU
        series without a pod label.
    """

    found: tuple[Found, ...]
    inventory: Inventory
    notes: tuple[str, ...]

    @property
    def deployments(self) -> tuple[Deployment, ...]:
        """The deployments, in file order."""
        return tuple(f.deployment for f in self.found)

    def to_yaml(self, source: str) -> str:
        """The deployments file (see :func:`deployments_yaml`); ``source`` names where from."""
        w = self.inventory.window
        span = f"{w.start.isoformat()} to {w.end.isoformat()}"
        return deployments_yaml(
            list(self.found), source=source, window=span, notes=list(self.notes)
        )


def discover(source: Source, window: Window) -> Discovery:
    """Find the serving deployments with series in ``window`` (label sets only; no samples).

    Parameters
    ----------
    source
        A live source or a dataset.
    window
        Replicas and GPUs with samples in it are found.

    Returns
    -------
    Discovery
        Empty ``found`` when no vLLM or SGLang series has samples in the window.
    """
    seen = inventory(source, window)
    found = deployments(seen)
    notes = []
    spare = seen.unattributed_gpus()
    unnamed = [g for g in spare if g.pod is None]
    others = sorted({g.pod for g in spare if g.pod is not None})
    if unnamed:
        notes.append(
            f"{len(unnamed)} GPU(s) carry no pod label (pod, exported_pod, pod_name): not "
            "attributed to any replica"
        )
    if others:
        shown = ", ".join(others[:10]) + (
            f" and {len(others) - 10} more" if len(others) > 10 else ""
        )
        notes.append(f"GPUs held by pods with no vLLM or SGLang series: {shown}")
    if not seen.gpu_families and seen.replicas:
        notes.append("no DCGM series in the window: GPU models and counts are placeholders")
    return Discovery(tuple(found), seen, tuple(notes))
