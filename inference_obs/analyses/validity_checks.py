"""The checks behind comparison validity: each reads two profiles and returns findings.

Every check is a function ``(a, b, thresholds) -> list[Finding]`` listed in
:data:`CHECKS`. A check fires on evidence from the data or the declared
configuration, never on the compared values alone: a throughput ratio of
2 is not itself a reason to distrust it, traffic that differs by 2x is.
The one exception is :func:`concurrency`, which reads the direction of a
tail-latency difference: when the more loaded side has the worse tail the
ordering may be a load artefact (invalid); when the less loaded side is
still worse, load cannot explain it (caveat).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.measurement import Measurement, Status
from inference_obs.analyses.throughput import Regime
from inference_obs.analyses.validity_findings import (
    CENTRAL,
    COMPARISONS,
    LATENCY,
    TAILS,
    THROUGHPUT,
    Evidence,
    Finding,
    Severity,
    latency_keys,
)
from inference_obs.analyses.validity_profile import Profile

__all__ = ["CHECKS", "Thresholds", "comparison_value"]

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


def _v(m: Measurement | None) -> float | None:
    return m.value if m is not None and m.ok else None


def _ratio(x: float | None, y: float | None) -> float | None:
    """max/min of two positive values; None when either is missing or not positive."""
    if x is None or y is None or x <= 0 or y <= 0:
        return None
    return max(x, y) / min(x, y)


def _evidence(statistic: str, unit: str, a: Profile, b: Profile, x: object, y: object) -> Evidence:
    def clean(v: object) -> float | str | None:
        return v if v is None or isinstance(v, float | str) else str(v)

    return Evidence(
        statistic=statistic, unit=unit,
        values={a.deployment.name: clean(x), b.deployment.name: clean(y)},
    )  # fmt: skip


def _names(a: Profile, b: Profile) -> str:
    return f"{a.deployment.name} and {b.deployment.name}"


def _all(severity: Severity, keys: tuple[str, ...]) -> dict[str, Severity]:
    return dict.fromkeys(keys, severity)


def workload(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Output and prompt lengths, output budgets and the finish-reason mix."""
    out: list[Finding] = []
    oa, ob = _v(a.shapes.output_tokens_mean), _v(b.shapes.output_tokens_mean)
    r = _ratio(oa, ob)
    if r is not None and r >= t.length_ratio:
        out.append(Finding(
            code="output_length_differs",
            message=f"{_names(a, b)} generated outputs of different lengths ({r:.1f}x in mean): "
            "token rates and end-to-end times measure different work.",
            evidence=(_evidence("output_tokens_mean", "tokens", a, b, oa, ob),),
            affects={**_all(X, THROUGHPUT), **_all(X, latency_keys(("e2e",))),
                     **_all(C, latency_keys(("ttft", "tpot", "itl", "queue"))),
                     "gpu_utilization": C, "power": C, "tokens_per_gpu_hour": C,
                     "cost_per_token": C},
            how_to_compare="Compare per-token latency (TPOT, ITL) rather than end-to-end "
            "time, and throughput only between windows with matched output budgets.",
        ))  # fmt: skip
    pa, pb = _v(a.shapes.prompt_tokens_mean), _v(b.shapes.prompt_tokens_mean)
    r = _ratio(pa, pb)
    if r is not None and r >= t.length_ratio:
        out.append(Finding(
            code="prompt_length_differs",
            message=f"{_names(a, b)} received prompts of different lengths ({r:.1f}x in "
            "mean): prefill work per request differs.",
            evidence=(_evidence("prompt_tokens_mean", "tokens", a, b, pa, pb),),
            affects={**_all(C, latency_keys(("ttft", "e2e"))), **_all(C, THROUGHPUT),
                     "gpu_utilization": C, "tokens_per_gpu_hour": C, "cost_per_token": C},
        ))  # fmt: skip
    evidence, differs = [], False
    for bound in (20, 50):
        sa = _v(a.shapes.max_tokens_share.get(bound))
        sb = _v(b.shapes.max_tokens_share.get(bound))
        if sa is not None and sb is not None:
            evidence.append(_evidence(f"max_tokens_share_le_{bound}", "ratio", a, b, sa, sb))
            differs |= abs(sa - sb) >= t.max_tokens_share_gap
    ma, mb = _v(a.shapes.max_tokens_mean), _v(b.shapes.max_tokens_mean)
    r = _ratio(ma, mb)
    if r is not None:
        evidence.append(_evidence("max_tokens_mean", "tokens", a, b, ma, mb))
        differs |= r >= t.length_ratio
    if differs:
        out.append(Finding(
            code="max_tokens_differs",
            message=f"{_names(a, b)} served requests with different output budgets "
            "(max_tokens): outputs were capped differently.",
            evidence=tuple(evidence),
            affects={**_all(X, THROUGHPUT), **_all(C, latency_keys(("e2e",))),
                     "tokens_per_gpu_hour": C, "cost_per_token": C},
            how_to_compare="Compare windows or routes with the same max_tokens distribution.",
        ))  # fmt: skip
    reasons = sorted(set(a.shapes.finish_shares) | set(b.shapes.finish_shares))
    shares = {
        r: (_v(a.shapes.finish_shares.get(r)) or 0.0, _v(b.shapes.finish_shares.get(r)) or 0.0)
        for r in reasons
    }
    distance = 0.5 * sum(abs(x - y) for x, y in shares.values())
    if shares and distance >= t.finish_mix_distance:
        out.append(Finding(
            code="finish_mix_differs",
            message=f"{_names(a, b)} ended requests differently (total variation "
            f"{distance:.2f}): e.g. by length on one side and by stop on the other.",
            evidence=tuple(_evidence(f"finished_{r}_share", "ratio", a, b, x, y)
                           for r, (x, y) in shares.items()),
            affects={**_all(C, THROUGHPUT), **_all(C, latency_keys(("e2e", "tpot")))},
        ))  # fmt: skip
    return out


def load(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Traffic volume and activity, requests in flight, queueing, demand and windows."""
    out: list[Finding] = []
    ra, rb = _v(a.requests_per_second_per_replica), _v(b.requests_per_second_per_replica)
    xa, xb = _v(a.active_share), _v(b.active_share)
    rr, xr = _ratio(ra, rb), _ratio(xa, xb)
    if (rr is not None and rr >= t.volume_ratio) or (xr is not None and xr >= t.volume_ratio):
        out.append(Finding(
            code="traffic_volume_differs",
            message=f"{_names(a, b)} carried different traffic (requests per replica "
            f"{rr or math.nan:.1f}x, share of time with work {xr or math.nan:.1f}x): rates "
            "and utilisation show demand, not what the hardware can do.",
            evidence=(
                _evidence("requests_per_second_per_replica", "requests/s", a, b, ra, rb),
                _evidence("active_share", "ratio", a, b, xa, xb),
            ),
            affects={**_all(X, THROUGHPUT), "gpu_utilization": X, "power": C,
                     "tokens_per_gpu_hour": X, "cost_per_token": X},
            how_to_compare="Compare throughput only at matched demand, or under a load test "
            "that saturates both; compare utilisation over the intervals both were busy.",
        ))  # fmt: skip
    ca, cb = _v(a.in_flight), _v(b.in_flight)
    r = _ratio(ca, cb)
    if r is not None and r >= t.concurrency_ratio and ca is not None and cb is not None:
        busier = a if ca > cb else b
        affects = {**_all(C, latency_keys(stats=CENTRAL)), **_all(C, THROUGHPUT),
                   "gpu_utilization": C, "power": C}  # fmt: skip
        for key in latency_keys(stats=TAILS):
            va, vb = _v(comparison_value(a, key)), _v(comparison_value(b, key))
            worse = None if va is None or vb is None or va == vb else (a if va > vb else b)
            affects[key] = X if worse is None or worse is busier else C
        out.append(Finding(
            code="concurrency_differs",
            message=f"{busier.deployment.name} had {r:.1f}x the requests in flight "
            f"({ca:.1f} against {cb:.1f}): a worse tail on the busier side may be load, not "
            "hardware.",
            evidence=(_evidence("in_flight_mean", "requests", a, b, ca, cb),),
            affects=affects,
            how_to_compare="Compare latency over intervals of matched concurrency.",
        ))  # fmt: skip
    qa, qb = _v(a.throughput.waiting_sample_share), _v(b.throughput.waiting_sample_share)
    if qa is not None and qb is not None and (qa >= t.queue_share) != (qb >= t.queue_share):
        out.append(Finding(
            code="queueing_differs",
            message=f"Only {(a if qa >= t.queue_share else b).deployment.name} queued "
            "requests: its first-token and end-to-end times include waiting.",
            evidence=(_evidence("waiting_sample_share", "ratio", a, b, qa, qb),),
            affects={**_all(C, latency_keys(("ttft", "e2e", "queue")))},
            how_to_compare="Compare TTFT minus queue time, or intervals without a queue.",
        ))  # fmt: skip
    limited = [p for p in (a, b) if p.throughput.regime is Regime.DEMAND_LIMITED]
    if limited:
        out.append(Finding(
            code="demand_limited",
            message=f"{' and '.join(p.deployment.name for p in limited)} served all the demand "
            "sent (no queue, KV cache not full): throughput is an observed floor.",
            evidence=(_evidence("regime", "", a, b, a.throughput.regime.value,
                                b.throughput.regime.value),),
            affects={**_all(NOTE, THROUGHPUT), "tokens_per_gpu_hour": NOTE, "cost_per_token": NOTE},
        ))  # fmt: skip
    wa, wb = a.window.seconds, b.window.seconds
    if max(wa, wb) / min(wa, wb) >= t.window_ratio:
        out.append(Finding(
            code="window_differs",
            message=f"The windows differ in length ({wa:g} s against {wb:g} s).",
            evidence=(_evidence("window_seconds", "seconds", a, b, wa, wb),),
            affects={**_all(C, THROUGHPUT), "gpu_utilization": C},
        ))  # fmt: skip
    return out


def _declared(p: Profile, field: str) -> object:
    for part in (p.deployment.config, p.deployment.hardware, p.deployment.engine):
        if field in type(part).model_fields:
            return getattr(part, field)
    raise KeyError(field)


def caches(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Prefix-cache hit rates, external KV caches, offload and speculative decoding."""
    out: list[Finding] = []
    ha, hb = _v(a.cache.prefix_cache_hit_rate), _v(b.cache.prefix_cache_hit_rate)
    if ha is not None and hb is not None and abs(ha - hb) >= t.hit_rate_gap:
        out.append(Finding(
            code="prefix_hit_rate_differs",
            message=f"Prefix-cache hit rates differ ({ha:.0%} against {hb:.0%}): the share "
            "of prompt tokens computed differs.",
            evidence=(_evidence("prefix_cache_hit_rate", "ratio", a, b, ha, hb),),
            affects={**_all(C, latency_keys(("ttft",))), **_all(C, THROUGHPUT),
                     "gpu_utilization": C, "tokens_per_gpu_hour": C, "cost_per_token": C},
        ))  # fmt: skip
    ea, eb = a.cache.external_kv_hit_rate, b.cache.external_kv_hit_rate
    da, db = _declared(a, "external_kv_cache"), _declared(b, "external_kv_cache")
    if ea.ok != eb.ok or bool(da) != bool(db):
        out.append(Finding(
            code="external_kv_one_side",
            message="An external KV cache serves one side only: its prompt tokens take a "
            "lookup-and-transfer path the other side does not have.",
            evidence=(_evidence("external_kv_hit_rate", "ratio", a, b, _v(ea), _v(eb)),
                      _evidence("declared external_kv_cache", "", a, b, da, db)),
            affects={**_all(C, latency_keys(("ttft", "e2e"))), **_all(C, THROUGHPUT),
                     "tokens_per_gpu_hour": C, "cost_per_token": C},
        ))  # fmt: skip
    fields = ("prefix_caching", "cpu_offload")
    pairs = {f: (_declared(a, f), _declared(b, f)) for f in fields}
    if any(x != y for x, y in pairs.values()):
        out.append(Finding(
            code="cache_config_differs",
            message="Declared prefix caching or CPU offload differ.",
            evidence=tuple(_evidence(f"declared {f}", "", a, b, x, y)
                           for f, (x, y) in pairs.items()),
            affects={**_all(C, latency_keys(("ttft", "e2e"))), **_all(C, THROUGHPUT)},
        ))  # fmt: skip
    sa, sb = a.cache.spec_acceptance_rate, b.cache.spec_acceptance_rate
    ma, mb = _declared(a, "speculative_method"), _declared(b, "speculative_method")
    if sa.ok != sb.ok or bool(ma) != bool(mb):
        out.append(Finding(
            code="spec_decode_one_side",
            message="Speculative decoding runs on one side only: its engine steps emit "
            "several tokens, so inter-token latency measures different things.",
            evidence=(_evidence("spec_acceptance_rate", "ratio", a, b, _v(sa), _v(sb)),
                      _evidence("declared speculative_method", "", a, b, ma, mb)),
            affects={**_all(X, latency_keys(("itl",))), **_all(C, latency_keys(("tpot", "e2e"))),
                     **_all(C, THROUGHPUT)},
            how_to_compare="Compare per-request TPOT, which counts tokens, not steps.",
        ))  # fmt: skip
    elif sa.ok and sb.ok and abs((_v(sa) or 0.0) - (_v(sb) or 0.0)) >= t.acceptance_gap:
        out.append(Finding(
            code="spec_acceptance_differs",
            message="Speculative-decoding acceptance differs: tokens per engine step differ.",
            evidence=(_evidence("spec_acceptance_rate", "ratio", a, b, _v(sa), _v(sb)),),
            affects={**_all(C, latency_keys(("itl", "tpot")))},
        ))  # fmt: skip
    return out


#: (code, declared fields, what it affects, message)
_DECLARED: tuple[tuple[str, tuple[str, ...], dict[str, Severity], str], ...] = (
    ("gpu_model_differs", ("gpu_model", "gpu_memory_gib"),
     {"gpu_utilization": NOTE, "power": NOTE, **_all(NOTE, THROUGHPUT)},
     "The GPU models differ: the comparison is between hardware, as intended."),
    ("gpus_per_replica_differs", ("gpus_per_replica",),
     {**_all(C, THROUGHPUT), "power": NOTE},
     "Replicas hold different numbers of GPUs: per-replica rates are not per-GPU rates."),
    ("parallelism_differs",
     ("tensor_parallel_size", "data_parallel_size", "expert_parallel"),
     {**_all(C, latency_keys()), **_all(C, THROUGHPUT)},
     "Declared parallelism differs: each step does different communication."),
    ("engine_build_differs", ("version", "image"),
     {**_all(C, latency_keys()), **_all(C, THROUGHPUT)},
     "Engine versions or images differ: kernels and schedulers may differ."),
    ("kv_dtype_differs", ("kv_cache_dtype",), {"kv_capacity": C},
     "KV-cache dtypes differ: capacity in tokens follows bytes per token."),
    ("batched_tokens_differs", ("max_num_batched_tokens",),
     {"kv_capacity": X, **_all(C, latency_keys(("ttft",)))},
     "max_num_batched_tokens differs: the step budget is taken from KV-cache memory "
     "(doubling it can halve the KV capacity)."),
    ("interconnect_differs", ("interconnect",),
     {**_all(C, latency_keys()), **_all(C, THROUGHPUT)},
     "Declared interconnects differ: collectives cross different links."),
)  # fmt: skip


def declared(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Hardware and software as declared: GPUs, parallelism, build, KV dtype, budgets, links."""
    out = []
    for code, fields, affects, message in _DECLARED:
        pairs = {f: (_declared(a, f), _declared(b, f)) for f in fields}
        if any(x != y for x, y in pairs.values()):
            evidence = tuple(_evidence(f, "", a, b, x, y) for f, (x, y) in pairs.items())
            out.append(Finding(code=code, message=message, evidence=evidence, affects=affects))
    return out


def definitions(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """What some numbers are, noted on every comparison they concern (info only)."""
    return [
        Finding(code="itl_counts_engine_steps", affects=_all(NOTE, latency_keys(("itl",))),
                message="Inter-token latency is the gap between engine output events; with "
                "speculative decoding one event carries several tokens."),
        Finding(code="tpot_zero_short_outputs", affects=_all(NOTE, latency_keys(("tpot",))),
                message="vLLM records TPOT as 0 for requests with at most one output token."),
        Finding(code="board_power_only", affects={"power": NOTE},
                message="Measured board power, not a rated figure, and without CPU, memory, "
                "network or whole-machine idle power."),
        Finding(code="extrapolated_counts", affects=_all(NOTE, THROUGHPUT),
                message="Token and request counts are extrapolated increases: fractional "
                "estimates, not audited counts."),
    ]  # fmt: skip


def data_quality(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Missing or partial values, and statistics resting on too few observations."""
    missing: dict[str, Severity] = {}
    partial: dict[str, Severity] = {}
    evidence_missing: list[Evidence] = []
    for key in COMPARISONS:
        ma, mb = comparison_value(a, key), comparison_value(b, key)
        if key == "cost_per_token" and (ma is None or mb is None):
            continue  # priced on neither or one side: left out, not missing
        if ma is None or mb is None or not ma.ok or not mb.ok:
            missing[key] = X
            why = [m.annotations[0].message if m is not None and m.annotations else "no value"
                   for m in (ma, mb)]  # fmt: skip
            evidence_missing.append(_evidence(key, "", a, b, *why))
        elif Status.PARTIAL in (ma.status, mb.status):
            partial[key] = C
    out = []
    if missing:
        out.append(Finding(code="missing_data", affects=missing, evidence=tuple(evidence_missing),
                           message="A side has no data for these comparisons."))  # fmt: skip
    if partial:
        message = "A side's value rests on partial data (see its annotations)."
        out.append(Finding(code="partial_data", affects=partial, message=message))
    few: dict[str, Severity] = {}
    evidence = []
    for metric in LATENCY:
        na, nb = _v(a.observations[metric]), _v(b.observations[metric])
        if na is None or nb is None:
            continue
        for stat in (*CENTRAL, *TAILS):
            q = 0.5 if stat in CENTRAL else float(stat[1:]) / 100
            need = t.min_observations if stat == "mean" else t.tail_observations / (1 - q)
            if min(na, nb) < need:
                few[f"{metric}_{stat}"] = C
        if any(k.startswith(f"{metric}_") for k in few):
            evidence.append(_evidence(f"{metric}_observations", "observations", a, b, na, nb))
    if few:
        out.append(Finding(
            code="too_few_observations", affects=few, evidence=tuple(evidence),
            message="Some statistics rest on few observations (a q-quantile needs about "
            f"{t.tail_observations:g}/(1-q) of them to be stable).",
        ))  # fmt: skip
    return out


#: Every check, in report order.
CHECKS: tuple[Check, ...] = (workload, load, caches, declared, definitions, data_quality)
