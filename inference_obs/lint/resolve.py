"""What the catalogue knows of a selector: family, histogram part, old name, retired, router.

Every name is looked up once per process (the index below), so linting a
large dashboard costs one dictionary lookup per selector. Names the catalogue
does not know are classified by Prometheus's naming conventions only where
those are reliable: a lower-case ``_total``, ``_sum``, ``_count`` or
``_bucket`` suffix is a counter, unless the name has the two colons of a
recording rule (``level:metric:operations``) or is a Cloud Monitoring system
metric (``kubernetes_io:node_accelerator_memory_total``, a gauge).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from inference_obs.metrics import FAMILIES
from inference_obs.metrics.family import Alias, Family, MetricType, Part
from inference_obs.metrics.retired import RETIRED, Retired
from inference_obs.metrics.vllm_router import ROUTER_FAMILIES, ROUTER_LABEL
from inference_obs.query import Selector

__all__ = ["ENGINE_PREFIXES", "Series", "resolve"]

ENGINE_PREFIXES: tuple[str, ...] = ("vllm:", "sglang:")
"""Name prefixes of the engines' own families."""

_PARTS: tuple[Part, ...] = ("bucket", "sum", "count")
_COUNTER_SUFFIX = re.compile(r"_(?:total|sum|count|bucket)$")
# Google Cloud Monitoring's system metrics as PromQL names (kubernetes.io/node/accelerator/
# memory_total is read as kubernetes_io:node_accelerator_memory_total): the domain before the
# colon says the name is not a Prometheus exporter's, so its suffix says nothing of its type.
_CLOUD_MONITORING = re.compile(r"^[a-z0-9_]+_(?:com|io|net|org):")


@dataclass(frozen=True, slots=True)
class Series:
    """A selector's name as the catalogue reads it.

    Attributes
    ----------
    name
        The selected name (``None`` for a selector by matchers only).
    family
        The catalogue family (an engine's, DCGM's, the host's or the router's).
    part
        ``bucket``, ``sum`` or ``count`` for a histogram series, else None.
    alias
        The old or other name the selector used, when it is not the family's name.
    retired
        The retired family, when the name is one.
    router
        Whether the name is read as the production-stack router's.
    recorded
        Whether a linted rule file records this name.
    """

    name: str | None
    family: Family | None = None
    part: Part | None = None
    alias: Alias | None = None
    retired: Retired | None = None
    router: bool = False
    recorded: bool = False

    @property
    def kind(self) -> MetricType | None:
        """The semantic type of the selected series (a histogram's parts are counters)."""
        if self.family is not None:
            if self.family.type is MetricType.HISTOGRAM and self.part is not None:
                return MetricType.COUNTER
            return self.family.type
        if self.retired is not None:
            if self.retired.type is MetricType.HISTOGRAM and self.part is not None:
                return MetricType.COUNTER
            return self.retired.type
        conventional = (
            self.name is not None
            and not self.recorded
            and self.name.count(":") < 2
            and not _CLOUD_MONITORING.match(self.name)
        )
        if conventional and _COUNTER_SUFFIX.search(self.name or ""):
            return MetricType.COUNTER
        return None

    @property
    def unit(self) -> str | None:
        """Unit of one sample: the family's, except ``_count`` and ``_bucket`` (observations)."""
        if self.part in ("count", "bucket"):
            return None
        if self.family is not None:
            return self.family.unit
        return self.retired.unit if self.retired is not None else None

    @property
    def base(self) -> str | None:
        """The name without a histogram part suffix."""
        if self.name is None or self.part is None:
            return self.name
        return self.name.removesuffix(f"_{self.part}")

    @property
    def engine_prefixed(self) -> bool:
        """Whether the name starts with an engine's prefix (``vllm:``, ``sglang:``)."""
        return self.name is not None and self.name.startswith(ENGINE_PREFIXES)


def resolve(selector: Selector, recorded: frozenset[str] = frozenset()) -> Series:
    """What the catalogue knows of ``selector``'s name."""
    name = selector.metric
    if name is None:
        return Series(None)
    router_label = any(m.label == ROUTER_LABEL for m in selector.matchers)
    return _resolve(name, router_label, name in recorded)


@cache
def _resolve(name: str, router_label: bool, recorded: bool) -> Series:
    if recorded:
        return Series(name, recorded=True)
    router = _ROUTER.get(name)
    engine = _ENGINE.get(name)
    # An engine name with a server matcher, or a name only the router has, is the router's.
    if router is not None and (router_label or (engine is None and name not in _RETIRED)):
        family, part = router
        return Series(name, family, part, router=True)
    if engine is not None:
        family, part, alias = engine
        return Series(name, family, part, alias)
    if name in _RETIRED:
        gone, part = _RETIRED[name]
        return Series(name, part=part, retired=gone)
    return Series(name)


def _index() -> dict[str, tuple[Family, Part | None, Alias | None]]:
    out: dict[str, tuple[Family, Part | None, Alias | None]] = {}
    for family in FAMILIES:
        spellings: list[tuple[str, Alias | None]] = [(family.name, None)]
        spellings += [(a.name, a) for a in family.aliases]
        for spelling, alias in spellings:
            if family.type is MetricType.HISTOGRAM:
                out.setdefault(spelling, (family, None, alias))
                for part in _PARTS:
                    out.setdefault(f"{spelling}_{part}", (family, part, alias))
            else:
                out.setdefault(spelling, (family, None, alias))
    return out


def _router_index() -> dict[str, tuple[Family, Part | None]]:
    out: dict[str, tuple[Family, Part | None]] = {}
    for family in ROUTER_FAMILIES:
        out[family.name] = (family, None)
        if family.type is MetricType.HISTOGRAM:
            for part in _PARTS:
                out[f"{family.name}_{part}"] = (family, part)
    return out


def _retired_index() -> dict[str, tuple[Retired, Part | None]]:
    out: dict[str, tuple[Retired, Part | None]] = {}
    for gone in RETIRED:
        out[gone.name] = (gone, None)
        if gone.type is MetricType.HISTOGRAM:
            for part in _PARTS:
                out[f"{gone.name}_{part}"] = (gone, part)
    return out


_ENGINE = _index()
_ROUTER = _router_index()
_RETIRED = _retired_index()
