"""The metric family: one exposed metric with its type, unit, labels and history.

A :class:`Family` knows how to select its series (``_bucket``/``_sum``/``_count``
for histograms) and which other names it has carried across exporter versions,
so a query can be resolved against the names a server actually has.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Literal

from inference_obs.errors import ConfigurationError, NoDataError, QueryError
from inference_obs.query import Matcher, Selector

__all__ = ["Alias", "Family", "MetricType", "resolve_label"]

Part = Literal["bucket", "sum", "count"]


class MetricType(StrEnum):
    """The semantic type of a family (not always what the exporter declares)."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Alias:
    """Another exposed name of the same quantity.

    Attributes
    ----------
    name
        The other exposed name (base name for histograms).
    versions
        The exporter versions that expose it, in words (``"vLLM <= 0.11"``).
    note
        What differs, if anything (units, semantics, labels).
    hidden_in
        First version that no longer exports the name by default (vLLM hides a
        deprecated name one release before removing it; a flag shows it again).
    removed_in
        First version without the name. An alias with neither is another
        spelling still in use (a newer field name, a compatibility CSV).
    """

    name: str
    versions: str
    note: str = ""
    hidden_in: str | None = None
    removed_in: str | None = None


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family of an exporter.

    Attributes
    ----------
    name
        Exposed name in the newest version: counters with their ``_total``
        suffix, histograms without ``_bucket``/``_sum``/``_count``.
    type
        Semantic type. ``declared_type`` records a different exporter declaration.
    unit
        Unit of a sample (for histograms: of an observation), e.g. ``"seconds"``,
        ``"tokens"``, ``"ratio"`` (0-1), ``"percent"`` (0-100), ``"MiB"``.
    help
        What one sample means, in plain words.
    exporter
        ``"vllm"``, ``"sglang"`` or ``"dcgm"``.
    labels
        Labels the exporter itself sets (scrape labels such as ``instance`` excluded).
    value_range
        Inclusive bounds a valid sample lies in, where the definition fixes them.
    buckets
        Default finite bucket upper bounds of a histogram (``+Inf`` implied).
        Deployments may override them: read ``le`` from data, never assume these.
    aliases
        Names this quantity had in other versions.
    since
        First version exposing this name, in words.
    condition
        When the family exists only under a flag or configuration.
    traps
        Ways the family is commonly misread.
    already_rate
        True for gauges that are already per-second rates (never ``rate()`` them).
    declared_type
        The type the exporter declares, when it differs from ``type``.
    """

    name: str
    type: MetricType
    unit: str
    help: str
    exporter: str
    labels: tuple[str, ...] = ()
    value_range: tuple[float, float] | None = None
    buckets: tuple[float, ...] | None = None
    aliases: tuple[Alias, ...] = ()
    since: str | None = None
    condition: str | None = None
    traps: tuple[str, ...] = ()
    already_rate: bool = False
    declared_type: str | None = None

    def __post_init__(self) -> None:
        if (self.buckets is not None) != (self.type is MetricType.HISTOGRAM):
            raise ConfigurationError(
                f"family {self.name}: only histograms have buckets; give buckets exactly when "
                f"the type is histogram (it is {self.type.value})"
            )
        # prometheus_client (vLLM, SGLang) always exposes counters with _total;
        # dcgm-exporter uses the DCGM field name as is.
        if (
            self.type is MetricType.COUNTER
            and self.exporter in ("vllm", "sglang")
            and not self.name.endswith("_total")
        ):
            raise ConfigurationError(
                f"family {self.name}: {self.exporter} exposes counters with a _total suffix; "
                f"name it {self.name}_total"
            )
        if self.buckets is not None and list(self.buckets) != sorted(set(self.buckets)):
            raise ConfigurationError(
                f"family {self.name}: buckets {self.buckets} must be strictly increasing"
            )

    @property
    def names(self) -> tuple[str, ...]:
        """This family's exposed name first, then every alias."""
        return (self.name, *(a.name for a in self.aliases))

    def series_name(self, part: Part | None = None) -> str:
        """The exposed series name, with the histogram ``part`` suffix where needed."""
        if self.type is MetricType.HISTOGRAM:
            if part is None:
                raise QueryError(
                    f"family {self.name} is a histogram: select part 'bucket', 'sum' or 'count'"
                )
            return f"{self.name}_{part}"
        if part is not None:
            raise QueryError(f"family {self.name} is a {self.type.value}, it has no {part!r} part")
        return self.name

    def select(self, matchers: Iterable[Matcher] = (), part: Part | None = None) -> Selector:
        """A selector of this family's series (or of one histogram part)."""
        return Selector(self.series_name(part), tuple(matchers))

    def resolve(self, available: Collection[str]) -> Family:
        """This family under the first of its names that ``available`` holds.

        ``available`` is the set of series names a server or dataset has (for
        histograms, either base names or ``_bucket`` names may be given).

        Raises
        ------
        NoDataError
            When none of the names is available; the message lists them.
        """
        for name in self.names:
            probe = f"{name}_bucket" if self.type is MetricType.HISTOGRAM else name
            if name in available or probe in available:
                return self if name == self.name else replace(self, name=name, aliases=())
        raise NoDataError(
            f"no series for {self.name}: tried {', '.join(self.names)}"
            + (f" (present only when {self.condition})" if self.condition else "")
        )


def resolve_label(candidates: tuple[str, ...], available: Collection[str]) -> str:
    """The first label name of ``candidates`` that ``available`` holds.

    Exporters rename labels across versions and deployments (dcgm-exporter's
    ``Hostname``/``hostname``; ``pod``, ``exported_pod``, ``pod_name``).

    Raises
    ------
    NoDataError
        When none is present; the message lists what was tried.
    """
    for label in candidates:
        if label in available:
            return label
    raise NoDataError(f"none of the labels {', '.join(candidates)} is present")
