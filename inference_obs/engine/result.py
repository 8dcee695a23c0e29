"""The result of an engine function: one value per series (or group), and caveats."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inference_obs.errors import Annotation
from inference_obs.samples import Floats

__all__ = ["Evaluation"]


@dataclass(frozen=True, slots=True, eq=False)
class Evaluation:
    """Values of a function for each input series (or histogram group).

    Attributes
    ----------
    values
        float64, one per series; meaningful only where ``present``.
    present
        Whether the series produced an output sample. Prometheus drops a
        series from the result (rather than returning NaN) when, e.g., a
        window holds fewer than two samples for ``rate``.
    annotations
        Non-fatal conditions met while computing (forced monotonicity, too
        few samples to extrapolate), each naming what it concerns.
    """

    values: Floats
    present: npt.NDArray[np.bool_]
    annotations: tuple[Annotation, ...] = ()

    def __post_init__(self) -> None:
        if self.values.shape != self.present.shape or self.values.ndim != 1:
            # An invariant of the engine's own code: no input reaches here unshaped.
            raise ValueError(
                f"values {self.values.shape} and present {self.present.shape} must be equal 1-D"
            )
