"""What the validity checks know of one deployment: its analyses and a few load figures.

:func:`profile` runs the analyses a comparison rests on (shapes, latency,
throughput, cache, GPU) for one deployment and window, and adds what they
do not report: how many requests were in flight on average, the share of
scrapes with work running, the observations behind each latency histogram
and the KV-cache capacity the server exposes.
"""

from __future__ import annotations

import math
from functools import partial

from pydantic import BaseModel, ConfigDict

from inference_obs.analyses.cache import CacheResult, cache
from inference_obs.analyses.configuration import ConfigurationResult, configuration
from inference_obs.analyses.cost import CostResult, cost
from inference_obs.analyses.gpu import GpuResult, gpu
from inference_obs.analyses.latency import METRICS, LatencyResult, latency
from inference_obs.analyses.shapes import ShapesResult, shapes
from inference_obs.analyses.throughput import ThroughputResult, throughput
from inference_obs.deployment import Deployment
from inference_obs.metrics import builders, vllm
from inference_obs.query import avg_over_time
from inference_obs.reading.joined import instants
from inference_obs.reading.measurement import (
    Measurement,
    derive,
    local_measurement,
    measure,
)
from inference_obs.reading.resolution import positive_share
from inference_obs.samples import Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import soon, together

__all__ = ["Profile", "profile"]

ANALYSIS = "validity"


class Profile(BaseModel):
    """One deployment's analyses over its window, and the load figures the checks compare.

    Attributes
    ----------
    deployment, window
        What was profiled.
    in_flight
        Mean requests running in the deployment (the sum over its series of
        each one's sample mean of ``num_requests_running``), requests.
    active_share
        Share (ratio) of ``num_requests_running`` samples above 0.
    requests_per_second_per_replica
        Finished requests per second of the window, per replica seen.
    observations
        Per latency metric, the observations its histogram recorded in the
        window (extrapolated ``increase`` of ``_count``).
    cost, priced
        The cost analysis, and whether it used a real GPU-hour price (else
        1.0: only its tokens per GPU-hour are meaningful).
    configuration
        The declared configuration checked against the series.
    kv_capacity_tokens
        KV-cache capacity of one replica in tokens (its engines' ``num_gpu_blocks``
        x ``block_size``); the first replica's when several are seen.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    deployment: Deployment
    window: Window
    shapes: ShapesResult
    latency: LatencyResult
    throughput: ThroughputResult
    cache: CacheResult
    gpu: GpuResult
    in_flight: Measurement
    active_share: Measurement
    requests_per_second_per_replica: Measurement
    observations: dict[str, Measurement]
    configuration: ConfigurationResult
    kv_capacity_tokens: Measurement
    cost: CostResult
    priced: bool


def _per_replica(config: ConfigurationResult) -> Measurement:
    if config.kv_capacity_tokens_per_replica:
        return config.kv_capacity_tokens_per_replica[0]
    return config.kv_capacity_tokens  # no_data, with the family named


def profile(
    source: Source,
    deployment: Deployment,
    window: Window,
    *,
    gpu_hour_price: float | None = None,
    topology_text: str | None = None,
    step: float | None = None,
) -> Profile:
    """Run the analyses a comparison rests on, for one deployment and window.

    Parameters
    ----------
    source
        Where the series come from.
    deployment
        Whose series.
    window
        The deployment's window (deployments may be compared across windows).
    gpu_hour_price
        Rent of one GPU for an hour (any currency), for cost per token; without
        it cost is left out and only tokens per GPU-hour are compared.
    topology_text
        ``nvidia-smi topo -m`` output of the deployment's boxes, if known.
    step
        ``None`` to count the sampled shares (requests running, waiting) over
        raw samples; else over tiles of ``step`` seconds (see
        :mod:`~inference_obs.reading.resolution`).

    Returns
    -------
    Profile
        Every figure the validity checks read.
    """
    m, seconds = deployment.matchers, window.seconds
    running = vllm.NUM_REQUESTS_RUNNING
    # Every analysis at once (in a report, each is the report's own, asked already:
    # its questions are answered from memory or waited for, not asked again).
    shaped = soon(source, partial(shapes, source, deployment, window))
    timed = soon(source, partial(latency, source, deployment, window))
    served_asked = soon(source, partial(throughput, source, deployment, window, step=step))
    cached = soon(source, partial(cache, source, deployment, window))
    gpus = soon(source, partial(gpu, source, deployment, window))
    configured = soon(
        source, partial(configuration, source, deployment, window, topology_text=topology_text)
    )
    costed = soon(source, partial(
        cost, source, deployment, window, gpu_hour_price=gpu_hour_price or 1.0
    ))  # fmt: skip
    sharing = soon(source, partial(positive_share, source, running.select(m), window, step))
    in_flight = avg_over_time(running.select(m).over(seconds)).sum()
    counts = {
        key: builders.histogram_count(family, m, seconds) for key, (family, _) in METRICS.items()
    }
    # The in-flight mean and every histogram's observations in one request.
    flight_answer, *count_answers = instants(source, [in_flight, *counts.values()], window.end_s)
    flight = measure(
        source, deployment, window, analysis=ANALYSIS, statistic="in_flight_mean",
        expr=in_flight, unit="requests", families=[running], matchers=m,
        caveats=("Sum over engines of each engine's sample mean of requests running.",),
        answer=flight_answer,
    )  # fmt: skip
    # Together: a count without data looks up which families have series.
    observed = together(source, [
        partial(
            measure, source, deployment, window, analysis=ANALYSIS,
            statistic=f"{key}_observations", expr=expr, unit="observations",
            families=[METRICS[key][0]], matchers=m, answer=answer,
        )
        for (key, expr), answer in zip(counts.items(), count_answers, strict=True)
    ])  # fmt: skip
    observations = dict(zip(counts, observed, strict=True))
    share, asked, how = sharing.result()
    active = local_measurement(
        source, deployment, window, analysis=ANALYSIS, statistic="active_share",
        value=share, unit="ratio", selectors=asked, computation=how, missing=[running.name],
    )  # fmt: skip
    served = served_asked.result()
    replicas = served.replicas_seen.value or math.nan
    finished = served.finished_requests.value
    per_replica = derive(
        "requests_per_second_per_replica",
        None if finished is None else finished / seconds / replicas,
        "requests/s", [served.finished_requests, served.replicas_seen],
        "finished_requests / window seconds / replicas_seen",
    )  # fmt: skip
    config = configured.result()
    return Profile(
        deployment=deployment,
        window=window,
        shapes=shaped.result(),
        latency=timed.result(),
        throughput=served,
        cache=cached.result(),
        gpu=gpus.result(),
        in_flight=flight,
        active_share=active,
        requests_per_second_per_replica=per_replica,
        observations=observations,
        configuration=config,
        kv_capacity_tokens=_per_replica(config),
        cost=costed.result(),
        priced=gpu_hour_price is not None,
    )
