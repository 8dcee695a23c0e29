"""Cost: GPU-hours, cost per million useful output tokens, and the break-even GPU-hour price.

The cost is GPU rental only: ``gpu_hour_price`` x GPU-hours, where GPU-hours
are ``hardware.gpus_per_replica`` x the replica-hours the replicas' series
cover (:func:`~inference_obs.analyses.throughput.covered`: the window's hours
x replicas seen when every replica is there throughout; a replica that starts
or stops inside the window counts for the part its series cover), the hours
throughput's tokens per GPU-hour use too. It excludes CPU, host memory,
network, storage, power and staff.

Useful output tokens are the output tokens of requests that ended on
``stop`` or ``length`` and met the latency SLA. Metrics carry no per-request
join of latency and length, so they are estimated::

    useful = share within SLA x finished{stop|length} x mean output length

- ``finished{stop|length}`` is ``sum(increase(request_success_total
  {finished_reason=~"stop|length"}[w]))``; aborted, errored and ``repetition``
  requests are not useful.
- the mean output length is over every finished request
  (``request_generation_tokens``), not just stop/length ones;
- the share within the SLA comes from the TTFT and E2E histograms over all
  finished requests, and is assumed independent of the finish reason and of
  the output length (long outputs are in fact slower, so the estimate leans
  high when an E2E SLA is set). It is exact when the SLA is a bucket bound;
  otherwise ``bounds`` hold the shares at the bucket bounds around it. With
  both SLAs the joint share is taken as the smaller one (requests slow to
  the first token are taken to be the slow ones end to end); ``bounds`` are
  then the Fréchet bounds ``[max(0, a + b - 1), min(a, b)]``.

Cost per million useful output tokens is total cost over total useful tokens
(never a mean of per-replica or per-interval ratios). Every number is a
:class:`~inference_obs.reading.measurement.Measurement`; a family the
deployment does not export gives ``no_data`` naming it, never 0.

Without a GPU-hour price the rent is unknown: ``cost`` and the cost per
million useful output tokens are ``no_data`` with an annotation saying no
price was given, while GPU-hours, tokens per GPU-hour and, with token prices,
revenue and the break-even GPU-hour price are still reported.
"""

from __future__ import annotations

import math
from functools import partial

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.latency import share_within
from inference_obs.analyses.throughput import Covered, covered, replicas_seen
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.errors import Annotation
from inference_obs.metrics import builders as b, vllm
from inference_obs.query import Expr, Matcher
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import histogram_mean
from inference_obs.reading.measurement import Bounds, Measurement, Status, derive
from inference_obs.reading.result import AnalysisResult

__all__ = ["CostResult", "CostSettings", "TokenPrices", "cost"]

SCOPE = (
    "GPU (board) rental only: gpu_hour_price x GPU-hours. Excludes CPU, host memory, "
    "network, storage, power and staff."
)
GPU_HOURS = (
    "GPUs as declared per replica x the hours each replica's series cover: a replica present "
    "for part of the window is counted for that part."
)
EXTRAPOLATED = "Prometheus increase() extrapolates to the window edges: fractional estimate."
USEFUL = (
    "Estimate: share within the SLA (histograms, all finished requests) x stop/length "
    "requests x mean output length of all finished requests; assumes the SLA share does not "
    "depend on the finish reason or output length. Exact share only at bucket bounds."
)
REVENUE = (
    "Revenue if every prompt and output token in the window is billed at the given prices, "
    "tokens of aborted or slow requests included; not invoiced revenue."
)
#: Why the money numbers have no value when no GPU-hour price was given.
NO_PRICE = Annotation(
    "no_data",
    "no GPU-hour price was given: money per token needs the rent of one GPU for one hour",
)
_COMPLETED = "stop|length"
_CACHED = "local_cache_hit|external_kv_transfer"


class TokenPrices(BaseModel):
    """Per-million-token prices, in the currency of ``gpu_hour_price``.

    Attributes
    ----------
    input_per_million
        Price of a million prompt tokens computed by the engine (not cached).
    cached_input_per_million
        Price of a million prompt tokens served from a cache (local or external).
    output_per_million
        Price of a million output tokens.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_million: float = Field(ge=0)
    cached_input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)


class CostSettings(Settings):
    """The latency SLA a useful output token meets, and the prices revenue is counted at."""

    sla_ttft_s: float | None = Field(
        None,
        gt=0,
        description="Time-to-first-token SLA, seconds: a request counts as useful only if its "
        "first token came within it; None: no such limit.",
    )
    sla_e2e_s: float | None = Field(
        None,
        gt=0,
        description="End-to-end latency SLA, seconds: a request counts as useful only if it "
        "finished within it; None: no such limit.",
    )
    prices: TokenPrices | None = Field(
        None,
        description="Per-million-token prices (currency of the GPU-hour price); with them, "
        "revenue and the break-even GPU-hour price are reported.",
    )
    currency: str | None = Field(
        None,
        min_length=1,
        max_length=16,
        pattern=r"^[A-Za-z$€£¥][A-Za-z$€£¥.]*$",
        description="The currency of the GPU-hour and token prices (EUR, USD, ...), named in "
        "the money numbers' units; None: not recorded, money is in units of the price given.",
    )


class CostResult(AnalysisResult):
    """Cost and token economics of one deployment over one window.

    Attributes
    ----------
    replicas_seen, gpus, gpu_hours
        Replicas with output-token samples (replicas), GPUs (GPUs), GPU-hours.
    cost
        ``gpu_hour_price`` x GPU-hours, in the price's currency; ``no_data``
        without a price.
    output_tokens
        Every output token generated (tokens).
    completed_requests
        Requests finished on ``stop`` or ``length`` (requests).
    output_tokens_mean
        Mean output length over every finished request (tokens).
    sla_shares
        With both SLAs: the share (ratio 0-1) within each, TTFT first; else empty.
    sla_share
        Share counted useful (ratio 0-1); ``None`` without an SLA (all count).
    useful_output_tokens
        Estimated useful output tokens (tokens), interval in ``bounds``.
    cost_per_million_useful_output_tokens
        Cost / useful output tokens x 1e6 (currency per million tokens);
        ``no_data`` without a price.
    output_tokens_per_gpu_hour, useful_output_tokens_per_gpu_hour
        Tokens per GPU-hour.
    prompt_tokens_uncached, prompt_tokens_cached
        Prompt tokens computed locally, and served by a cache (tokens); only with prices.
    revenue
        Prompt and output tokens at ``prices`` (currency); only with prices.
    break_even_gpu_hour_price
        Revenue / GPU-hours (currency per GPU-hour); only with prices.
    blended_price_per_million_tokens
        Revenue / (prompt + output tokens) x 1e6 (currency per million tokens).
    gpu_hour_price, prices
        The GPU-hour price (currency per GPU-hour; ``None``: none given) and the
        token prices the numbers were computed with.
    sla_ttft_s, sla_e2e_s
        The latency SLA a useful output token's request met (seconds; ``None``:
        no such limit), as the settings gave it.
    currency
        The prices' currency as the settings gave it (``None``: not recorded; the
        money units then read ``currency``).
    """

    replicas_seen: Measurement
    gpus: Measurement
    gpu_hours: Measurement
    cost: Measurement
    output_tokens: Measurement
    completed_requests: Measurement
    output_tokens_mean: Measurement
    sla_shares: tuple[Measurement, ...]
    sla_share: Measurement | None
    useful_output_tokens: Measurement
    cost_per_million_useful_output_tokens: Measurement
    output_tokens_per_gpu_hour: Measurement
    useful_output_tokens_per_gpu_hour: Measurement
    prompt_tokens_uncached: Measurement | None = None
    prompt_tokens_cached: Measurement | None = None
    revenue: Measurement | None = None
    break_even_gpu_hour_price: Measurement | None = None
    blended_price_per_million_tokens: Measurement | None = None
    gpu_hour_price: float | None = None
    prices: TokenPrices | None = None
    sla_ttft_s: float | None = None
    sla_e2e_s: float | None = None
    currency: str | None = None
    caveats: tuple[str, ...] = (SCOPE, GPU_HOURS, USEFUL)


def _bounded(m: Measurement, lower: float, upper: float) -> Measurement:
    """``m`` with ``bounds`` set, where it has a value and the bounds are numbers."""
    if not m.ok or math.isnan(lower) or math.isnan(upper):
        return m
    return m.model_copy(update={"bounds": Bounds(lower=lower, upper=upper)})


def _value(m: Measurement) -> float:
    return math.nan if m.value is None else m.value


def _div(a: float, b: float) -> float:
    """``a / b``, NaN where ``b`` is 0 (no Python ZeroDivisionError)."""
    return a / b if b else math.nan


def _interval(m: Measurement) -> tuple[float, float]:
    if m.bounds is None:
        return _value(m), _value(m)
    return m.bounds.lower, m.bounds.upper


def _sla_share(
    r: Reading, ttft: float | None, e2e: float | None
) -> tuple[tuple[Measurement, ...], Measurement | None]:
    """Both SLAs' shares (empty unless both given) and the share counted useful."""
    limits = (("ttft", vllm.TIME_TO_FIRST_TOKEN, ttft), ("e2e", vllm.E2E_REQUEST_LATENCY, e2e))
    parts = tuple(
        share_within(
            r, family, threshold, statistic=f"{name}_share_le_{threshold:g}", caveats=(USEFUL,)
        )
        for name, family, threshold in limits
        if threshold is not None
    )
    if len(parts) < 2:
        return (), (parts[0] if parts else None)
    (a_lo, a_hi), (b_lo, b_hi) = _interval(parts[0]), _interval(parts[1])
    joint = derive(
        "sla_share",
        min(_value(parts[0]), _value(parts[1])),
        "ratio",
        parts,
        "min(ttft share, e2e share); bounds max(0, a + b - 1) .. min(a, b) over their bounds",
        (USEFUL, "Joint share taken as the smaller: exact only if slow TTFT implies slow E2E."),
    )
    return parts, _bounded(joint, max(0.0, a_lo + b_lo - 1.0), min(a_hi, b_hi))


def _prompt_split(r: Reading) -> tuple[Measurement, Measurement]:
    """Uncached and cached prompt tokens: by source, else prompt total minus prefix-cache hits."""
    m, w = r.matchers, r.seconds

    def one(statistic: str, expr: Expr) -> Measurement:
        return r.measure(statistic, expr, "tokens", caveats=(EXTRAPOLATED,))

    by_source = vllm.PROMPT_TOKENS_BY_SOURCE
    cached_m = (*m, Matcher.regex("source", _CACHED))
    local_m = (*m, Matcher.equal("source", "local_compute"))
    cached = one("prompt_tokens_cached", b.increase_total(by_source, cached_m, w))
    uncached = one("prompt_tokens_uncached", b.increase_total(by_source, local_m, w))
    if cached.ok and uncached.ok:
        return uncached, cached
    hits = one("prompt_tokens_cached", b.increase_total(vllm.PREFIX_CACHE_HITS, m, w))
    prompt = one("prompt_tokens", b.increase_total(vllm.PROMPT_TOKENS, m, w))
    uncached = derive(
        "prompt_tokens_uncached",
        _value(prompt) - _value(hits),
        "tokens",
        [prompt, hits],
        "prompt_tokens - prefix_cache_hits (no prompt_tokens_by_source_total)",
        (
            EXTRAPOLATED,
            "Prefix-cache hits are counted at admission, prompt tokens at prefill completion; "
            "external KV transfers are not counted as cached.",
        ),
    )
    return uncached, hits


def _gpu_hours(
    r: Reading, replicas: Measurement, spans: Covered, money: str
) -> tuple[Measurement, Measurement, Measurement]:
    """GPUs, GPU-hours and their rent; the rent is ``no_data`` without a GPU-hour price.

    GPU-hours are the declared GPUs per replica x the replica-hours covered (``spans``)."""
    per_replica = r.deployment.hardware.gpus_per_replica
    gpus = derive(
        "gpus",
        per_replica * _value(replicas),
        "GPUs",
        [replicas],
        f"{per_replica} GPUs/replica x replicas_seen",
        (GPU_HOURS,),
    )
    hours = spans.replica_seconds(_value(replicas)) / 3600.0
    gpu_hours = spans.noted(
        derive(
            "gpu_hours",
            per_replica * hours,
            "GPU-hours",
            [gpus],
            f"{per_replica} GPUs/replica x {hours:g} replica-hours covered",
            (GPU_HOURS,),
        )
    )
    price = r.deployment.hardware.gpu_hour_price
    if price is None:
        rent = r.made(
            "cost",
            None,
            money,
            Status.NO_DATA,
            promql=gpu_hours.provenance.promql,
            computation="gpu_hour_price x gpu_hours (no gpu_hour_price given)",
            annotations=(*gpu_hours.annotations, NO_PRICE),
            caveats=(SCOPE, GPU_HOURS),
        )
    else:
        rent = derive(
            "cost",
            price * _value(gpu_hours),
            money,
            [gpu_hours],
            f"{price:g}/GPU-hour x gpu_hours",
            (SCOPE, GPU_HOURS),
        )
    return gpus, gpu_hours, rent


def _useful(
    completed: Measurement, mean_out: Measurement, share: Measurement | None
) -> Measurement:
    """Useful output tokens: the SLA share (1 without one) x stop/length requests x mean length."""
    candidate = _value(completed) * _value(mean_out)
    inputs = [completed, mean_out, *([share] if share is not None else [])]
    s_lo, s_hi = _interval(share) if share is not None else (1.0, 1.0)
    useful = derive(
        "useful_output_tokens",
        candidate * (_value(share) if share is not None else 1.0),
        "tokens",
        inputs,
        "sla_share x completed_requests x output_tokens_mean"
        if share is not None
        else "completed_requests x output_tokens_mean (no SLA)",
        (USEFUL, EXTRAPOLATED),
    )
    return _bounded(useful, s_lo * candidate, s_hi * candidate)


def _per_million(rent: Measurement, useful: Measurement, money: str) -> Measurement:
    """Cost per million useful output tokens, bounded by the useful tokens' interval."""
    u_lo, u_hi = _interval(useful)
    c = _value(rent)
    per_million = derive(
        "cost_per_million_useful_output_tokens",
        _div(c, _value(useful)) * 1e6,
        f"{money}/million tokens",
        [rent, useful],
        "cost / useful_output_tokens x 1e6 (totals over the window, not a mean of ratios)",
        (SCOPE, USEFUL),
    )
    return _bounded(
        per_million, c / u_hi * 1e6 if u_hi else math.inf, c / u_lo * 1e6 if u_lo else math.inf
    )


def _per_gpu_hour(
    output: Measurement, useful: Measurement, gpu_hours: Measurement
) -> tuple[Measurement, Measurement]:
    """Output and useful output tokens per GPU-hour."""
    g = _value(gpu_hours)
    u_lo, u_hi = _interval(useful)
    out_per_gh, useful_per_gh = (
        derive(
            f"{name}_per_gpu_hour",
            _div(_value(m), g),
            "tokens/GPU-hour",
            [m, gpu_hours],
            f"{name} / gpu_hours",
            caveats,
        )
        for name, m, caveats in (
            ("output_tokens", output, (GPU_HOURS,)),
            ("useful_output_tokens", useful, (GPU_HOURS, USEFUL)),
        )
    )
    return out_per_gh, _bounded(useful_per_gh, _div(u_lo, g), _div(u_hi, g))


def _priced(
    r: Reading, prices: TokenPrices, output: Measurement, gpu_hours: Measurement, money: str
) -> dict[str, Measurement]:
    """Prompt tokens by where they came from, revenue at ``prices`` and the break-even price."""
    uncached, cached = _prompt_split(r)
    revenue = derive(
        "revenue",
        (
            _value(uncached) * prices.input_per_million
            + _value(cached) * prices.cached_input_per_million
            + _value(output) * prices.output_per_million
        )
        / 1e6,
        money,
        [uncached, cached, output],
        f"(uncached x {prices.input_per_million:g} + cached x "
        f"{prices.cached_input_per_million:g} + output x {prices.output_per_million:g}) / 1e6",
        (REVENUE, EXTRAPOLATED),
    )
    tokens = _value(uncached) + _value(cached) + _value(output)
    return {
        "prompt_tokens_uncached": uncached,
        "prompt_tokens_cached": cached,
        "revenue": revenue,
        "break_even_gpu_hour_price": derive(
            "break_even_gpu_hour_price",
            _div(_value(revenue), _value(gpu_hours)),
            f"{money}/GPU-hour",
            [revenue, gpu_hours],
            "revenue / gpu_hours",
            (REVENUE, SCOPE, GPU_HOURS),
        ),
        "blended_price_per_million_tokens": derive(
            "blended_price_per_million_tokens",
            _div(_value(revenue), tokens) * 1e6,
            f"{money}/million tokens",
            [revenue, uncached, cached, output],
            "revenue / (uncached + cached + output tokens) x 1e6",
            (REVENUE,),
        ),
    }


def _cost(r: Reading, settings: CostSettings) -> CostResult:
    """GPU cost, cost per million useful output tokens and, with prices, the break-even price.

    GPU-hours are ``hardware.gpus_per_replica`` x the replica-hours the
    replicas' series cover (the window's hours x replicas seen when they cover
    all of it); cost is ``hardware.gpu_hour_price`` (currency per GPU-hour) x
    GPU-hours, in that currency. Useful output tokens (tokens) are estimated
    (see the module docstring); cost per million of them is in currency per
    million tokens; tokens per GPU-hour need no price. Without a GPU-hour
    price, cost and cost per million useful tokens are ``no_data`` saying
    so. With ``settings.prices``, revenue (currency) and the break-even
    GPU-hour price (currency per GPU-hour). Counters are extrapolated
    increases over the window.
    """
    m, w = r.matchers, r.seconds
    # Every number asked at once: none waits on another's answer.
    replicas_asked = r.soon(partial(replicas_seen, r, vllm.GENERATION_TOKENS))
    spans_asked = r.soon(partial(covered, r))
    completed_m = (*m, Matcher.regex("finished_reason", _COMPLETED))
    stop_or_length = "Finished on stop or length: aborts and errors excluded."
    completing = r.soon(
        partial(
            r.measure,
            "completed_requests",
            b.increase_total(vllm.REQUEST_SUCCESS, completed_m, w),
            "requests",
            caveats=(EXTRAPOLATED, stop_or_length),
        ),
    )
    averaging = r.soon(
        partial(
            histogram_mean,
            r,
            vllm.REQUEST_GENERATION_TOKENS,
            "output_tokens_mean",
            caveats=("Mean over every finished request.",),
        ),
    )
    sharing = r.soon(partial(_sla_share, r, settings.sla_ttft_s, settings.sla_e2e_s))
    output_expr = b.increase_total(vllm.GENERATION_TOKENS, m, w)
    outputting = r.soon(
        partial(r.measure, "output_tokens", output_expr, "tokens", caveats=(EXTRAPOLATED,)),
    )
    replicas = replicas_asked.result()
    # Money is in the currency named, else in units of the price given ("currency").
    money = settings.currency or "currency"
    gpus, gpu_hours, rent = _gpu_hours(r, replicas, spans_asked.result(), money)
    output = outputting.result()
    completed, mean_out = completing.result(), averaging.result()
    shares, share = sharing.result()
    useful = _useful(completed, mean_out, share)
    out_per_gh, useful_per_gh = _per_gpu_hour(output, useful, gpu_hours)
    prices = settings.prices
    priced = _priced(r, prices, output, gpu_hours, money) if prices is not None else {}
    return CostResult(
        replicas_seen=replicas,
        gpus=gpus,
        gpu_hours=gpu_hours,
        cost=rent,
        output_tokens=output,
        completed_requests=completed,
        output_tokens_mean=mean_out,
        sla_shares=shares,
        sla_share=share,
        useful_output_tokens=useful,
        cost_per_million_useful_output_tokens=_per_million(rent, useful, money),
        output_tokens_per_gpu_hour=out_per_gh,
        useful_output_tokens_per_gpu_hour=useful_per_gh,
        gpu_hour_price=r.deployment.hardware.gpu_hour_price,
        prices=prices,
        sla_ttft_s=settings.sla_ttft_s,
        sla_e2e_s=settings.sla_e2e_s,
        currency=settings.currency,
        **priced,
    )


cost = Analysis(
    name="cost",
    title="Cost",
    entry=_cost,
    result=CostResult,
    settings=CostSettings,
    summary="GPU-hours, cost per million useful output tokens, tokens per GPU-hour, break-even.",
)
