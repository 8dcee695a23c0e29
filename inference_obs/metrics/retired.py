"""Families an engine no longer exports, with what replaced them.

Renames live on the family as :class:`~inference_obs.metrics.family.Alias`
(``gpu_cache_usage_perc`` became ``kv_cache_usage_perc``). The families here
have no successor of the same meaning, or only a different way to compute it
(a V0 gauge of a hit rate whose V1 form is a ratio of two counters), so they
are not in :data:`inference_obs.metrics.FAMILIES`: queries never read them,
but dashboards still do.

The versions were read from the released wheels listed in
``metrics/vllm.py`` (vLLM) and ``metrics/sglang.py`` (SGLang): ``absent_from``
is the first version checked that lacks the name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inference_obs.errors import ConfigurationError
from inference_obs.metrics.family import MetricType

__all__ = ["RETIRED", "Retired", "version_key"]


@dataclass(frozen=True, slots=True)
class Retired:
    """A family an exporter stopped exporting.

    Attributes
    ----------
    name
        The exposed name (counters with ``_total``, histograms without a suffix).
    exporter
        ``"vllm"`` or ``"sglang"``.
    type
        What it was.
    unit
        Unit of a sample (of an observation for histograms).
    absent_from
        First version checked that no longer exports it.
    replacement
        What to read instead, in words and names of the catalogue; empty when
        nothing replaces it.
    """

    name: str
    exporter: str
    type: MetricType
    unit: str
    absent_from: str
    replacement: str = ""


_V0_SWAP = "V1 has no swap preemption: a preempted request is recomputed, counted by "
_HIT_RATE = (
    "the V1 counters: sum(rate(vllm:prefix_cache_hits_total[w])) / "
    "sum(rate(vllm:prefix_cache_queries_total[w]))"
)

RETIRED: tuple[Retired, ...] = (
    Retired(
        "vllm:num_requests_swapped",
        "vllm",
        MetricType.GAUGE,
        "requests",
        "0.9.1",
        _V0_SWAP + "vllm:num_preemptions_total",
    ),
    Retired("vllm:cpu_cache_usage_perc", "vllm", MetricType.GAUGE, "ratio", "0.9.1"),
    Retired(
        "vllm:gpu_prefix_cache_hit_rate", "vllm", MetricType.GAUGE, "ratio", "0.9.1", _HIT_RATE
    ),
    Retired("vllm:cpu_prefix_cache_hit_rate", "vllm", MetricType.GAUGE, "ratio", "0.9.1"),
    Retired(
        "vllm:avg_prompt_throughput_toks_per_s",
        "vllm",
        MetricType.GAUGE,
        "tokens_per_second",
        "0.7.3",
        "sum(rate(vllm:prompt_tokens_total[w]))",
    ),
    Retired(
        "vllm:avg_generation_throughput_toks_per_s",
        "vllm",
        MetricType.GAUGE,
        "tokens_per_second",
        "0.7.3",
        "sum(rate(vllm:generation_tokens_total[w]))",
    ),
    Retired(
        "vllm:spec_decode_draft_acceptance_rate",
        "vllm",
        MetricType.GAUGE,
        "ratio",
        "0.10.0",
        "sum(rate(vllm:spec_decode_num_accepted_tokens_total[w])) / "
        "sum(rate(vllm:spec_decode_num_draft_tokens_total[w]))",
    ),
    Retired("vllm:spec_decode_efficiency", "vllm", MetricType.GAUGE, "ratio", "0.10.0"),
    Retired(
        "vllm:spec_decode_num_emitted_tokens_total",
        "vllm",
        MetricType.COUNTER,
        "tokens",
        "0.10.0",
        "vllm:spec_decode_num_accepted_tokens_total (accepted draft tokens)",
    ),
    Retired(
        "vllm:model_forward_time_milliseconds",
        "vllm",
        MetricType.HISTOGRAM,
        "milliseconds",
        "0.9.1",
    ),
    Retired(
        "vllm:model_execute_time_milliseconds",
        "vllm",
        MetricType.HISTOGRAM,
        "milliseconds",
        "0.9.1",
    ),
    Retired(
        "vllm:tokens_total",
        "vllm",
        MetricType.COUNTER,
        "tokens",
        "0.8.5",
        "vllm:prompt_tokens_total + vllm:generation_tokens_total, each rate()-d",
    ),
    Retired(
        "sglang:avg_request_queue_latency",
        "sglang",
        MetricType.GAUGE,
        "seconds",
        "0.5.23",
        "the histogram sglang:queue_time_seconds (request-weighted mean: _sum over _count)",
    ),
)
"""Every retired family the catalogue knows."""

_VERSION = re.compile(r"\d+(?:\.\d+)*")


def version_key(text: str) -> tuple[int, ...]:
    """``"0.12.0"`` as ``(0, 12, 0)``, for comparing versions.

    Examples
    --------
    >>> version_key("0.9.1") < version_key("0.12")
    True
    """
    match = _VERSION.search(text) if isinstance(text, str) else None
    if match is None:
        raise ConfigurationError(
            f"version {text!r}: expected numbers separated by dots, e.g. 0.12.0"
        )
    parts = [int(part) for part in match.group().split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)
