"""The vLLM families the analyses ask for, read from an SGLang server's families instead.

The analyses ask for vLLM families. On an SGLang deployment each is read as
the SGLang family :data:`~inference_obs.metrics.sglang_vllm.VLLM_EQUIVALENTS`
names as its nearest equivalent, where the two measure the same thing in the
same unit (a :class:`StandIn`); a family without such an equivalent keeps its
vLLM name and so reads "no data", never a number of another meaning. What still
differs is said with each number (:attr:`StandIn.differs`, the table's text).

Left out on purpose (the table maps them, but the number would mean something
else): SGLang's precomputed per-interval ratios and rates (``cache_hit_rate``,
``gen_throughput``, ``spec_accept_*``: gauges where vLLM has counters), its
per-stage latency (stages are not vLLM's prefill/decode phases), its token
gauges read as vLLM's used fraction, the separate disaggregation queues, and
aborted requests as successes.

Label differences are absorbed where the function over a stand-in's range
is applied (``rate``, ``increase``, ``max_over_time`` ...):

- counters every TP rank increments for the same events
  (:data:`~inference_obs.metrics.sglang.PER_RANK_COPIES`) are read once per
  server: the function is wrapped in ``max without (rank labels)``;
- labels that split SGLang's events into parts vLLM does not tell apart
  (:data:`SPLITS`: ``is_streaming``, ``cache_source``) are summed away, so
  both sides of a ratio pair series by the same labels.

>>> from inference_obs.query import Selector, increase, to_promql
>>> from inference_obs.metrics import vllm
>>> to_promql(read_as_sglang(vllm.NUM_REQUESTS_WAITING.select()))
'sglang:num_queue_reqs'
>>> to_promql(read_as_sglang(increase(vllm.NUM_PREEMPTIONS.select().over(60)).sum()))
'sum(max without (tp_rank, pp_rank, moe_ep_rank, attn_cp_rank) \
(increase(sglang:num_retracted_requests_total[1m])))'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from inference_obs.metrics import family as catalogue_family, sglang as s, vllm as v
from inference_obs.metrics.family import Family
from inference_obs.metrics.renames import HISTOGRAM_PARTS
from inference_obs.metrics.sglang_vllm import VLLM_EQUIVALENTS
from inference_obs.query import Aggregate, Call, Expr, Matcher, Range, Selector
from inference_obs.query.walk import transform
from inference_obs.samples import NAME, Labels

__all__ = [
    "SPLITS",
    "STAND_INS",
    "UNIT_READINGS",
    "StandIn",
    "read_as_sglang",
    "without_splits",
]

#: Labels that split an SGLang family's events into parts its vLLM equivalent does not tell
#: apart: streamed or not, and which cache tier served the tokens.
SPLITS: tuple[str, ...] = ("is_streaming", "cache_source")

#: Functions over a range whose per-series results add up over a split of the events (each
#: series a part): a counter's change or rate, its resets, its extremes within a difference.
_ADDITIVE = frozenset(
    {
        "rate",
        "irate",
        "increase",
        "delta",
        "idelta",
        "resets",
        "max_over_time",
        "min_over_time",
        "last_over_time",
        "sum_over_time",
    }
)


@dataclass(frozen=True, slots=True)
class StandIn:
    """An SGLang family read where an analysis asks for a vLLM one.

    Attributes
    ----------
    asked
        The vLLM family an analysis asks for.
    read
        The SGLang family read instead (same metric type and unit).
    differs
        What still differs between the two numbers, one or two sentences.
    matchers
        Added to every selector of ``read``: the part of it that matches ``asked``.
    """

    asked: Family
    read: Family
    differs: str
    matchers: tuple[Matcher, ...] = ()


def _table(read: Family, matchers: tuple[Matcher, ...] = ()) -> StandIn:
    """``read`` standing in for the vLLM family the equivalence table gives it, with its text."""
    theirs, differs = VLLM_EQUIVALENTS[read.name]
    return StandIn(catalogue_family(theirs), read, differs, matchers)


#: SGLang reports the GPU radix cache as ``device``; 0.4.6 had no ``cache_source`` label
#: (the empty alternative matches a missing label).
_DEVICE = Matcher.regex("cache_source", "device|")

_ALL: tuple[StandIn, ...] = (
    _table(s.TIME_TO_FIRST_TOKEN),
    _table(s.INTER_TOKEN_LATENCY),
    _table(s.REQUEST_TIME_PER_OUTPUT_TOKEN),
    _table(s.E2E_REQUEST_LATENCY),
    _table(s.QUEUE_TIME),
    _table(s.NUM_RUNNING_REQS),
    _table(s.NUM_QUEUE_REQS),
    _table(s.TOKEN_USAGE),
    _table(s.NUM_RETRACTED_REQUESTS),
    _table(s.PROMPT_TOKENS),
    _table(s.GENERATION_TOKENS),
    _table(s.NUM_REQUESTS),
    _table(s.CACHED_TOKENS),
    _table(s.PROMPT_TOKENS_HISTOGRAM),
    _table(s.UNCACHED_PROMPT_TOKENS_HISTOGRAM),
    _table(s.GENERATION_TOKENS_HISTOGRAM),
    _table(s.ESTIMATED_FLOPS_PER_GPU),
    _table(s.ESTIMATED_READ_BYTES_PER_GPU),
    _table(s.ESTIMATED_WRITE_BYTES_PER_GPU),
    # vLLM's local prefix-cache ratio: tokens found in the GPU cache over tokens looked up.
    # SGLang looks up every prompt token in its radix cache, so its prompt tokens are the
    # lookups and its device-sourced cached tokens the hits.
    StandIn(
        v.PREFIX_CACHE_HITS,
        s.CACHED_TOKENS,
        "Prompt tokens found in SGLang's GPU radix cache (cache_source device), counted when "
        "each request finishes; vLLM counts its lookups as they happen.",
        (_DEVICE,),
    ),
    StandIn(
        v.PREFIX_CACHE_QUERIES,
        s.PROMPT_TOKENS,
        "Every prompt token of finished requests (SGLang looks each up in its radix cache), "
        "counted when the request finishes; vLLM counts its lookups as they happen.",
    ),
)
STAND_INS: Mapping[str, StandIn] = MappingProxyType({one.asked.name: one for one in _ALL})
"""vLLM family name -> the SGLang family read in its place on an SGLang deployment."""

UNIT_READINGS: Mapping[str, str] = MappingProxyType(
    {v.NUM_PREEMPTIONS.name: "one SGLang retraction is one preemption event of one request"}
)
"""vLLM family name -> why its stand-in's unit, though named differently, counts the same."""


def _stand_in(name: str, stand_ins: Mapping[str, StandIn]) -> tuple[StandIn, str] | None:
    """The stand-in of the series ``name`` (a histogram part allowed), and that part."""
    if name in stand_ins:
        return stand_ins[name], ""
    for part in HISTOGRAM_PARTS:
        base = name.removesuffix(part)
        if base != name and base in stand_ins:
            return stand_ins[base], part
    return None


def _per_rank(node: Expr) -> bool:
    """Whether ``node`` is a range over a counter every TP rank counts."""
    return isinstance(node, Range) and node.selector.metric in s.PER_RANK_COPIES


def _split(node: Expr, read: frozenset[str]) -> bool:
    """Whether ``node`` is a range over a stand-in (one of ``read``) split by :data:`SPLITS`."""
    if not isinstance(node, Range) or node.selector.metric is None:
        return False
    name = node.selector.metric
    base = next((name.removesuffix(p) for p in HISTOGRAM_PARTS if name.endswith(p)), name)
    return base in read or name in read


def _splits_of(stand_ins: Mapping[str, StandIn]) -> frozenset[str]:
    """Names of the stand-ins whose series carry a label of :data:`SPLITS`."""
    return frozenset(
        one.read.name for one in stand_ins.values() if set(one.read.labels) & set(SPLITS)
    )


def without_splits(labels: Labels, stand_ins: Mapping[str, StandIn] = STAND_INS) -> Labels:
    """``labels`` of a series without the :data:`SPLITS` labels, if it is a split stand-in's."""
    name = labels.get(NAME, "")
    base = next((name.removesuffix(p) for p in HISTOGRAM_PARTS if name.endswith(p)), name)
    if (base in _splits_of(stand_ins) or name in _splits_of(stand_ins)) and any(
        k in labels for k in SPLITS
    ):
        return Labels((k, v) for k, v in labels.items() if k not in SPLITS)
    return labels


def read_as_sglang(expr: Expr, stand_ins: Mapping[str, StandIn] = STAND_INS) -> Expr:
    """``expr`` (asking for vLLM families) as it must be asked of an SGLang server.

    Each selector of a family in ``stand_ins`` reads its stand-in, with the
    stand-in's matchers added; other selectors are kept. A function over the
    range of a per-rank counter is wrapped in ``max without`` the rank labels,
    so each event counts once, not once per rank; an additive one over a
    stand-in split by :data:`SPLITS` in ``sum without`` them.
    """
    if not stand_ins:
        return expr
    split = _splits_of(stand_ins)

    def change(node: Expr) -> Expr:
        if isinstance(node, Selector) and node.metric is not None:
            found = _stand_in(node.metric, stand_ins)
            if found is not None:
                one, part = found
                return Selector(
                    one.read.name + part, node.matchers + one.matchers, node.offset, node.at
                )
        if not isinstance(node, Call):
            return node
        out: Expr = node
        if any(_per_rank(arg) for arg in node.args):
            out = Aggregate("max", out, without=s.RANK_LABELS)
        if node.name in _ADDITIVE and any(_split(arg, split) for arg in node.args):
            out = Aggregate("sum", out, without=SPLITS)
        return out

    return transform(expr, change)
