"""Traffic classes of a scenario: how often requests arrive and what they look like."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from inference_obs.errors import ScenarioError
from inference_obs.simulate.distributions import Constant, Distribution
from inference_obs.simulate.durations import Offset, Seconds

__all__ = ["Burst", "Cluster", "TrafficClass"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


class Burst(_Model):
    """The arrival rate of a traffic class is multiplied during ``[start, end)``."""

    start: Offset
    end: Offset
    multiplier: float = Field(ge=0, description="Factor on the class's base rate.")

    @model_validator(mode="after")
    def _ordered(self) -> Burst:
        if self.end <= self.start:
            raise ScenarioError(f"end {self.end} s is not after start {self.start} s")
        return self


class Cluster(_Model):
    """``count`` requests of a class arriving together, as from one client fan-out."""

    at: Offset
    count: int = Field(ge=1)
    spread: Seconds = Field(0.0, description="Arrivals spread evenly over this many seconds.")
    replica: str | None = Field(None, description="Replica they are routed to; random if unset.")


class TrafficClass(_Model):
    """One kind of request a deployment receives: its rate and its shape."""

    name: str = Field(min_length=1)
    rate_per_second: float = Field(ge=0, description="Base Poisson arrival rate, deployment-wide.")
    bursts: tuple[Burst, ...] = ()
    clusters: tuple[Cluster, ...] = ()
    prompt_tokens: Distribution = Field(description="Prompt length, tokens.")
    output_tokens: Distribution = Field(
        description="Length at which the model would stop by itself (finish reason stop)."
    )
    max_tokens: Distribution | None = Field(
        None, description="The request's max_tokens; output reaching it ends by length."
    )
    max_tokens_unset_share: float = Field(
        0.0, ge=0, le=1, description="Share of requests that set no max_tokens."
    )
    prefix_hit_ratio: Distribution = Field(
        Constant(value=0.0),
        description="Share of the prompt found in the local prefix cache (0-1).",
    )
    external_hit_ratio: Distribution = Field(
        Constant(value=0.0),
        description="Share of the prompt not hit locally found in the external KV store.",
    )
    acceptance_rate: Distribution = Field(
        Constant(value=0.0),
        description="Draft-token acceptance rate of the request (speculative decoding).",
    )
    abort_share: float = Field(0.0, ge=0, le=1, description="Share of requests the client aborts.")
    abort_after: Distribution = Field(
        Constant(value=10.0),
        description="Seconds after arrival at which an aborting client gives up.",
    )
    error_share: float = Field(
        0.0, ge=0, le=1, description="Share of requests that end with an engine error."
    )
