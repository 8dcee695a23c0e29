"""GPU duty cycle at the stage boundaries: do the GPUs wait on the host while work is there?

:mod:`~.stages` is the analysis; :mod:`~.host` reads the host, container and
PCIe series it attributes intervals with, :mod:`~.evidence` turns them into
per-scrape rates, and :mod:`~.findings` states what the intervals show.
"""

from __future__ import annotations

from inference_obs.analyses.boundaries.stages import (
    BoundariesResult,
    BoundariesSettings,
    BoundaryCause,
    BoundaryInterval,
    CapacityReading,
    ReplicaBoundaries,
    boundaries,
)

__all__ = [
    "BoundariesResult",
    "BoundariesSettings",
    "BoundaryCause",
    "BoundaryInterval",
    "CapacityReading",
    "ReplicaBoundaries",
    "boundaries",
]
