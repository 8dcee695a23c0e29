"""Whether a deployment runs what it declares: its declared configuration against its series.

A :class:`~inference_obs.deployment.Deployment` says what each replica runs
on and how the engine is configured; none of that is proof. This analysis
reads what the servers expose over the window and reports every declared
field as a :class:`Check`:

- ``verified``: the series show the declared value;
- ``consistent``: the series agree with the declared value without showing
  it (the reason says what else they allow);
- ``contradicted``: they show a value the declared one cannot produce (both
  are given);
- ``unverifiable``: nothing exposed can say (the reason names the missing
  family or label, or says no metric carries the field);
- ``not_declared``: the deployment leaves it open (what the series show is given).

What is read: the labels of ``vllm:cache_config_info`` (one series per
engine: ``cache_dtype``, ``block_size``, ``num_gpu_blocks``,
``enable_prefix_caching``, ``gpu_memory_utilization``, ``engine``), the GPUs
dcgm-exporter attributes to each pod with their ``modelName``, and draft
tokens per draft from the speculative-decoding counters.

Tensor-parallel size is never verified: no metric carries it, and GPUs per
engine (the pod's GPUs over its engines) is TP x PP plus any GPU the engine
leaves unused. A count of at least the declared TP is ``consistent``; a
smaller one ``contradicted`` (TP alone needs that many GPUs).

Given the deployment's ``nvidia-smi topo -m`` topology, the declared interconnect is
checked against it (a declared field). What the box's wiring means for the
declared parallel groups (which cross PCIe or the sockets, which stay on
NVLink) is a :class:`TopologyFinding` with its consequence, not a check: a
TP 4 group over NVLink pairs runs, only slower (:mod:`inference_obs.topology`,
placed as well as the box allows).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.configuration_observed import Observed, Seen, kv_capacity
from inference_obs.analyses.unit import Analysis, NoSettings
from inference_obs.deployment import DeclaredConfig
from inference_obs.errors import ConfigurationError
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Measurement, Provenance
from inference_obs.reading.result import AnalysisResult
from inference_obs.topology import Parallelism, Path, Shape, Topology

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Check", "CheckStatus", "ConfigurationResult", "TopologyFinding", "configuration"]

#: Relative gap within which draft tokens per draft verify num_speculative_tokens: drafts
#: cut short near a request's length limit pull the mean slightly below k.
DRAFT_TOLERANCE = 0.01
_NOT_EXPOSED = {
    "hardware.gpu_memory_gib": "DCGM reports framebuffer MiB the driver exposes, not rated GiB",
    "engine.version": "vLLM serves its version at /version, which Prometheus does not scrape",
    "engine.image": "no metric carries the container image",
    "config.expert_parallel": "no vLLM metric says whether expert parallelism is on",
    "config.speculative_method": "the spec_decode counters count drafts of any method",
    "config.cpu_offload": "no vLLM metric of the catalogue describes CPU offload",
}
_SCHEDULER = "vllm:cache_config_info carries the cache configuration only, not scheduler limits"
_NOT_EXPOSED.update(
    {f"config.{f}": _SCHEDULER for f in ("max_num_batched_tokens", "max_num_seqs", "max_model_len")}
)
_DRAFTS = f"draft tokens per draft over the window (within {DRAFT_TOLERANCE:.0%} of declared)"


class CheckStatus(StrEnum):
    """What the series say about one declared field."""

    VERIFIED = "verified"
    #: The series agree with the declared value but cannot show it (e.g. TP from a GPU count).
    CONSISTENT = "consistent"
    CONTRADICTED = "contradicted"
    UNVERIFIABLE = "unverifiable"
    NOT_DECLARED = "not_declared"


class Check(BaseModel):
    """One declared field against what the series show."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    declared: str | None
    observed: str | None
    status: CheckStatus
    reason: str
    provenance: Provenance | None = None


class TopologyFinding(BaseModel):
    """What a box's wiring means for one declared parallel group: a finding, not a check.

    A group that crosses PCIe still runs; the wiring sets how fast its
    collective is, or whether a shape works at all, not what was declared.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: Shape
    finding: str = Field(description="What the group's collective travels over, in words.")
    consequence: str = Field(description="What follows for serving, and what to do about it.")


class ConfigurationResult(AnalysisResult):
    """The declared configuration of one deployment, field by field, against its series.

    Attributes
    ----------
    checks
        One per declared field (``hardware.*``, ``engine.*``, ``config.*``,
        ``replicas``) and per cache label the deployment cannot declare
        (``cache.*``).
    kv_capacity_tokens, kv_capacity_tokens_per_replica
        KV-cache capacity in tokens, in all and per replica.
    draft_tokens_per_draft
        Mean draft length over the window, tokens (``num_speculative_tokens``).
    topology, parallel_groups
        The parsed ``nvidia-smi topo -m`` and the declared groups on it.
    topology_findings
        One per declared group on that box: the path its collective takes and
        what follows (empty without a topology or declared parallelism).
    """

    deployment: str
    checks: tuple[Check, ...]
    kv_capacity_tokens: Measurement
    kv_capacity_tokens_per_replica: tuple[Measurement, ...]
    draft_tokens_per_draft: Measurement
    topology: Topology | None = None
    parallel_groups: tuple[Shape, ...] = ()
    topology_findings: tuple[TopologyFinding, ...] = ()

    def check(self, field: str) -> Check:
        """The check of ``field`` (``"config.kv_cache_dtype"``); ConfigurationError names it."""
        for item in self.checks:
            if item.field == field:
                return item
        checked = ", ".join(c.field for c in self.checks)
        raise ConfigurationError(f"no check of {field!r}; checked: {checked}")

    @property
    def contradictions(self) -> tuple[Check, ...]:
        """The checks whose series show another value than declared."""
        return tuple(c for c in self.checks if c.status is CheckStatus.CONTRADICTED)

    def to_frame(self) -> pd.DataFrame:
        """One row per check: field, declared, observed, status, reason, promql (``;``-joined)."""
        import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

        rows = [
            {
                "field": c.field,
                "declared": c.declared,
                "observed": c.observed,
                "status": c.status.value,
                "reason": c.reason,
                "promql": "; ".join(c.provenance.promql) if c.provenance else "",
            }
            for c in self.checks
        ]
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        cells = []
        for c in self.checks:
            row = (c.field, c.declared or "—", c.observed or "—", c.status.value, c.reason)
            cells.append("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in row) + "</tr>")
        head = "".join(f"<th>{h}</th>" for h in ("field", "declared", "observed", "status", "why"))
        checks = f"<table><tr>{head}</tr>{''.join(cells)}</table>"
        found = "".join(
            f"<li>{html.escape(f.finding)}: {html.escape(f.consequence)}</li>"
            for f in self.topology_findings
        )
        wiring = f"<p>Topology findings:</p><ul>{found}</ul>" if found else ""
        return checks + wiring + super()._repr_html_()


def _compare(
    field: str,
    declared: object,
    seen: Seen,
    provenance: Callable[[tuple[str, ...]], Provenance | None],
    same: Callable[[str, str], bool] | None = None,
) -> Check:
    """The check of one field: ``declared`` (None when not declared) against ``seen``."""
    text = None if declared is None else str(declared)
    observed = ", ".join(seen.values) or None
    prov = provenance(seen.promql)
    if text is None:
        reason = f"the deployment declares no value; {seen.why}"
        status = CheckStatus.NOT_DECLARED
    elif not seen.values:
        reason, status = seen.why, CheckStatus.UNVERIFIABLE
    elif all((same or _same)(text, v) for v in seen.values):
        reason, status = seen.why, CheckStatus.VERIFIED
    else:
        reason = f"declared {text}, the series show {observed}: {seen.why}"
        status = CheckStatus.CONTRADICTED
    return Check(
        field=field,
        declared=text,
        observed=observed,
        status=status,
        reason=reason,
        provenance=prov,
    )


def _same(a: str, b: str) -> bool:
    """Equal as numbers where both are, else up to case and runs of whitespace."""
    try:
        return float(a) == float(b)
    except ValueError:
        return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _no_provenance(promql: tuple[str, ...]) -> None:
    return None


def _interconnect(declared: str | None, box: Topology | None) -> Check:
    field = "hardware.interconnect"
    if box is None:
        why = Seen((), "no nvidia-smi topo -m text was given")
        return _compare(field, declared, why, _no_provenance)
    codes = sorted({c for row in box.links for c in row} - {"X"})
    observed = f"{box.interconnect.value} ({', '.join(codes)})"
    agrees = None if declared is None else box.agrees_with(declared)
    status, reason = CheckStatus.NOT_DECLARED, box.description
    if declared is not None and agrees is None:
        status = CheckStatus.UNVERIFIABLE
        reason = f"the declared text names no class (NVSwitch, pairs, PCIe) or link code; {reason}"
    elif agrees is not None:
        status = CheckStatus.VERIFIED if agrees else CheckStatus.CONTRADICTED
    return Check(field=field, declared=declared, observed=observed, status=status, reason=reason)


def _tensor_parallel(declared: int | None, seen: Seen, prov: Provenance | None) -> Check:
    """TP against GPUs per engine: a count can be consistent with TP, or too small for it."""
    field, text = "config.tensor_parallel_size", None if declared is None else str(declared)
    counts = [float(v) for v in seen.values]
    observed = ", ".join(f"{v} GPU{'' if v == '1' else 's'} per engine" for v in seen.values)
    if declared is None:
        status, reason = CheckStatus.NOT_DECLARED, f"the deployment declares no value; {seen.why}"
    elif not counts:
        status, reason = CheckStatus.UNVERIFIABLE, seen.why
    elif min(counts) < declared:
        status = CheckStatus.CONTRADICTED
        reason = (
            f"declared TP {declared} needs at least {declared} GPUs per engine (TP x PP); "
            f"the series show {observed}: {seen.why}"
        )
    else:
        status = CheckStatus.CONSISTENT
        reason = (
            f"{seen.why}: room for TP {declared}, but a GPU count is TP x PP plus unused "
            "GPUs, so it cannot show the TP an engine runs"
        )
    return Check(
        field=field,
        declared=text,
        observed=observed or None,
        status=status,
        reason=reason,
        provenance=prov,
    )


def _consequence(shape: Shape, box: Topology) -> str:
    """What a group's path means for serving, after the published H100 vs H200 write-up."""
    sockets = any("SYS" in row for row in box.links)
    crossing = " and between the CPU sockets (SYS)" if sockets else ""
    if shape.path is Path.UNAVAILABLE:
        return (
            f"the group needs more GPUs than the {box.gpu_count} on this box: it spans boxes "
            "over the network, or the declared size is not what runs"
        )
    if shape.path is not Path.PCIE:
        return "no limit from the wiring"
    if shape.parallelism is Parallelism.TENSOR:
        return (
            f"its all-reduce, twice per layer on every decode step, crosses PCIe{crossing}: "
            "custom and symmetric-memory all-reduce need NVLink between every pair, so NCCL "
            "over PCIe carries it, and decode (inter-token latency) is slower than the same TP "
            f"on NVLink; TP {box.largest_nvlink_clique} per group would stay on NVLink"
        )
    return (
        f"its all-to-all lacks NVLink peer access between every pair{crossing}: data- and "
        "expert-parallel shapes depend on it and may fail or crawl; prefer tensor-parallel "
        "replicas that fit the NVLink groups"
    )


def _findings(config: DeclaredConfig, box: Topology) -> tuple[TopologyFinding, ...]:
    """What the box's wiring means for each declared parallel group, placed at best."""
    if config.tensor_parallel_size is None and config.data_parallel_size is None:
        return ()
    tp, dp = config.tensor_parallel_size or 1, config.data_parallel_size or 1
    return tuple(
        TopologyFinding(group=g, finding=g.text, consequence=_consequence(g, box))
        for g in box.groups(tp, dp, bool(config.expert_parallel))
    )


def _configuration(r: Reading, settings: NoSettings) -> ConfigurationResult:
    """Check the deployment's declared hardware, engine and configuration against its series.

    Reads the label sets of the series with samples in the window, and the
    deployment's ``topology`` (``nvidia-smi topo -m`` on its boxes) when
    known. Returns a check per field, KV capacity in tokens and draft tokens
    per draft (tokens) as Measurements, and the topology with the declared
    groups.
    """
    deployment = r.deployment
    box = deployment.topology
    seen = Observed(r)
    per_draft = seen.draft_length()
    k = per_draft.value
    observed = {
        "hardware.gpu_model": seen.models_seen(),
        "hardware.gpus_per_replica": seen.gpus_per_replica(),
        "engine.name": seen.engine_name(),
        "config.tensor_parallel_size": seen.gpus_per_engine(),
        "config.data_parallel_size": seen.engines_per_replica(),
        "config.kv_cache_dtype": seen.label("cache_dtype"),
        "config.prefix_caching": seen.label("enable_prefix_caching"),
        "config.num_speculative_tokens": Seen((f"{k:.6g}",), _DRAFTS, per_draft.provenance.promql)
        if k is not None
        else Seen((), " ".join(a.message for a in per_draft.annotations)),
        "config.external_kv_cache": seen.connector(),
    }
    same: dict[str, Callable[[str, str], bool]] = {
        "config.num_speculative_tokens": lambda a, b: (
            abs(float(b) / float(a) - 1) <= DRAFT_TOLERANCE
        ),
        "config.external_kv_cache": lambda a, b: True,  # any connector: which is not exposed
    }
    checks = [
        _compare("replicas", len(deployment.replicas) or None, seen.replicas(), seen.provenance)
    ]
    for part in ("hardware", "engine", "config"):
        model = getattr(deployment, part)
        for name in type(model).model_fields:
            field, declared = f"{part}.{name}", getattr(model, name)
            if field == "hardware.gpu_hour_price":  # what it costs, not what it runs
                continue
            if field == "hardware.interconnect":
                checks.append(_interconnect(declared, box))
                continue
            if field == "config.tensor_parallel_size":
                found = observed[field]
                checks.append(_tensor_parallel(declared, found, seen.provenance(found.promql)))
                continue
            why = Seen((), _NOT_EXPOSED.get(field, "no exposed metric carries it"))
            found = observed.get(field, why)
            checks.append(_compare(field, declared, found, seen.provenance, same.get(field)))
    for label in ("block_size", "num_gpu_blocks", "gpu_memory_utilization"):
        checks.append(_compare(f"cache.{label}", None, seen.label(label), seen.provenance))
    findings = _findings(deployment.config, box) if box is not None else ()
    total, each = kv_capacity(seen)
    return ConfigurationResult(
        deployment=deployment.name,
        checks=tuple(checks),
        kv_capacity_tokens=total,
        kv_capacity_tokens_per_replica=each,
        draft_tokens_per_draft=per_draft,
        topology=box,
        parallel_groups=tuple(f.group for f in findings),
        topology_findings=findings,
    )


configuration = Analysis(
    name="configuration",
    title="Declared and verified configuration",
    entry=_configuration,
    result=ConfigurationResult,
    settings=NoSettings,
    summary="Declared hardware, engine and configuration, field by field, against the series.",
)
