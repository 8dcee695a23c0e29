"""What a run shows beyond its numbers: whether it saw data, and whether its cost is shown."""

from __future__ import annotations

from inference_obs.analyses.cost import CostResult, cost
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.throughput import throughput

__all__ = ["has_data", "priced_cost", "shown"]


def priced_cost(run: DeploymentResults) -> CostResult | None:
    """The deployment's cost, where its GPU-hour price was given (else no cost to show)."""
    return run.of(cost) if run.deployment.hardware.gpu_hour_price is not None else None


def has_data(run: DeploymentResults) -> bool:
    """Whether any vLLM replica or GPU of the deployment had series in the window."""
    return run.of(throughput).replicas_seen.ok or bool(run.of(gpu).gpus_with_samples.value)


def shown(run: DeploymentResults, analysis: str) -> bool:
    """Whether the report shows ``analysis``'s numbers: cost only with a GPU-hour price."""
    return analysis != cost.name or run.deployment.hardware.gpu_hour_price is not None
