"""What the validity checks know of one deployment: its analyses and a few load figures.

:func:`profile` takes one deployment's run of the analyses a comparison rests
on (:data:`NEEDED`) and adds what they do not report: how many requests were
in flight on average, the share of scrapes with work running, the
observations behind each latency histogram and the KV-cache capacity the
server exposes.
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
from inference_obs.analyses.run import DeploymentResults
from inference_obs.analyses.shapes import ShapesResult, shapes
from inference_obs.analyses.throughput import ThroughputResult, covered, throughput
from inference_obs.deployment import Deployment
from inference_obs.metrics import builders, vllm
from inference_obs.query import avg_over_time
from inference_obs.reading.context import Reading, Source
from inference_obs.reading.measurement import Measurement, derive
from inference_obs.reading.resolution import positive_share
from inference_obs.samples import Window

__all__ = ["NEEDED", "Profile", "profile"]

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


#: The analyses a comparison rests on: a run for the comparison checks includes them.
NEEDED = (shapes, latency, throughput, cache, gpu, configuration, cost)


def profile(source: Source, ran: DeploymentResults) -> Profile:
    """The profile of one deployment: its run's results and the load figures they lack.

    Parameters
    ----------
    source
        Where the series come from (for the load figures only).
    ran
        The deployment's run, with at least the :data:`NEEDED` analyses; its
        tile width counts the sampled share of scrapes with work running.

    Returns
    -------
    Profile
        Every figure the validity checks read.
    """
    d, w = ran.deployment, ran.window
    r = Reading(source, d, w, ANALYSIS, step=ran.step_seconds)
    running = vllm.NUM_REQUESTS_RUNNING.select(r.matchers)
    sharing = r.soon(partial(positive_share, source, running, w, r.step))
    in_flight = avg_over_time(running.over(r.seconds)).sum()
    counts = {
        key: builders.histogram_count(family, r.matchers, r.seconds)
        for key, (family, _) in METRICS.items()
    }
    # The in-flight mean and every histogram's observations in one request.
    flight_answer, *count_answers = r.ask([in_flight, *counts.values()])
    summed = "Sum over engines of each engine's sample mean of requests running."
    flight = r.measure(
        "in_flight_mean", in_flight, "requests", caveats=(summed,), answer=flight_answer
    )
    # Together: a count without data looks up which families have series.
    observed = r.together(
        [
            partial(r.measure, f"{key}_observations", expr, "observations", answer=answer)
            for (key, expr), answer in zip(counts.items(), count_answers, strict=True)
        ],
    )
    share, asked, how = sharing.result()
    active = r.local(
        "active_share",
        share,
        "ratio",
        reads=asked,
        computation=how,
        missing=[vllm.NUM_REQUESTS_RUNNING],
    )
    served = ran.of(throughput)
    replicas = served.replicas_seen.value or math.nan
    finished = served.finished_requests.value
    # Per replica-second the replicas' series cover, as throughput's per-replica rates.
    spans = covered(r)
    seconds = spans.replica_seconds(replicas)
    per_replica = spans.noted(
        derive(
            "requests_per_second_per_replica",
            None if finished is None or not seconds else finished / seconds,
            "requests/s",
            [served.finished_requests, served.replicas_seen],
            f"finished_requests / {seconds:g} replica-seconds covered",
        )
    )
    config = ran.of(configuration)
    return Profile(
        deployment=d,
        window=w,
        shapes=ran.of(shapes),
        latency=ran.of(latency),
        throughput=served,
        cache=ran.of(cache),
        gpu=ran.of(gpu),
        in_flight=flight,
        active_share=active,
        requests_per_second_per_replica=per_replica,
        observations=dict(zip(counts, observed, strict=True)),
        configuration=config,
        kv_capacity_tokens=_per_replica(config),
        cost=ran.of(cost),
        priced=ran.deployment.hardware.gpu_hour_price is not None,
    )
