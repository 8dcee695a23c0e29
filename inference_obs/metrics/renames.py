"""Renamed families: which exposed name of each catalogue family a source's data holds.

Exporters rename metrics across versions (vLLM's
``vllm:time_per_output_token_seconds`` became ``vllm:inter_token_latency_seconds``
in 0.10.2); the analyses ask for the newest name. :func:`renames` maps each
family whose newest name is absent, but one of its older names present, to that
older name (:meth:`~inference_obs.metrics.family.Family.resolve`), and
:func:`rename` rewrites an expression to read it: a histogram's
``_bucket``/``_sum``/``_count`` series follow their family.

Exporters that re-export an engine's families under another prefix are read the
same way (:func:`exposed_names`): Ray Serve's ``ray_vllm:`` names and NVIDIA
NIM's names without a prefix (``num_requests_running``) for vLLM's, and the
SGLang router's ``sglang_`` names (its workers' series, each with a ``source``
label) for SGLang's.

>>> from inference_obs.query import Selector, to_promql
>>> found = renames({"vllm:time_per_output_token_seconds_bucket"})
>>> found
{'vllm:inter_token_latency_seconds': 'vllm:time_per_output_token_seconds'}
>>> to_promql(rename(Selector("vllm:inter_token_latency_seconds_count"), found))
'vllm:time_per_output_token_seconds_count'
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from inference_obs.metrics import FAMILIES
from inference_obs.metrics.family import Family, MetricType
from inference_obs.query import Expr, Selector
from inference_obs.query.walk import transform

__all__ = [
    "EXPORTER_NAMES",
    "HISTOGRAM_PARTS",
    "REEXPORT_PREFIXES",
    "exposed_names",
    "probe_name",
    "rename",
    "rename_text",
    "renamed",
    "renames",
]

#: The series a classic histogram family exposes, by suffix of its base name.
HISTOGRAM_PARTS: tuple[str, ...] = ("_bucket", "_sum", "_count")


#: Per engine prefix, the prefixes its families are re-exported under, in order of
#: preference: Ray Serve's (``ray_vllm:`` as Ray's dashboards query it; ``ray_vllm_`` as
#: Ray 2.48's metrics agent serves it, the colon replaced), then NVIDIA NIM's (none); the
#: SGLang router's.
REEXPORT_PREFIXES: dict[str, tuple[str, ...]] = {
    "vllm:": ("ray_vllm:", "ray_vllm_", ""),
    "sglang:": ("sglang_",),
}

#: Names an exporter gives a family outside any prefix rule, preferred to the prefixed
#: ones: NVIDIA NIM counts finished requests by ``finished_reason`` in
#: ``request_finish_total`` and keeps ``request_success_total`` without the label.
EXPORTER_NAMES: dict[str, tuple[str, ...]] = {
    "vllm:request_success_total": ("request_finish_total",),
}


def exposed_names(family: Family) -> tuple[str, ...]:
    """Every name ``family`` is exposed under: its own names (newest first), the names an
    exporter gives it outside the prefix rules (:data:`EXPORTER_NAMES`), then each of its
    own names under the prefixes other exporters re-export it with
    (:data:`REEXPORT_PREFIXES`).

    >>> from inference_obs.metrics import vllm
    >>> exposed_names(vllm.NUM_REQUESTS_RUNNING)  # doctest: +NORMALIZE_WHITESPACE
    ('vllm:num_requests_running', 'ray_vllm:num_requests_running',
     'ray_vllm_num_requests_running', 'num_requests_running')
    """
    out = [*family.names, *EXPORTER_NAMES.get(family.name, ())]
    for prefix, others in REEXPORT_PREFIXES.items():
        for other in others:
            out.extend(
                other + name.removeprefix(prefix)
                for name in family.names
                if name.startswith(prefix)
            )
    return tuple(out)


def probe_name(family: Family, name: str) -> str:
    """The series that shows ``family`` exposed as ``name`` (a histogram's ``_count``)."""
    return f"{name}_count" if family.type is MetricType.HISTOGRAM else name


def renames(available: Collection[str], families: Iterable[Family] | None = None) -> dict[str, str]:
    """Per family of ``families`` (default: the catalogue) read under an older name: newest ->
    the name ``available`` holds.

    ``available`` holds series names (``_bucket``/``_count`` names, or base names,
    for histograms). A family whose newest name is present, or none of whose
    names is, is not listed: it is read as asked.
    """
    out: dict[str, str] = {}
    for family in FAMILIES if families is None else families:
        for name in exposed_names(family):
            if (
                name in available
                or probe_name(family, name) in available
                or (family.type is MetricType.HISTOGRAM and f"{name}_bucket" in available)
            ):
                if name != family.name:
                    out[family.name] = name
                break
    return out


def renamed(name: str, names: Mapping[str, str]) -> str:
    """The series ``name`` (a histogram part allowed) as ``names`` renames its family."""
    if name in names:
        return names[name]
    for part in HISTOGRAM_PARTS:
        base = name.removesuffix(part)
        if base != name and base in names:
            return names[base] + part
    return name


def rename(expr: Expr, names: Mapping[str, str]) -> Expr:
    """``expr`` reading each family under the name ``names`` gives it (see :func:`renames`)."""
    if not names:
        return expr

    def change(node: Expr) -> Expr:
        if isinstance(node, Selector) and node.metric is not None:
            new = renamed(node.metric, names)
            if new != node.metric:
                return Selector(new, node.matchers, node.offset, node.at)
        return node

    return transform(expr, change)


def rename_text(promql: str, names: Mapping[str, str]) -> str:
    """PromQL text with each metric of ``names`` (and its histogram parts) renamed.

    Names are replaced whole: a name is a run of ``[A-Za-z0-9_:]`` characters,
    so ``vllm:x_seconds`` is not found inside ``vllm:x_seconds_total``.
    """
    for old, new in names.items():
        pattern = (
            rf"(?<![A-Za-z0-9_:]){re.escape(old)}(?=(?:_bucket|_sum|_count)?(?![A-Za-z0-9_:]))"
        )
        promql = re.sub(pattern, new, promql)
    return promql
