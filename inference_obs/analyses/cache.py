"""Cache paths: local prefix-cache and external-KV hit rates, preemptions, speculative decoding.

The two hit rates have different denominators: the local prefix cache is
asked about every prompt token, the external KV cache only about the tokens
the local cache missed. Their sum is not a hit rate of anything, so
:meth:`CacheResult.combined_hit_rate` refuses to compute it.
"""

from __future__ import annotations

from functools import partial

from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.errors import QueryError
from inference_obs.metrics import builders, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Expr
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import Ratio, counter_ratios
from inference_obs.reading.measurement import Measurement, derive
from inference_obs.reading.result import AnalysisResult

__all__ = ["CacheResult", "cache"]

_LOCAL = (
    "Denominator: every prompt token looked up in the replica's local prefix cache "
    "(vllm:prefix_cache_queries_total)."
)
_EXTERNAL = (
    "Denominator: only the tokens looked up in the KV connector's external cache, i.e. those "
    "the local cache missed (vllm:external_prefix_cache_queries_total); never add it to the "
    "local hit rate."
)
_SPEC = (
    "Acceptance is progress per verification step, not an end-to-end speed-up; no_data means "
    "the deployment exports no speculative-decoding counters (none configured), never 0."
)


class CacheResult(AnalysisResult):
    """Cache behaviour of one deployment over one window.

    Attributes
    ----------
    prefix_cache_hit_rate
        Local prefix-cache hits over queries, tokens/tokens (ratio 0-1).
    external_kv_hit_rate
        External KV cache hits over its own queries (ratio 0-1).
    preemptions
        Preemptions in the window (extrapolated increase), preemptions.
    spec_acceptance_rate
        Accepted over proposed draft tokens (ratio 0-1).
    spec_mean_acceptance_length
        ``1 + accepted / drafts``: tokens per verification step, bonus token
        included (tokens).
    """

    prefix_cache_hit_rate: Measurement
    external_kv_hit_rate: Measurement
    preemptions: Measurement
    spec_acceptance_rate: Measurement
    spec_mean_acceptance_length: Measurement
    caveats: tuple[str, ...] = (_LOCAL, _EXTERNAL, _SPEC)

    def combined_hit_rate(self) -> Measurement:
        """Refused: the local and external hit rates cannot be added.

        Raises
        ------
        QueryError
            Always, explaining the two denominators.
        """
        raise QueryError(
            "the local prefix-cache hit rate and the external KV hit rate cannot be added: the "
            "local rate divides by every prompt token looked up "
            "(vllm:prefix_cache_queries_total), the external rate only by the tokens the local "
            "cache missed (vllm:external_prefix_cache_queries_total). Report them separately, or "
            "compute hits from both over prompt tokens from the counters themselves."
        )


def _cache(r: Reading, settings: NoSettings) -> CacheResult:
    """Hit rates with their own denominators, preemptions and speculative-decoding acceptance.

    All replicas together: counters are summed after ``increase``. Rates are
    ratios (0-1), preemptions a count, acceptance length in tokens; a family
    the deployment does not export gives ``no_data`` with the family named,
    never 0.
    """
    m = r.matchers

    def total(family: Family) -> Expr:
        return builders.increase_total(family, m, r.seconds)

    def ratio(statistic: str, top: Family, bottom: Family, caveat: str) -> Ratio:
        promql = total(top) / total(bottom)
        return Ratio(top.select(m), bottom.select(m), promql, statistic, "ratio", caveats=(caveat,))

    preemptions_expr = total(vllm.NUM_PREEMPTIONS)
    preempted = "Extrapolated counter increase: fractional, not an audited count."
    # The four ratios in one set of requests, the preemptions alongside.
    preempting = r.soon(
        partial(r.measure, "preemptions", preemptions_expr, "preemptions", caveats=(preempted,)),
    )
    accepted = vllm.SPEC_DECODE_NUM_ACCEPTED_TOKENS
    per_draft, local, external, acceptance = counter_ratios(
        r,
        [
            ratio("spec_accepted_per_draft", accepted, vllm.SPEC_DECODE_NUM_DRAFTS, _SPEC),
            ratio(
                "prefix_cache_hit_rate", vllm.PREFIX_CACHE_HITS, vllm.PREFIX_CACHE_QUERIES, _LOCAL
            ),
            ratio(
                "external_kv_hit_rate",
                vllm.EXTERNAL_PREFIX_CACHE_HITS,
                vllm.EXTERNAL_PREFIX_CACHE_QUERIES,
                _EXTERNAL,
            ),
            ratio("spec_acceptance_rate", accepted, vllm.SPEC_DECODE_NUM_DRAFT_TOKENS, _SPEC),
        ],
    )
    length = None if per_draft.value is None else 1 + per_draft.value
    return CacheResult(
        prefix_cache_hit_rate=local,
        external_kv_hit_rate=external,
        preemptions=preempting.result(),
        spec_acceptance_rate=acceptance,
        spec_mean_acceptance_length=derive(
            "spec_mean_acceptance_length",
            length,
            "tokens",
            [per_draft],
            "1 + accepted tokens / drafts",
            (_SPEC,),
        ),
    )


cache = Analysis(
    name="cache",
    title="Caches and speculative decoding",
    entry=_cache,
    result=CacheResult,
    settings=NoSettings,
    summary="Prefix-cache and external-KV hit rates, preemptions, speculative-decoding acceptance.",
)
