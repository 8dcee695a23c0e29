"""The manifest of an observation dataset: what was observed, where, how, and by what rules.

A dataset is a directory holding ``manifest.json`` (this model), the raw
samples as OpenMetrics text, and optionally published aggregates and, for
synthetic data, ground-truth request records. The ``deployments`` section uses
the same :class:`~inference_obs.deployment.Deployment` schema a live report
reads, so a published dataset can drive a live report of the same deployments.
"""

from __future__ import annotations

from typing import Final, Literal

import pydantic
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from inference_obs.deployment import Deployment, check_names
from inference_obs.errors import ConfigurationError
from inference_obs.samples import Window

__all__ = ["FORMAT", "WHOLE", "Generator", "Manifest", "ManifestWindow", "validation_problems"]

#: The dataset format this library reads and writes.
FORMAT: Final = "inference-obs-dataset/1"
#: Where :func:`validation_problems` places an error of the object as a whole.
WHOLE: Final = "(the manifest as a whole)"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ManifestWindow(_Model):
    """The observed window; both edges carry a UTC offset."""

    start: AwareDatetime = Field(description="Window start, ISO 8601 with offset.")
    end: AwareDatetime = Field(description="Window end, ISO 8601 with offset.")

    @model_validator(mode="after")
    def _ordered(self) -> ManifestWindow:
        if self.end <= self.start:
            raise ConfigurationError(
                f"end {self.end.isoformat()} is not after start {self.start.isoformat()}"
            )
        return self

    def window(self) -> Window:
        """As a :class:`~inference_obs.samples.Window`."""
        return Window(self.start, self.end)


class Generator(_Model):
    """How synthetic data was made, so it can be made again byte for byte."""

    scenario: str = Field(description="Scenario name or file it came from.")
    seed: int = Field(description="Random seed.")
    version: str = Field(description="inference_obs version that generated it.")


class Manifest(_Model):
    """``manifest.json`` of an observation dataset."""

    format: Literal["inference-obs-dataset/1"] = FORMAT
    title: str = Field(min_length=1, description="What was observed, in a line.")
    synthetic: bool = Field(description="True when the samples were simulated, not observed.")
    window: ManifestWindow
    scrape_interval_seconds: float = Field(gt=0, description="Nominal scrape interval, s.")
    deployments: tuple[Deployment, ...] = Field(min_length=1)
    methodology: tuple[str, ...] = Field(
        default=(), description="How the data was collected and what it excludes."
    )
    sanitisation: tuple[str, ...] = Field(
        default=(), description="What was renamed or removed before publication."
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="Relative path -> SHA-256 hex of every data file (filled by the writer).",
    )
    generator: Generator | None = Field(None, description="Set for synthetic data.")

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        names = [d.name for d in self.deployments]
        if len(set(names)) != len(names):
            raise ConfigurationError(f"deployment names repeat: {names}; give each its own")
        check_names(names)
        if self.synthetic != (self.generator is not None):
            raise ConfigurationError(
                "synthetic datasets name their generator, observed ones do not: "
                f"synthetic is {str(self.synthetic).lower()}, generator is "
                f"{'set' if self.generator is not None else 'missing'}"
            )
        return self


def validation_problems(exc: pydantic.ValidationError) -> str:
    """Pydantic's errors as ``field.path: problem``, without its traceback or input.

    An error of the object as a whole is placed at :data:`WHOLE`.
    """
    problems = []
    for error in exc.errors():
        where = ".".join(f"[{part}]" if isinstance(part, int) else part for part in error["loc"])
        where = where.replace(".[", "[") or WHOLE
        what = "unknown field" if error["type"] == "extra_forbidden" else error["msg"]
        problems.append(f"{where}: {what}")
    return "; ".join(problems)
