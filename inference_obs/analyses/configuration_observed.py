"""What a deployment's series show about its configuration, for :mod:`.configuration`.

:class:`Observed` reads, once per analysis, the label sets of
``vllm:cache_config_info`` (one series per engine) and of the DCGM families
that reveal GPUs (attributed to replicas by their pod label), and answers
each field as a :class:`Seen`: the distinct values the series show, or why
there are none, with the PromQL read. :func:`kv_capacity` turns the cache
labels into KV capacity in tokens.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass

from inference_obs.analyses.gpu import PRESENCE, gpu_name
from inference_obs.errors import Annotation
from inference_obs.metrics import builders, dcgm, vllm
from inference_obs.metrics.vllm_cache_config import FROM_BLOCKS, kv_capacity_tokens
from inference_obs.query import to_promql
from inference_obs.reading.alignment import gpu_label_query, gpu_label_sets
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_ratios import Ratio, counter_ratio
from inference_obs.reading.measurement import Measurement, Provenance, Status
from inference_obs.samples import Labels

__all__ = ["Observed", "Seen", "kv_capacity"]

_INFO = vllm.CACHE_CONFIG_INFO
_KV = (
    "Tokens the engines' GPU KV pools hold at once: kv_cache_size_tokens where vLLM exports "
    "it, else num_gpu_blocks x block_size (wrong for hybrid models), per engine, summed; a "
    "pool spans its engine's TP ranks. Not the tokens in use (kv_cache_usage_perc)."
)
_CONNECTOR = "its lookups are counted; which connector it is is not exposed"


@dataclass(frozen=True, slots=True)
class Seen:
    """Distinct observed values of one field, or why there are none, and the queries read."""

    values: tuple[str, ...]
    why: str
    promql: tuple[str, ...] = ()


def _counted(what: str, counts: dict[str, float], promql: tuple[str, ...]) -> Seen:
    detail = ", ".join(f"{r}: {v:g}" for r, v in sorted(counts.items()))
    values = tuple(sorted({f"{v:g}" for v in counts.values()}, key=float))
    return Seen(values, f"{what}, by replica ({detail})", promql)


def _replica(labels: Labels) -> str | None:
    """The pod a series belongs to, under any of its label spellings."""
    return next((labels[k] for k in dcgm.POD_LABELS if k in labels), None)


def _engine(labels: Labels) -> tuple[str, str]:
    """(replica, engine) of a vLLM series: the instance stands in for a missing pod label."""
    return _replica(labels) or labels.get("instance", ""), labels.get("engine", "0")


class Observed:
    """What the window's series show about one deployment, as ``r`` reads it."""

    def __init__(self, r: Reading) -> None:
        self.r = r
        self.name, self.info = r.deployment.name, r.info()
        selector = _INFO.select(r.matchers)
        self.engines = r.series(selector)
        self.info_promql = (to_promql(selector),)
        self.gpus: dict[str, set[str]] = defaultdict(set)
        self.models: set[str] = set()
        self.unattributed = 0  # GPU series without a pod label
        self.gpu_promql: tuple[str, ...] = ()
        for family in PRESENCE:
            found = gpu_label_sets(r.source, r.deployment, family, r.window)
            asked = gpu_label_query(r.deployment, family, r.seconds)
            self.gpu_promql += (to_promql(asked),) if found else ()
            for labels in found:
                pod = _replica(labels)
                if pod is None:
                    self.unattributed += 1
                else:
                    self.gpus[pod].add(gpu_name(labels))
                if "modelName" in labels:
                    self.models.add(labels["modelName"])

    def provenance(self, promql: tuple[str, ...]) -> Provenance | None:
        """The queries behind an observed value (None when nothing was read)."""
        if not promql:
            return None
        return Provenance(
            promql=promql,
            engine=self.info.kind,
            rules=self.info.rules.value,
            computation="label values of the series with samples in the window",
        )

    def engine_name(self) -> Seen:
        return (
            Seen(("vllm",), f"{_INFO.name} has series", self.info_promql)
            if self.engines
            else self.no_engines()
        )

    def connector(self) -> Seen:
        family = vllm.EXTERNAL_PREFIX_CACHE_QUERIES
        lookups = family.select(self.r.matchers)
        if self.r.series(lookups):
            return Seen(("a KV connector",), _CONNECTOR, (to_promql(lookups),))
        return Seen((), f"no series of {family.name}: no connector, or the family is dropped")

    def draft_length(self) -> Measurement:
        """Draft tokens per draft over the window, exactly (counter changes)."""
        m, w = self.r.matchers, self.r.seconds
        drafts, proposed = vllm.SPEC_DECODE_NUM_DRAFTS, vllm.SPEC_DECODE_NUM_DRAFT_TOKENS
        promql = builders.increase_total(proposed, m, w) / builders.increase_total(drafts, m, w)
        ratio = Ratio(
            proposed.select(m),
            drafts.select(m),
            promql,
            "draft_tokens_per_draft",
            "tokens",
            caveats=("Mean draft length: num_speculative_tokens unless cut short.",),
        )
        return counter_ratio(self.r, ratio)

    def engines_by_replica(self) -> dict[str, set[str]]:
        """Engine (data-parallel rank) labels per replica; the instance where no pod label."""
        out: dict[str, set[str]] = defaultdict(set)
        for replica, engine in map(_engine, self.engines):
            out[replica].add(engine)
        return out

    def no_engines(self) -> Seen:
        return Seen((), f"no series of {_INFO.name} for {self.name} in the window")

    def no_gpus(self) -> Seen:
        if self.unattributed:
            return Seen(
                (), f"the DCGM series carry none of the labels {', '.join(dcgm.POD_LABELS)}"
            )
        return Seen((), f"no DCGM series of {', '.join(f.name for f in PRESENCE)}")

    def label(self, label: str) -> Seen:
        if not self.engines:
            return self.no_engines()
        if any(label not in labels for labels in self.engines):
            return Seen((), f"{_INFO.name} does not expose the label {label}", self.info_promql)
        values = tuple(sorted({labels[label] for labels in self.engines}))
        return Seen(values, f"label {label} of {_INFO.name}", self.info_promql)

    def models_seen(self) -> Seen:
        if not self.models:
            return self.no_gpus()
        return Seen(
            tuple(sorted(self.models)), "label modelName of the DCGM series", self.gpu_promql
        )

    def replicas(self) -> Seen:
        count = len(self.engines_by_replica())
        if not count:
            return self.no_engines()
        return Seen((str(count),), f"pods with series of {_INFO.name}", self.info_promql)

    def gpus_per_replica(self) -> Seen:
        if not self.gpus:
            return self.no_gpus()
        return _counted("GPUs", {r: len(g) for r, g in self.gpus.items()}, self.gpu_promql)

    def engines_per_replica(self) -> Seen:
        engines = self.engines_by_replica()
        if not engines:
            return self.no_engines()
        return _counted("engines", {r: len(e) for r, e in engines.items()}, self.info_promql)

    def gpus_per_engine(self) -> Seen:
        engines = self.engines_by_replica()
        if not engines or not self.gpus:
            return self.no_engines() if not engines else self.no_gpus()
        both = {r: len(self.gpus[r]) / len(e) for r, e in engines.items() if r in self.gpus}
        if not both:
            return Seen((), "no pod has both DCGM and vLLM series")
        what = "GPUs per engine (DCGM GPUs of the pod / its engines)"
        return _counted(what, both, (*self.info_promql, *self.gpu_promql))


def kv_capacity(seen: Observed) -> tuple[Measurement, tuple[Measurement, ...]]:
    """KV capacity in tokens, in all and per replica, from cache_config_info's labels."""
    per_engine: dict[tuple[str, str], set[int]] = defaultdict(set)
    unreadable = []
    read_as: set[str] = set()  # how capacities were read: vLLM's own figure, or blocks x size
    for labels in seen.engines:
        capacity = kv_capacity_tokens(labels)
        if capacity is None:
            unreadable.append(labels)
            continue
        per_engine[_engine(labels)].add(capacity[0])
        read_as.add(capacity[1])

    def one(statistic: str, keys: Collection[tuple[str, str]]) -> Measurement:
        changed = [k for k in keys if len(per_engine[k]) > 1]
        value: float | None = None
        if keys and not (unreadable or changed):
            value = sum(next(iter(per_engine[k])) for k in keys)
        m = seen.r.local(
            statistic,
            value,
            "tokens",
            reads=[_INFO.select(seen.r.matchers)],
            computation=f"sum over engines of {' or '.join(sorted(read_as)) or FROM_BLOCKS}",
            caveats=(_KV,),
            missing=[] if seen.engines else [_INFO],
        )
        if unreadable:
            note = (
                f"{_INFO.name} lacks an integer kv_cache_size_tokens, or integer "
                "num_gpu_blocks and block_size labels"
            )
            return m.model_copy(update={"annotations": (Annotation("no_label", note),)})
        if changed:
            names = "; ".join(f"{r} engine {e}: {sorted(per_engine[(r, e)])}" for r, e in changed)
            note = f"the KV pool changed within the window ({names})"
            return m.model_copy(
                update={"status": Status.INVALID, "annotations": (Annotation("changed", note),)}
            )
        return m

    total = one("kv_capacity_tokens", list(per_engine))
    replicas = sorted({r for r, _ in per_engine})
    each = tuple(
        one(f"kv_capacity_tokens[{r}]", [k for k in per_engine if k[0] == r]) for r in replicas
    )
    return total, each
