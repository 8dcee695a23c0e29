"""The checks behind comparison validity: workload, load and caches, and their helpers.

Every check is a function ``(a, b, thresholds) -> list[Finding]``; this
module's are in its :data:`CHECKS`, the configuration, definition and
data-quality ones in :mod:`~inference_obs.analyses.validity.checks_setup`.

A check fires on evidence from the data or the declared configuration,
never on the compared values alone: a throughput ratio of 2 is not itself
a reason to distrust it, traffic that differs by 2x is. The one exception
is the concurrency part of :func:`load`, which reads the direction of a
tail-latency difference: when the more loaded side has the worse tail the
ordering may be a load artefact (invalid); when the less loaded side is
still worse, load cannot explain it (caveat).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.throughput import Regime
from inference_obs.analyses.validity.findings import (
    CENTRAL,
    LATENCY,
    TAILS,
    THROUGHPUT,
    Evidence,
    Finding,
    Severity,
    latency_keys,
)
from inference_obs.analyses.validity.profile import Profile
from inference_obs.reading.measurement import Measurement

__all__ = [
    "CHECKS",
    "Thresholds",
    "comparison_value",
    "declared_value",
    "every",
    "pair_names",
    "ratio",
    "side_by_side",
    "value_of",
]

NOTE, C, X = Severity.INFO, Severity.CAVEAT, Severity.INVALID
Check = Callable[[Profile, Profile, "Thresholds"], list[Finding]]


class Thresholds(BaseModel):
    """When a difference between two deployments becomes a finding."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    length_ratio: float = Field(1.5, gt=1, description="Mean prompt/output length ratio.")
    max_tokens_share_gap: float = Field(0.25, gt=0, le=1, description="Gap in share <= 20/50.")
    finish_mix_distance: float = Field(0.2, gt=0, le=1, description="Total variation distance.")
    volume_ratio: float = Field(2.0, gt=1, description="Requests per replica or active share.")
    concurrency_ratio: float = Field(2.0, gt=1, description="Mean requests in flight.")
    queue_share: float = Field(0.05, gt=0, le=1, description="Share of samples with a queue.")
    hit_rate_gap: float = Field(0.15, gt=0, le=1, description="Prefix-cache hit rate gap.")
    acceptance_gap: float = Field(0.1, gt=0, le=1, description="Draft acceptance rate gap.")
    window_ratio: float = Field(1.1, gt=1, description="Window length ratio.")
    #: A q-quantile needs at least this many observations per (1 - q): 20 for P50, 1000 for P99.
    tail_observations: float = Field(10.0, gt=0)
    min_observations: int = Field(20, ge=1, description="Observations for a mean.")


def comparison_value(p: Profile, key: str) -> Measurement | None:
    """The Measurement a comparison reads from one profile (None when it has none)."""
    metric, _, stat = key.partition("_")
    if metric in LATENCY and stat in (*CENTRAL, *TAILS):
        summary = getattr(p.latency, metric)
        return getattr(summary, stat)  # type: ignore[no-any-return]
    by_key = {
        "output_throughput": p.throughput.output_tokens_per_second_per_replica,
        "request_throughput": p.requests_per_second_per_replica,
        "gpu_utilization": p.gpu.utilization_mean,
        "power": p.gpu.power_mean_watts,
        "tokens_per_gpu_hour": p.cost.useful_output_tokens_per_gpu_hour,
        "cost_per_token": p.cost.cost_per_million_useful_output_tokens if p.priced else None,
        "kv_capacity": p.kv_capacity_tokens,
    }
    return by_key[key]


def value_of(m: Measurement | None) -> float | None:
    return m.value if m is not None and m.ok else None


def ratio(x: float | None, y: float | None) -> float | None:
    """max/min of two positive values; None when either is missing or not positive."""
    if x is None or y is None or x <= 0 or y <= 0:
        return None
    return max(x, y) / min(x, y)


def side_by_side(
    statistic: str, unit: str, a: Profile, b: Profile, x: object, y: object
) -> Evidence:
    def clean(v: object) -> float | str | None:
        return v if v is None or isinstance(v, float | str) else str(v)

    return Evidence(
        statistic=statistic,
        unit=unit,
        values={a.deployment.name: clean(x), b.deployment.name: clean(y)},
    )


def pair_names(a: Profile, b: Profile) -> str:
    return f"{a.deployment.name} and {b.deployment.name}"


def every(severity: Severity, keys: tuple[str, ...]) -> dict[str, Severity]:
    return dict.fromkeys(keys, severity)


def workload(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Output and prompt lengths, output budgets and the finish-reason mix."""
    out: list[Finding] = []
    oa, ob = value_of(a.shapes.output_tokens_mean), value_of(b.shapes.output_tokens_mean)
    r = ratio(oa, ob)
    if r is not None and r >= t.length_ratio:
        out.append(
            Finding(
                code="output_length_differs",
                message=f"{pair_names(a, b)} generated outputs of different lengths ({r:.1f}x in "
                "mean): token rates and end-to-end times measure different work.",
                evidence=(side_by_side("output_tokens_mean", "tokens", a, b, oa, ob),),
                affects={
                    **every(X, THROUGHPUT),
                    **every(X, latency_keys(("e2e",))),
                    **every(C, latency_keys(("ttft", "tpot", "itl", "queue"))),
                    "gpu_utilization": C,
                    "power": C,
                    "tokens_per_gpu_hour": C,
                    "cost_per_token": C,
                },
                how_to_compare="Compare per-token latency (TPOT, ITL) rather than end-to-end "
                "time, and throughput only between windows with matched output budgets.",
            )
        )
    pa, pb = value_of(a.shapes.prompt_tokens_mean), value_of(b.shapes.prompt_tokens_mean)
    r = ratio(pa, pb)
    if r is not None and r >= t.length_ratio:
        out.append(
            Finding(
                code="prompt_length_differs",
                message=f"{pair_names(a, b)} received prompts of different lengths ({r:.1f}x in "
                "mean): prefill work per request differs.",
                evidence=(side_by_side("prompt_tokens_mean", "tokens", a, b, pa, pb),),
                affects={
                    **every(C, latency_keys(("ttft", "e2e"))),
                    **every(C, THROUGHPUT),
                    "gpu_utilization": C,
                    "tokens_per_gpu_hour": C,
                    "cost_per_token": C,
                },
            )
        )
    evidence, differs = [], False
    for bound in (20, 50):
        sa = value_of(a.shapes.max_tokens_share.get(bound))
        sb = value_of(b.shapes.max_tokens_share.get(bound))
        if sa is not None and sb is not None:
            evidence.append(side_by_side(f"max_tokens_share_le_{bound}", "ratio", a, b, sa, sb))
            differs |= abs(sa - sb) >= t.max_tokens_share_gap
    ma, mb = value_of(a.shapes.max_tokens_mean), value_of(b.shapes.max_tokens_mean)
    r = ratio(ma, mb)
    if r is not None:
        evidence.append(side_by_side("max_tokens_mean", "tokens", a, b, ma, mb))
        differs |= r >= t.length_ratio
    if differs:
        out.append(
            Finding(
                code="max_tokens_differs",
                message=f"{pair_names(a, b)} served requests with different output budgets "
                "(max_tokens): outputs were capped differently.",
                evidence=tuple(evidence),
                affects={
                    **every(X, THROUGHPUT),
                    **every(C, latency_keys(("e2e",))),
                    "tokens_per_gpu_hour": C,
                    "cost_per_token": C,
                },
                how_to_compare="Compare windows or routes with the same max_tokens distribution.",
            )
        )
    # A reason one side never gave is 0 of its requests; a side with no finish counts at all
    # (no series) is no data, not a mix of zeros, and is compared with nothing.
    counted = all(any(m.ok for m in p.shapes.finish_shares.values()) for p in (a, b))
    reasons = sorted(set(a.shapes.finish_shares) | set(b.shapes.finish_shares)) if counted else []
    shares = {
        r: (
            value_of(a.shapes.finish_shares.get(r)) or 0.0,
            value_of(b.shapes.finish_shares.get(r)) or 0.0,
        )
        for r in reasons
    }
    distance = 0.5 * sum(abs(x - y) for x, y in shares.values())
    if shares and distance >= t.finish_mix_distance:
        out.append(
            Finding(
                code="finish_mix_differs",
                message=f"{pair_names(a, b)} ended requests differently (total variation "
                f"{distance:.2f}): e.g. by length on one side and by stop on the other.",
                evidence=tuple(
                    side_by_side(f"finished_{r}_share", "ratio", a, b, x, y)
                    for r, (x, y) in shares.items()
                ),
                affects={**every(C, THROUGHPUT), **every(C, latency_keys(("e2e", "tpot")))},
            )
        )
    return out


def load(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Traffic volume and activity, and requests in flight."""
    out: list[Finding] = []
    ra, rb = (
        value_of(a.requests_per_second_per_replica),
        value_of(b.requests_per_second_per_replica),
    )
    xa, xb = value_of(a.active_share), value_of(b.active_share)
    rr, xr = ratio(ra, rb), ratio(xa, xb)
    if (rr is not None and rr >= t.volume_ratio) or (xr is not None and xr >= t.volume_ratio):
        out.append(
            Finding(
                code="traffic_volume_differs",
                message=f"{pair_names(a, b)} carried different traffic (requests per replica "
                f"{rr or math.nan:.1f}x, share of time with work {xr or math.nan:.1f}x): rates "
                "and utilisation show demand, not what the hardware can do.",
                evidence=(
                    side_by_side("requests_per_second_per_replica", "requests/s", a, b, ra, rb),
                    side_by_side("active_share", "ratio", a, b, xa, xb),
                ),
                affects={
                    **every(X, THROUGHPUT),
                    "gpu_utilization": X,
                    "power": C,
                    "tokens_per_gpu_hour": X,
                    "cost_per_token": X,
                },
                how_to_compare="Compare throughput only at matched demand, or under a load test "
                "that saturates both; compare utilisation over the intervals both were busy.",
            )
        )
    ca, cb = value_of(a.in_flight), value_of(b.in_flight)
    r = ratio(ca, cb)
    if r is not None and r >= t.concurrency_ratio and ca is not None and cb is not None:
        busier = a if ca > cb else b
        affects = {
            **every(C, latency_keys(stats=CENTRAL)),
            **every(C, THROUGHPUT),
            "gpu_utilization": C,
            "power": C,
        }
        worse_tails = 0
        for key in latency_keys(stats=TAILS):
            va, vb = value_of(comparison_value(a, key)), value_of(comparison_value(b, key))
            worse = None if va is None or vb is None or va == vb else (a if va > vb else b)
            affects[key] = X if worse is None or worse is busier else C
            worse_tails += worse is busier
        # "May be load" only where the busier side had a worse tail to explain.
        tails = (
            "a worse tail on the busier side may be load, not hardware"
            if worse_tails
            else "the busier side had no worse tail, so load does not explain the other's"
        )
        out.append(
            Finding(
                code="concurrency_differs",
                message=f"{busier.deployment.name} had {r:.1f}x the requests in flight "
                f"({max(ca, cb):.1f} against {min(ca, cb):.1f}): {tails}.",
                evidence=(side_by_side("in_flight_mean", "requests", a, b, ca, cb),),
                affects=affects,
                how_to_compare="Compare latency over intervals of matched concurrency.",
            )
        )
    return out


def demand(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Queueing on one side only, demand-limited throughput, and windows of other lengths."""
    out: list[Finding] = []
    qa, qb = (
        value_of(a.throughput.waiting_sample_share),
        value_of(b.throughput.waiting_sample_share),
    )
    if qa is not None and qb is not None and (qa >= t.queue_share) != (qb >= t.queue_share):
        ma, mb = value_of(a.latency.queue.mean), value_of(b.latency.queue.mean)
        out.append(
            Finding(
                code="queueing_differs",
                message=_queued(a, b, qa >= t.queue_share),
                evidence=(
                    side_by_side("waiting_sample_share", "ratio", a, b, qa, qb),
                    side_by_side("queue_mean", "seconds", a, b, ma, mb),
                ),
                affects={**every(C, latency_keys(("ttft", "e2e", "queue")))},
                how_to_compare="Compare TTFT minus queue time, or intervals without a queue.",
            )
        )
    limited = [p for p in (a, b) if p.throughput.regime is Regime.DEMAND_LIMITED]
    if limited:
        # "No queue" only where none was seen: a queue under the line is still named.
        seen = "; ".join(
            f"{p.deployment.name}: requests waited in {100 * (value_of(share) or 0):.2g}% of "
            f"its samples, KV-cache peak {value_of(p.throughput.kv_cache_usage_max) or 0:.2g}"
            for p in limited
            for share in (p.throughput.waiting_sample_share,)
        )
        out.append(
            Finding(
                code="demand_limited",
                message=f"{' and '.join(p.deployment.name for p in limited)} served all the demand "
                f"sent, its queue under the line and its KV cache not full ({seen}): throughput "
                "is an observed floor.",
                evidence=(
                    side_by_side(
                        "throughput_regime",
                        "",
                        a,
                        b,
                        a.throughput.regime.value,
                        b.throughput.regime.value,
                    ),
                ),
                affects={
                    **every(NOTE, THROUGHPUT),
                    "tokens_per_gpu_hour": NOTE,
                    "cost_per_token": NOTE,
                },
            )
        )
    wa, wb = a.window.seconds, b.window.seconds
    if max(wa, wb) / min(wa, wb) >= t.window_ratio:
        out.append(
            Finding(
                code="window_differs",
                message=f"The windows differ in length ({wa:g} s against {wb:g} s).",
                evidence=(side_by_side("window_seconds", "seconds", a, b, wa, wb),),
                affects={**every(C, THROUGHPUT), "gpu_utilization": C},
            )
        )
    return out


def _seconds(value: float | None) -> str:
    """A time as the report writes it: ms under a second, s above; ``no data`` for None."""
    if value is None:
        return "no data"
    return f"{1000 * value:.4g} ms" if value < 1 else f"{value:.4g} s"


def _queued(a: Profile, b: Profile, a_queued: bool) -> str:
    """Which side queued, and how much each did: "only" only where the other's queue was
    empty (a queue-time mean of 0, or no queue seen and no mean to say otherwise)."""
    more, less = (a, b) if a_queued else (b, a)
    share = value_of(less.throughput.waiting_sample_share)
    mean = value_of(less.latency.queue.mean)
    if mean == 0 or (mean is None and share == 0):
        return (
            f"Only {more.deployment.name} queued requests: its first-token and end-to-end times "
            "include waiting."
        )
    shares = [value_of(p.throughput.waiting_sample_share) or 0 for p in (more, less)]
    means = [_seconds(value_of(p.latency.queue.mean)) for p in (more, less)]
    return (
        f"{more.deployment.name} queued far more than {less.deployment.name} (requests waiting "
        f"in {100 * shares[0]:.3g}% and {100 * shares[1]:.3g}% of their samples, queue-time "
        f"means {means[0]} and {means[1]}): first-token and end-to-end times include "
        "different waiting."
    )


def declared_value(p: Profile, field: str) -> object:
    """A declared field of the deployment (config, hardware or engine); the checks name
    only fields that exist, so an unknown one is a programming error (KeyError)."""
    for part in (p.deployment.config, p.deployment.hardware, p.deployment.engine):
        if field in type(part).model_fields:
            return getattr(part, field)
    raise KeyError(field)


def caches(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Prefix-cache hit rates, external KV caches, offload and speculative decoding."""
    out: list[Finding] = []
    ha, hb = value_of(a.cache.prefix_cache_hit_rate), value_of(b.cache.prefix_cache_hit_rate)
    if ha is not None and hb is not None and abs(ha - hb) >= t.hit_rate_gap:
        out.append(
            Finding(
                code="prefix_hit_rate_differs",
                message=f"Prefix-cache hit rates differ ({ha:.0%} against {hb:.0%}): the share "
                "of prompt tokens computed differs.",
                evidence=(side_by_side("prefix_cache_hit_rate", "ratio", a, b, ha, hb),),
                affects={
                    **every(C, latency_keys(("ttft",))),
                    **every(C, THROUGHPUT),
                    "gpu_utilization": C,
                    "tokens_per_gpu_hour": C,
                    "cost_per_token": C,
                },
            )
        )
    ea, eb = a.cache.external_kv_hit_rate, b.cache.external_kv_hit_rate
    da, db = declared_value(a, "external_kv_cache"), declared_value(b, "external_kv_cache")
    if ea.ok != eb.ok or bool(da) != bool(db):
        out.append(
            Finding(
                code="external_kv_one_side",
                message="An external KV cache serves one side only: its prompt tokens take a "
                "lookup-and-transfer path the other side does not have.",
                evidence=(
                    side_by_side("external_kv_hit_rate", "ratio", a, b, value_of(ea), value_of(eb)),
                    side_by_side("declared external_kv_cache", "", a, b, da, db),
                ),
                affects={
                    **every(C, latency_keys(("ttft", "e2e"))),
                    **every(C, THROUGHPUT),
                    "tokens_per_gpu_hour": C,
                    "cost_per_token": C,
                },
            )
        )
    fields = ("prefix_caching", "cpu_offload")
    pairs = {f: (declared_value(a, f), declared_value(b, f)) for f in fields}
    if any(x != y for x, y in pairs.values()):
        out.append(
            Finding(
                code="cache_config_differs",
                message="Declared prefix caching or CPU offload differ.",
                evidence=tuple(
                    side_by_side(f"declared {f}", "", a, b, x, y) for f, (x, y) in pairs.items()
                ),
                affects={**every(C, latency_keys(("ttft", "e2e"))), **every(C, THROUGHPUT)},
            )
        )
    sa, sb = a.cache.spec_acceptance_rate, b.cache.spec_acceptance_rate
    ma, mb = declared_value(a, "speculative_method"), declared_value(b, "speculative_method")
    if sa.ok != sb.ok or bool(ma) != bool(mb):
        out.append(
            Finding(
                code="spec_decode_one_side",
                message="Speculative decoding runs on one side only: its engine steps emit "
                "several tokens, so inter-token latency measures different things.",
                evidence=(
                    side_by_side("spec_acceptance_rate", "ratio", a, b, value_of(sa), value_of(sb)),
                    side_by_side("declared speculative_method", "", a, b, ma, mb),
                ),
                affects={
                    **every(X, latency_keys(("itl",))),
                    **every(C, latency_keys(("tpot", "e2e"))),
                    **every(C, THROUGHPUT),
                },
                how_to_compare="Compare per-request TPOT, which counts tokens, not steps.",
            )
        )
    elif sa.ok and sb.ok and abs((value_of(sa) or 0.0) - (value_of(sb) or 0.0)) >= t.acceptance_gap:
        out.append(
            Finding(
                code="spec_acceptance_differs",
                message="Speculative-decoding acceptance differs: tokens per engine step differ.",
                evidence=(
                    side_by_side("spec_acceptance_rate", "ratio", a, b, value_of(sa), value_of(sb)),
                ),
                affects={**every(C, latency_keys(("itl", "tpot")))},
            )
        )
    return out


#: The checks of this module, in report order.
CHECKS: tuple[Check, ...] = (workload, load, demand, caches)
