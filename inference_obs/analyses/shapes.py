"""Request shapes: how long prompts and outputs were, what limits were asked, how requests ended.

Read the shapes before any throughput: two deployments that serve different
output budgets (a published PRO 5000 vs H20 observation: ~82% of PRO's
requests asked for at most 20 output tokens) cannot be compared by
dividing their token rates.
"""

from __future__ import annotations

from functools import partial

from pydantic import Field

from inference_obs.analyses.latency import shares_within
from inference_obs.deployment import Deployment
from inference_obs.metrics import builders, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr, Matcher
from inference_obs.reading.counter_ratios import Ratio, counter_ratios, mean_ratio
from inference_obs.reading.joined import instants
from inference_obs.reading.measurement import Measurement, derive, measure
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Vector, Window
from inference_obs.source.base import Source
from inference_obs.source.remembering import soon, together

__all__ = ["MAX_TOKENS_THRESHOLDS", "ShapesResult", "shapes"]

ANALYSIS = "shapes"
#: Output limits (tokens) whose shares of requests are reported.
MAX_TOKENS_THRESHOLDS = (20, 50, 100, 500)
_REASONS = (
    "Finish reasons are not success: 'stop' and 'length' say how generation ended, not that "
    "the client received the stream or that the answer was right. Failures before engine "
    "admission and client interruptions are outside these counters."
)
_LENGTH_MEAN = "Request-weighted mean over requests vLLM finished in the window."


class ShapesResult(AnalysisResult):
    """Request shapes of one deployment over one window.

    Attributes
    ----------
    prompt_tokens_mean, output_tokens_mean
        Request-weighted mean prompt and output length, tokens.
    max_tokens_mean
        Mean requested output limit (``max_tokens``), tokens.
    output_to_limit
        Mean actual output over mean requested limit, ratio.
    max_tokens_share
        Share (ratio) of requests with ``max_tokens`` at or below each
        threshold, keyed by the threshold; exact at bucket bounds.
    finished
        Requests finished in the window (all reasons), requests.
    finish_counts, finish_shares
        Per finish reason: finished requests, and share of all finished (ratio).
    """

    prompt_tokens_mean: Measurement
    output_tokens_mean: Measurement
    max_tokens_mean: Measurement
    output_to_limit: Measurement
    max_tokens_share: dict[int, Measurement]
    finished: Measurement
    finish_counts: dict[str, Measurement] = Field(default_factory=dict)
    finish_shares: dict[str, Measurement] = Field(default_factory=dict)
    caveats: tuple[str, ...] = (_REASONS,)


def _reasons(source: Source, deployment: Deployment, window: Window) -> list[str]:
    expr = builders.increase_total(
        vllm.REQUEST_SUCCESS, deployment.matchers, window.seconds, by=("finished_reason",)
    )
    answer = source.instant(expr, window.end_s)
    if not isinstance(answer.value, Vector):
        return []
    return sorted({labels.get("finished_reason", "") for labels in answer.value.labels})


def shapes(source: Source, deployment: Deployment, window: Window) -> ShapesResult:
    """Prompt and output lengths, requested limits, and the finish-reason mix.

    Parameters
    ----------
    source
        Where the series come from.
    deployment
        Whose series (all replicas together).
    window
        The window; counts are (extrapolated, fractional) increases over it.

    Returns
    -------
    ShapesResult
        Token means in tokens, shares as ratios (0-1), counts in requests;
        a missing family gives ``no_data`` with the family named, never 0.
    """
    m, seconds = deployment.matchers, window.seconds

    def one(
        statistic: str,
        expr: Expr,
        unit: str,
        families: list[Family],
        caveats: tuple[str, ...] = (),
        matchers: tuple[Matcher, ...] = m,
    ) -> Measurement:
        return measure(
            source, deployment, window, analysis=ANALYSIS, statistic=statistic, expr=expr,
            unit=unit, families=families, matchers=matchers, caveats=caveats,
        )  # fmt: skip

    prompt, output = vllm.REQUEST_PROMPT_TOKENS, vllm.REQUEST_GENERATION_TOKENS
    limit, success = vllm.REQUEST_PARAMS_MAX_TOKENS, vllm.REQUEST_SUCCESS
    total = builders.increase_total(success, m, seconds)

    # Every part is asked at once; only the finish reasons wait for their list.
    shares_asked = soon(source, partial(
        shares_within, source, deployment, window, limit,
        [float(bound) for bound in MAX_TOKENS_THRESHOLDS], analysis=ANALYSIS,
        statistics=[f"max_tokens_share_le_{bound}" for bound in MAX_TOKENS_THRESHOLDS],
    ))  # fmt: skip
    means = [
        mean_ratio(deployment, window, family, analysis=ANALYSIS, statistic=statistic,
                   caveats=(caveat,))
        for statistic, family, caveat in (
            ("prompt_tokens_mean", prompt, _LENGTH_MEAN),
            ("output_tokens_mean", output, _LENGTH_MEAN),
            ("max_tokens_mean", limit,
             "The limit requested (max_tokens), not the context left for the request."),
        )
    ]  # fmt: skip
    means_asked = soon(source, partial(counter_ratios, source, deployment, window, means))
    finished = soon(source, partial(one, "finished", total, "requests", [success], (_REASONS,)))

    reasons = _reasons(source, deployment, window)
    only = [(*m, Matcher.equal("finished_reason", r)) for r in reasons]
    count = [builders.increase_total(success, matchers, seconds) for matchers in only]
    # Every reason's share in one set of requests, alongside one query for every count.
    shares = [
        Ratio(
            numerator=success.select(matchers), denominator=success.select(m),
            promql=expr / total, families=(success,), analysis=ANALYSIS,
            statistic=f"finished_{reason}_share", unit="ratio", paired=False,
            caveats=(_REASONS,),
        )
        for reason, matchers, expr in zip(reasons, only, count, strict=True)
    ]  # fmt: skip
    sharing = soon(source, partial(counter_ratios, source, deployment, window, shares))
    answers = instants(source, count, window.end_s)
    counted = together(source, [
        partial(
            measure, source, deployment, window, analysis=ANALYSIS,
            statistic=f"finished_{reason}", expr=expr, unit="requests", families=[success],
            matchers=matchers, caveats=(_REASONS,), answer=answer,
        )
        for reason, matchers, expr, answer in zip(reasons, only, count, answers, strict=True)
    ])  # fmt: skip
    counts = dict(zip(reasons, counted, strict=True))
    reason_shares = dict(zip(reasons, sharing.result(), strict=True))
    prompt_mean, output_mean, limit_mean = means_asked.result()
    ratio = (
        output_mean.value / limit_mean.value
        if output_mean.value is not None and limit_mean.value
        else None
    )
    return ShapesResult(
        prompt_tokens_mean=prompt_mean,
        output_tokens_mean=output_mean,
        max_tokens_mean=limit_mean,
        output_to_limit=derive(
            "output_to_limit", ratio, "ratio", [output_mean, limit_mean],
            "output_tokens_mean / max_tokens_mean",
            ("Near 1 with every request ending on 'length': outputs were cut at the limit.",),
        ),
        max_tokens_share=dict(zip(MAX_TOKENS_THRESHOLDS, shares_asked.result(), strict=True)),
        finished=finished.result(),
        finish_counts=counts,
        finish_shares=reason_shares,
    )  # fmt: skip
