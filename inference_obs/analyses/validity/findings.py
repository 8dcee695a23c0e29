"""The vocabulary of comparison validity: comparisons, severities, findings and their codes.

A *comparison* is a number a reader might put side by side across two
deployments (a throughput ratio, a P95, a utilisation). A *finding* is a
reason that comparison may not mean what it seems, with a stable code, the
evidence from both sides, and the severity it has for each comparison it
affects. Every code is listed in :data:`FINDINGS` with what it checks;
``docs/comparison-findings.md`` explains each in more words.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CENTRAL",
    "COMPARISONS",
    "FINDINGS",
    "LATENCY",
    "TAILS",
    "THROUGHPUT",
    "Evidence",
    "Finding",
    "Severity",
    "latency_keys",
]


class Severity(StrEnum):
    """How far a finding undermines a comparison."""

    #: Worth knowing; the comparison stands.
    INFO = "info"
    #: The comparison stands only with the finding stated beside it.
    CAVEAT = "caveat"
    #: The comparison does not mean what it seems; do not draw conclusions from it.
    INVALID = "invalid"

    @property
    def rank(self) -> int:
        """0, 1, 2 for info, caveat, invalid."""
        return (Severity.INFO, Severity.CAVEAT, Severity.INVALID).index(self)


#: Latency metrics compared, and the statistics of each.
LATENCY = ("ttft", "tpot", "itl", "e2e", "queue")
CENTRAL = ("mean", "p50")
TAILS = ("p95", "p99")
THROUGHPUT = ("output_throughput", "request_throughput")


def latency_keys(
    metrics: tuple[str, ...] = LATENCY, stats: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """Comparison keys ``<metric>_<stat>`` for ``metrics`` (every statistic by default)."""
    return tuple(f"{m}_{s}" for m in metrics for s in (stats or (*CENTRAL, *TAILS)))


#: Comparison key -> what it compares (unit).
COMPARISONS: dict[str, str] = {
    "output_throughput": "output tokens per second per replica, wall clock (tokens/s)",
    "request_throughput": "finished requests per second per replica (requests/s)",
    **{
        f"{m}_{s}": f"{name} {label} (seconds)"
        for m, name in (
            ("ttft", "time to first token"),
            ("tpot", "per-request time per output token"),
            ("itl", "inter-token latency (per engine step)"),
            ("e2e", "server end-to-end latency"),
            ("queue", "queue time"),
        )
        for s, label in (
            ("mean", "request-weighted mean"),
            ("p50", "P50"),
            ("p95", "P95"),
            ("p99", "P99"),
        )
    },
    "gpu_utilization": "sample-weighted GPU utilisation over allocated GPUs (percent)",
    "power": "mean GPU board power (watts)",
    "tokens_per_gpu_hour": "useful output tokens per GPU-hour (tokens/GPU-hour)",
    "cost_per_token": "cost per million useful output tokens (currency)",
    "kv_capacity": "KV-cache capacity of one engine (tokens)",
}

#: Finding code -> what it checks, in a line. Each is explained in docs/comparison-findings.md.
FINDINGS: dict[str, str] = {
    # Workload shape
    "output_length_differs": "mean output length differs by at least the length ratio",
    "prompt_length_differs": "mean prompt length differs by at least the length ratio",
    "max_tokens_differs": "requested output budgets (max_tokens) differ",
    "finish_mix_differs": "the finish-reason mix differs (total variation)",
    # Load
    "traffic_volume_differs": "requests per replica, or the share of time with work, differ",
    "concurrency_differs": "mean requests in flight differ by at least the concurrency ratio",
    "queueing_differs": "one side queued and the other did not",
    "demand_limited": "throughput was limited by demand: an observed floor, not a capacity",
    "window_differs": "the windows differ in length",
    # Cache paths
    "prefix_hit_rate_differs": "prefix-cache hit rates differ",
    "external_kv_one_side": "an external KV cache serves one side only",
    "cache_config_differs": "declared prefix caching or CPU offload differ",
    # Speculative decoding
    "spec_decode_one_side": "speculative decoding runs on one side only",
    "spec_acceptance_differs": "speculative-decoding acceptance rates differ",
    # Hardware and software
    "gpu_model_differs": "the GPU models differ (the comparison's subject, noted)",
    "gpus_per_replica_differs": "replicas have different numbers of GPUs",
    "parallelism_differs": "declared tensor/data/expert parallelism differ",
    "engine_build_differs": "engine version or image differ",
    "kv_dtype_differs": "KV-cache dtypes differ",
    "batched_tokens_differs": "max_num_batched_tokens differ (it trades against KV capacity)",
    "interconnect_differs": "declared GPU interconnects differ",
    "config_contradicted": "the series contradict a side's declared configuration",
    # Definitions
    "itl_counts_engine_steps": "inter-token latency is per engine step, not per token",
    "tpot_zero_short_outputs": "TPOT is recorded as 0 for requests with at most one token",
    "board_power_only": "board power excludes CPU, memory, network and idle machine power",
    "extrapolated_counts": "counts are extrapolated increases, fractional estimates",
    # Data quality
    "missing_data": "a side has no data for the comparison",
    "partial_data": "a side's value was computed from partial data",
    "too_few_observations": "too few observations for the statistic to be stable",
    "same_bucket": "both sides' quantiles lie in one histogram bucket: indistinguishable",
}


class Evidence(BaseModel):
    """One number from each side that a finding rests on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    statistic: str
    unit: str
    values: dict[str, float | str | None] = Field(description="Deployment name -> value.")


class Finding(BaseModel):
    """A reason a comparison may not mean what it seems."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(description="Stable code, a key of FINDINGS.")
    message: str = Field(description="The finding in plain words.")
    evidence: tuple[Evidence, ...] = ()
    affects: dict[str, Severity] = Field(description="Comparison key -> severity for it.")
    how_to_compare: str | None = Field(None, description="How a fair comparison can be made.")

    def model_post_init(self, context: object, /) -> None:
        # Findings are made by the checks in this package, never from input: a code or
        # comparison missing from the tables is a programming error.
        if self.code not in FINDINGS:
            raise ValueError(f"unknown finding code {self.code!r}: add it to FINDINGS")
        unknown = sorted(set(self.affects) - set(COMPARISONS))
        if unknown:
            raise ValueError(f"finding {self.code} affects unknown comparisons {unknown}")

    @property
    def severity(self) -> Severity:
        """The worst severity it has for any comparison."""
        return max(self.affects.values(), key=lambda s: s.rank, default=Severity.INFO)
