"""Random distributions a scenario file names, and how to draw from them.

A distribution is written in YAML as a mapping with a ``kind``::

    {kind: lognormal, median: 4000, sigma: 0.8, min: 16, max: 120000}
    {kind: choice, values: [8, 16, 20, 50], weights: [0.5, 0.3, 0.1, 0.1]}
    {kind: beta, mean: 0.92, concentration: 40}
    {kind: uniform, low: 0.2, high: 0.6}

or as a bare number, which is a constant. Draws come from a
:class:`numpy.random.Generator`, so a seeded scenario draws the same values
every time.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from inference_obs.errors import ScenarioError

__all__ = ["Beta", "Choice", "Constant", "Distribution", "LogNormal", "Uniform", "draw"]
from inference_obs.samples import Floats

__all__ = ["Beta", "Choice", "Constant", "Distribution", "LogNormal", "Uniform", "draw"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Constant(_Model):
    """Always ``value``."""

    kind: Literal["constant"] = "constant"
    value: float = Field(description="The value every draw takes.")


class Uniform(_Model):
    """Uniform on ``[low, high)``."""

    kind: Literal["uniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.high < self.low:
            raise ScenarioError(f"high {self.high} is below low {self.low}; swap them")
        return self


class LogNormal(_Model):
    """Log-normal with the given median, clipped to ``[min, max]`` where given."""

    kind: Literal["lognormal"]
    median: float = Field(gt=0, description="Median of the distribution (exp of mu).")
    sigma: float = Field(ge=0, description="Standard deviation of the logarithm.")
    min: float | None = Field(None, description="Draws below are raised to it.")
    max: float | None = Field(None, description="Draws above are lowered to it.")

    @model_validator(mode="after")
    def _ordered(self) -> LogNormal:
        if self.min is not None and self.max is not None and self.max < self.min:
            raise ScenarioError(f"max {self.max} is below min {self.min}; swap them")
        return self


class Choice(_Model):
    """One of ``values``, with probabilities proportional to ``weights``."""

    kind: Literal["choice"]
    values: tuple[float, ...] = Field(min_length=1)
    weights: tuple[float, ...] | None = Field(None, description="Relative weights; equal if unset.")

    @model_validator(mode="after")
    def _weights(self) -> Choice:
        if self.weights is not None:
            if len(self.weights) != len(self.values):
                raise ScenarioError(
                    f"{len(self.weights)} weights for {len(self.values)} values; give one each"
                )
            if min(self.weights) < 0 or sum(self.weights) <= 0:
                raise ScenarioError(
                    f"weights {list(self.weights)} must be non-negative with a positive sum"
                )
        return self


class Beta(_Model):
    """Beta distribution on ``[0, 1]`` given by its mean and concentration (a + b)."""

    kind: Literal["beta"]
    mean: float = Field(gt=0, lt=1)
    concentration: float = Field(gt=0, description="a + b: higher is narrower around the mean.")


def _constant_shorthand(value: object) -> object:
    # A bare number in YAML is a constant: `prefix_hit_ratio: 0.9`.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"kind": "constant", "value": value}
    return value


Distribution = Annotated[
    Annotated[Constant | Uniform | LogNormal | Choice | Beta, Field(discriminator="kind")],
    BeforeValidator(_constant_shorthand),
]
"""Any distribution a scenario may name (see the module docstring)."""


def draw(
    distribution: Constant | Uniform | LogNormal | Choice | Beta, rng: np.random.Generator, n: int
) -> Floats:
    """``n`` independent draws (float64) of ``distribution``."""
    if isinstance(distribution, Constant):
        return np.full(n, distribution.value, dtype=np.float64)
    if isinstance(distribution, Uniform):
        return rng.uniform(distribution.low, distribution.high, n)
    if isinstance(distribution, LogNormal):
        values = distribution.median * np.exp(distribution.sigma * rng.standard_normal(n))
        low = -np.inf if distribution.min is None else distribution.min
        high = np.inf if distribution.max is None else distribution.max
        return np.clip(values, low, high)
    if isinstance(distribution, Choice):
        weights = np.asarray(distribution.weights or [1.0] * len(distribution.values))
        picks = rng.choice(len(distribution.values), size=n, p=weights / weights.sum())
        return np.asarray(distribution.values, dtype=np.float64)[picks]
    a = distribution.mean * distribution.concentration
    return rng.beta(a, distribution.concentration - a, n)
