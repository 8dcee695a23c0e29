"""Redaction rules: which labels are renamed, dropped or kept before publication.

What happens to a label (the first that applies):

1. a replica label (:data:`REPLICA_LABELS`: ``pod``, ``exported_pod``,
   ``pod_name``): the pods a deployment selects become its declared replica
   names in sorted order (``PRO-01``; ``H20-01`` .. ``H20-04``), then
   ``<deployment>-NN`` for pods beyond those declared; a pod no deployment
   selects becomes ``<label>-NN``;
2. listed in ``drop``: removed;
3. listed in ``pseudonymise`` (default :data:`PSEUDONYMISE`: hosts, nodes,
   instances, GPU UUIDs, container ids, names and images, namespaces,
   clusters, regions, zones, LoRA adapter names): every value becomes
   ``<label>-NN`` (``Hostname-01``, ``instance-03``), numbered in the sorted
   order of the original values (runs of digits compared as numbers);
4. listed in ``keep`` (default :data:`KEEP`: every other label the metric
   catalogue declares, plus ``le``, ``quantile`` and ``job``; the labels the
   analyses read): kept, unless a value rule matches the value;
5. any other label: ``unlisted`` says; ``pseudonymise`` by default, so a
   label nobody classified never publishes its values.

A label is in one list only. A list given explicitly wins over the default
lists: ``RedactionRules(keep=(*KEEP, "namespace"))`` takes ``namespace`` out
of the default ``pseudonymise``; a label in two given lists is an error.

Value rules (default :data:`VALUE_RULES`: IPv4 addresses, UUIDs, GPU and
MIG UUIDs, hex ids of 32 or more digits) apply to kept values: the first rule
whose ``labels`` pattern fullmatches the label name and whose ``pattern`` is
found in the value either pseudonymises the whole value (no ``replacement``)
or replaces every match by its ``replacement``.

Examples
--------
>>> rules = RedactionRules(keep=(*KEEP, "namespace"), drop=("cluster",))
>>> rules.action("namespace"), rules.action("cluster"), rules.action("Hostname")
('keep', 'drop', 'pseudonymise')
>>> rules.action("pod"), rules.action("some_label")
('replica', 'pseudonymise')
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from inference_obs.errors import ConfigurationError
from inference_obs.query.names import LABEL_NAME

__all__ = [
    "KEEP",
    "PSEUDONYMISE",
    "REPLICA_LABELS",
    "VALUE_RULES",
    "Action",
    "RedactionRules",
    "ValueRule",
]

#: Labels whose values name a replica's pod.
REPLICA_LABELS: tuple[str, ...] = ("pod", "exported_pod", "pod_name")
#: Labels whose values identify a machine, a GPU, a tenant or a customer.
PSEUDONYMISE: tuple[str, ...] = (
    "Hostname",
    "hostname",
    "host",
    "node",
    "nodename",
    "kubernetes_node",
    "instance",
    "UUID",
    "uuid",
    "gpu_uuid",
    "container_id",
    "id",
    "namespace",
    "exported_namespace",
    "pod_namespace",
    "cluster",
    "region",
    "zone",
    "image",
    "name",
    "running_lora_adapters",
    "waiting_lora_adapters",
    "pid",  # a process on some host: distinct values kept, the numbers not
)
#: Labels the metric catalogue declares that carry no identity, and those analyses read.
KEEP: tuple[str, ...] = (
    "attn_cp_rank",
    "attn_cp_size",
    "block_size",
    "cache_dtype",
    "cache_source",
    "cache_type",
    "clock_event",
    "container",
    "cpu",
    "DCGM_FI_DRIVER_VERSION",
    "device",
    "dp_rank",
    "enable_prefix_caching",
    "engine",
    "engine_type",
    "err_code",
    "err_msg",
    "finished_reason",
    "gpu",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "gpu_memory_utilization",
    "handler",
    "is_streaming",
    "job",
    "kv_cache_size_tokens",
    "le",
    "max_lora",
    "method",
    "mode",
    "model_name",
    "modelName",
    "moe_ep_rank",
    "num_gpu_blocks",
    "nvlink",
    "nvswitch",
    "operation",
    "outcome",
    "pci_bus_id",
    "pool",
    "position",
    "pp_rank",
    "pp_size",
    "quantile",
    "reason",
    "request_type",
    "sleep_state",
    "source",
    "stage",
    "status",
    "storage_backend",
    "tp_rank",
    "transfer_type",
    "window_size_in_ms",
    "xid",
)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ValueRule(_Model):
    """A rule for values that identify something whatever their label is called."""

    description: str = Field(min_length=1, description="What the rule finds, for the notes.")
    pattern: str = Field(description="Python regular expression searched in each value.")
    labels: str = Field(".*", description="Regular expression the label name must fullmatch.")
    replacement: str | None = Field(
        None, description="Replaces every match (re.sub); None pseudonymises the whole value."
    )

    @field_validator("pattern", "labels")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigurationError(
                f"{value!r} is not a regular expression ({exc}); write a Python regex, "
                "escaping literal characters such as '.' and '('"
            ) from None
        return value


#: Values that identify a machine or a device in any label.
VALUE_RULES: tuple[ValueRule, ...] = (
    ValueRule(description="IPv4 addresses", pattern=r"\b(?:\d{1,3}\.){3}\d{1,3}\b"),
    ValueRule(description="GPU and MIG UUIDs", pattern=r"\b(?:GPU|MIG)-[0-9a-fA-F-]{8,}"),
    ValueRule(
        description="UUIDs",
        pattern=r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b",
    ),
    ValueRule(description="hex ids of 32 or more digits", pattern=r"\b[0-9a-fA-F]{32,}\b"),
)

Action = Literal["replica", "pseudonymise", "drop", "keep"]
# The label lists of RedactionRules; a label may be in one only.
_LISTS = ("replica_labels", "pseudonymise", "drop", "keep")


class RedactionRules(_Model):
    """Which labels are renamed, dropped or kept before publication (defaults: module docs)."""

    replica_labels: tuple[str, ...] = Field(REPLICA_LABELS, description="Pod labels.")
    pseudonymise: tuple[str, ...] = Field(PSEUDONYMISE, description="Values become <label>-NN.")
    drop: tuple[str, ...] = Field((), description="Labels removed from every series.")
    keep: tuple[str, ...] = Field(KEEP, description="Labels published as they are.")
    unlisted: Literal["pseudonymise", "keep", "drop"] = Field(
        "pseudonymise", description="What happens to a label in no list."
    )
    values: tuple[ValueRule, ...] = Field(VALUE_RULES, description="Rules for kept values.")

    @model_validator(mode="before")
    @classmethod
    def _given_lists_win(cls, data: Any) -> Any:
        """A label listed explicitly leaves the default lists it is also in."""
        if not isinstance(data, dict):
            return data
        given = [k for k in _LISTS if isinstance(data.get(k), list | tuple)]
        named = {label for k in given for label in data[k]}
        out = dict(data)
        for k in _LISTS:
            if k not in given and k not in data:
                out[k] = tuple(x for x in cls.model_fields[k].default if x not in named)
        return out

    @model_validator(mode="after")
    def _disjoint(self) -> RedactionRules:
        seen: dict[str, str] = {}
        for where in _LISTS:
            for label in getattr(self, where):
                if not LABEL_NAME.fullmatch(label):
                    raise ConfigurationError(
                        f"{where}: {label!r} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"
                    )
                if label in seen:
                    raise ConfigurationError(
                        f"label {label!r} is in both {seen[label]} and {where}; list it in one"
                    )
                seen[label] = where
        return self

    def action(self, label: str) -> Action:
        """What happens to ``label``."""
        if label in self.replica_labels:
            return "replica"
        if label in self.drop:
            return "drop"
        if label in self.pseudonymise:
            return "pseudonymise"
        return "keep" if label in self.keep else self.unlisted
