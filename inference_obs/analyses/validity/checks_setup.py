"""The checks of comparison validity that read configuration, definitions and data quality.

Declared hardware and software (as the deployments file says), declared
fields the series contradict, what some numbers are by definition, and
whether each compared value rests on enough data, or on buckets too coarse to
order the two sides' quantiles. See
:mod:`~inference_obs.analyses.validity.checks` for the workload, load and
cache checks and the helpers shared with them.
"""

from __future__ import annotations

from inference_obs.analyses.validity.checks import (
    NOTE,
    C,
    Check,
    Thresholds,
    X,
    comparison_value,
    declared_value,
    every,
    side_by_side,
    value_of,
)
from inference_obs.analyses.validity.findings import (
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
from inference_obs.analyses.validity.profile import Profile
from inference_obs.reading.measurement import Status, same_bucket

__all__ = ["CHECKS"]


#: (code, declared fields, what it affects, message)
_DECLARED: tuple[tuple[str, tuple[str, ...], dict[str, Severity], str], ...] = (
    (
        "gpu_model_differs",
        ("gpu_model", "gpu_memory_gib"),
        {"gpu_utilization": NOTE, "power": NOTE, **every(NOTE, THROUGHPUT)},
        "The GPU models differ: the comparison is between hardware, as intended.",
    ),
    (
        "gpus_per_replica_differs",
        ("gpus_per_replica",),
        {**every(C, THROUGHPUT), "power": NOTE},
        "Replicas hold different numbers of GPUs: per-replica rates are not per-GPU rates.",
    ),
    (
        "parallelism_differs",
        ("tensor_parallel_size", "data_parallel_size", "expert_parallel"),
        {**every(C, latency_keys()), **every(C, THROUGHPUT)},
        "Declared parallelism differs: each step does different communication.",
    ),
    (
        "engine_build_differs",
        ("version", "image"),
        {**every(C, latency_keys()), **every(C, THROUGHPUT)},
        "Engine versions or images differ: kernels and schedulers may differ.",
    ),
    (
        "kv_dtype_differs",
        ("kv_cache_dtype",),
        {"kv_capacity": C},
        "KV-cache dtypes differ: capacity in tokens follows bytes per token.",
    ),
    (
        "batched_tokens_differs",
        ("max_num_batched_tokens",),
        {"kv_capacity": X, **every(C, latency_keys(("ttft",)))},
        "max_num_batched_tokens differs: the step budget is taken from KV-cache memory "
        "(doubling it can halve the KV capacity).",
    ),
    (
        "interconnect_differs",
        ("interconnect",),
        {**every(C, latency_keys()), **every(C, THROUGHPUT)},
        "Declared interconnects differ: collectives cross different links.",
    ),
)


def declared(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Hardware and software as declared: GPUs, parallelism, build, KV dtype, budgets, links."""
    out = []
    for code, fields, affects, message in _DECLARED:
        pairs = {f: (declared_value(a, f), declared_value(b, f)) for f in fields}
        if any(x != y for x, y in pairs.values()):
            evidence = tuple(side_by_side(f, "", a, b, x, y) for f, (x, y) in pairs.items())
            out.append(Finding(code=code, message=message, evidence=evidence, affects=affects))
    return out


def verified(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Declared fields the series contradict: declared differences may not be real."""
    fields = sorted({c.field for p in (a, b) for c in p.configuration.contradictions})
    if not fields:
        return []
    evidence = []
    for field in fields:
        shown = []
        for p in (a, b):
            check = next((c for c in p.configuration.checks if c.field == field), None)
            shown.append(
                "not checked"
                if check is None
                else f"declared {check.declared}, series show {check.observed} "
                f"({check.status.value})"
            )
        evidence.append(side_by_side(field, "", a, b, *shown))
    return [
        Finding(
            code="config_contradicted",
            message=f"The series contradict the declared {', '.join(fields)}: comparisons that "
            "rest on the declared configuration may rest on the wrong one.",
            evidence=tuple(evidence),
            affects={
                **every(C, latency_keys()),
                **every(C, THROUGHPUT),
                "kv_capacity": C,
                "gpu_utilization": C,
                "power": C,
            },
            how_to_compare="Correct the deployments file, or find out what the servers run.",
        )
    ]


def definitions(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """What some numbers are, noted on every comparison they concern (info only)."""
    return [
        Finding(
            code="itl_counts_engine_steps",
            affects=every(NOTE, latency_keys(("itl",))),
            message="Inter-token latency is the gap between engine output events; with "
            "speculative decoding one event carries several tokens.",
        ),
        Finding(
            code="tpot_zero_short_outputs",
            affects=every(NOTE, latency_keys(("tpot",))),
            message="vLLM records TPOT as 0 for requests with at most one output token.",
        ),
        Finding(
            code="board_power_only",
            affects={"power": NOTE},
            message="Measured board power, not a rated figure, and without CPU, memory, "
            "network or whole-machine idle power.",
        ),
        Finding(
            code="extrapolated_counts",
            affects=every(NOTE, THROUGHPUT),
            message="Token and request counts are extrapolated increases: fractional "
            "estimates, not audited counts.",
        ),
    ]


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
            why = [
                m.annotations[0].message if m is not None and m.annotations else "no value"
                for m in (ma, mb)
            ]
            evidence_missing.append(side_by_side(key, "", a, b, *why))
        elif Status.PARTIAL in (ma.status, mb.status):
            partial[key] = C
    out = []
    if missing:
        out.append(
            Finding(
                code="missing_data",
                affects=missing,
                evidence=tuple(evidence_missing),
                message="A side has no data for these comparisons.",
            )
        )
    if partial:
        message = "A side's value rests on partial data (see its annotations)."
        out.append(Finding(code="partial_data", affects=partial, message=message))
    few: dict[str, Severity] = {}
    evidence = []
    for metric in LATENCY:
        na, nb = value_of(a.observations[metric]), value_of(b.observations[metric])
        if na is None or nb is None:
            continue
        for stat in (*CENTRAL, *TAILS):
            q = 0.5 if stat in CENTRAL else float(stat[1:]) / 100
            need = t.min_observations if stat == "mean" else t.tail_observations / (1 - q)
            if min(na, nb) < need:
                few[f"{metric}_{stat}"] = C
        if any(k.startswith(f"{metric}_") for k in few):
            evidence.append(side_by_side(f"{metric}_observations", "observations", a, b, na, nb))
    if few:
        out.append(
            Finding(
                code="too_few_observations",
                affects=few,
                evidence=tuple(evidence),
                message="Some statistics rest on few observations (a q-quantile needs about "
                f"{t.tail_observations:g}/(1-q) of them to be stable).",
            )
        )
    return out


def bucket_resolution(a: Profile, b: Profile, t: Thresholds) -> list[Finding]:
    """Latency quantiles of both sides in one bucket: the histograms cannot order them."""
    shared: dict[str, Severity] = {}
    evidence = []
    for key in latency_keys(stats=("p50", *TAILS)):
        ma = comparison_value(a, key)
        bucket = same_bucket(ma, comparison_value(b, key))
        if bucket is None or ma is None:
            continue
        shared[key] = NOTE
        # The bucket alone: the interpolated values inside it are what cannot be compared.
        edges = f"[{bucket.lower:g}, {bucket.upper:g}]"
        evidence.append(side_by_side(f"{key} bucket", ma.unit, a, b, edges, edges))
    if not shared:
        return []
    return [
        Finding(
            code="same_bucket",
            affects=shared,
            evidence=tuple(evidence),
            message="Both sides' quantiles lie in the same histogram bucket: they are "
            "indistinguishable at this bucket resolution, and the interpolated values do not "
            "say which is lower.",
            how_to_compare="Read them as equal within the bucket; finer bucket bounds around "
            "these values would tell them apart.",
        )
    ]


#: The checks of this module, in report order.
CHECKS: tuple[Check, ...] = (declared, verified, definitions, data_quality, bucket_resolution)
