"""The catalogue name a misspelt engine name most likely means.

A name under an engine prefix that no version exports shows no data, ever.
:func:`likely_name` proposes the family meant (its current name), by rules tried in order, so the
answer never depends on the order of the catalogue:

1. the Prometheus client's counter suffix: ``vllm:num_preemptions`` is exposed
   as ``vllm:num_preemptions_total`` (and a gauge named with ``_total`` without it);
2. the other engine's words: SGLang's queue is ``num_queue_reqs`` where vLLM says
   ``num_requests_waiting``, so ``waiting`` becomes ``queue`` and ``requests``
   becomes ``reqs`` (and the reverse);
3. the closest catalogue name of the same engine, old names included
   (:func:`difflib.get_close_matches` over the sorted names, similarity at
   least 0.9): a typo.
"""

from __future__ import annotations

import difflib
from functools import cache

from inference_obs.lint.resolve import ENGINE_PREFIXES
from inference_obs.metrics import FAMILIES
from inference_obs.metrics.family import MetricType

__all__ = ["likely_name"]

# One engine's word for another's, each way.
_WORDS: tuple[tuple[str, str], ...] = (
    ("_waiting_", "_queue_"),
    ("_queue_", "_waiting_"),
    ("_requests", "_reqs"),
    ("_reqs", "_requests"),
)
_CUTOFF = 0.9


@cache
def _names(prefix: str) -> dict[str, str]:
    """Series names of the catalogue under ``prefix``, old names included -> the current name.

    A histogram's parts are included, each mapped to the same part of the current name.
    """
    out: dict[str, str] = {}
    for family in FAMILIES:
        if not family.name.startswith(prefix):
            continue
        parts = ("", "_bucket", "_sum", "_count") if family.type is MetricType.HISTOGRAM else ("",)
        for spelling in (family.name, *(a.name for a in family.aliases)):
            for part in parts:
                out.setdefault(f"{spelling}{part}", f"{family.name}{part}")
    return dict(sorted(out.items()))


def likely_name(name: str) -> str | None:
    """The catalogue name ``name`` most likely means, or None when none is close.

    >>> likely_name("vllm:num_preemptions")
    'vllm:num_preemptions_total'
    >>> likely_name("sglang:num_waiting_reqs")
    'sglang:num_queue_reqs'
    >>> likely_name("vllm:my_own_gauge") is None
    True
    """
    prefix = next((p for p in ENGINE_PREFIXES if name.startswith(p)), None)
    if prefix is None:
        return None
    known = _names(prefix)
    candidates = [f"{name}_total", name.removesuffix("_total")]
    for old, new in _WORDS:
        if old in name:
            swapped = name.replace(old, new)
            candidates += [swapped, f"{swapped}_total"]
            for other_old, other_new in _WORDS:
                candidates.append(swapped.replace(other_old, other_new))
    for candidate in candidates:
        if candidate != name and candidate in known:
            return known[candidate]
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=_CUTOFF)
    return known[close[0]] if close else None
