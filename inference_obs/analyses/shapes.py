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
from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.metrics import builders, vllm
from inference_obs.query import Matcher
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import Pairing, Ratio, counter_ratios, mean_ratio
from inference_obs.reading.measurement import Measurement, derive
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Vector

__all__ = ["MAX_TOKENS_THRESHOLDS", "ShapesResult", "shapes"]

_REASON = "finished_reason"
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


def _reasons(r: Reading) -> list[str]:
    """The finish reasons the counters name; a series without the label (an exporter that
    does not split its count) counts in the total but names no reason."""
    success = vllm.REQUEST_SUCCESS
    answer = r.instant(builders.increase_total(success, r.matchers, r.seconds, by=(_REASON,)))
    if not isinstance(answer.value, Vector):
        return []
    return sorted({labels[_REASON] for labels in answer.value.labels if _REASON in labels})


def _shapes(r: Reading, settings: NoSettings) -> ShapesResult:
    """Prompt and output lengths, requested limits, and the finish-reason mix.

    All replicas together. Token means in tokens, shares as ratios (0-1),
    counts in requests (extrapolated, fractional increases over the window);
    a missing family gives ``no_data`` with the family named, never 0.
    """
    m, seconds = r.matchers, r.seconds
    prompt, output = vllm.REQUEST_PROMPT_TOKENS, vllm.REQUEST_GENERATION_TOKENS
    limit, success = vllm.REQUEST_PARAMS_MAX_TOKENS, vllm.REQUEST_SUCCESS
    total = builders.increase_total(success, m, seconds)

    # Every part is asked at once; only the finish reasons wait for their list.
    bounds = [float(bound) for bound in MAX_TOKENS_THRESHOLDS]
    names = [f"max_tokens_share_le_{bound}" for bound in MAX_TOKENS_THRESHOLDS]
    shares_asked = r.soon(partial(shares_within, r, limit, bounds, names))
    limit_note = "The limit requested (max_tokens), not the context left for the request."
    means = [
        mean_ratio(r, prompt, "prompt_tokens_mean", caveats=(_LENGTH_MEAN,)),
        mean_ratio(r, output, "output_tokens_mean", caveats=(_LENGTH_MEAN,)),
        mean_ratio(r, limit, "max_tokens_mean", caveats=(limit_note,)),
    ]
    means_asked = r.soon(partial(counter_ratios, r, means))
    finished = r.soon(partial(r.measure, "finished", total, "requests", caveats=(_REASONS,)))

    reasons = _reasons(r)
    only = [(*m, Matcher.equal(_REASON, reason)) for reason in reasons]
    count = [builders.increase_total(success, matchers, seconds) for matchers in only]
    # Every reason's share in one set of requests, alongside one query for every count.
    shares = [
        Ratio(
            success.select(matchers),
            success.select(m),
            expr / total,
            f"finished_{reason}_share",
            "ratio",
            pairing=Pairing.PART_OF_WHOLE,
            caveats=(_REASONS,),
        )
        for reason, matchers, expr in zip(reasons, only, count, strict=True)
    ]
    sharing = r.soon(partial(counter_ratios, r, shares))
    counted = r.together(
        [
            partial(
                r.measure,
                f"finished_{reason}",
                expr,
                "requests",
                caveats=(_REASONS,),
                answer=answer,
            )
            for reason, expr, answer in zip(reasons, count, r.ask(count), strict=True)
        ],
    )
    prompt_mean, output_mean, limit_mean = means_asked.result()
    ratio = (
        output_mean.value / limit_mean.value
        if output_mean.value is not None and limit_mean.value
        else None
    )
    cut = "Near 1 with every request ending on 'length': outputs were cut at the limit."
    return ShapesResult(
        prompt_tokens_mean=prompt_mean,
        output_tokens_mean=output_mean,
        max_tokens_mean=limit_mean,
        output_to_limit=derive(
            "output_to_limit",
            ratio,
            "ratio",
            [output_mean, limit_mean],
            "output_tokens_mean / max_tokens_mean",
            (cut,),
        ),
        max_tokens_share=dict(zip(MAX_TOKENS_THRESHOLDS, shares_asked.result(), strict=True)),
        finished=finished.result(),
        finish_counts=dict(zip(reasons, counted, strict=True)),
        finish_shares=dict(zip(reasons, sharing.result(), strict=True)),
    )


shapes = Analysis(
    name="shapes",
    title="Request shapes",
    entry=_shapes,
    result=ShapesResult,
    settings=NoSettings,
    summary="Prompt and output lengths, requested limits and the finish-reason mix.",
)
