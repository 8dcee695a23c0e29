"""The Source protocol: one interface over a live Prometheus-compatible API and datasets.

Every source takes typed expressions and returns typed results: an instant
query gives an :class:`~inference_obs.samples.Instant` (a vector or a
scalar), a range query a :class:`~inference_obs.samples.Matrix`, a raw fetch
a :class:`~inference_obs.samples.SampleSet`.
Each result carries the PromQL that produced it and the non-fatal conditions
met on the way (server warnings, partial responses, forced bucket
monotonicity) as :class:`~inference_obs.errors.Annotation` values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from inference_obs.engine.rules import Rules
from inference_obs.query import Expr, Selector
from inference_obs.samples import Instant, Labels, Matrix, SampleSet, Window

__all__ = ["LEFT_OPEN_MARGIN_S", "EngineInfo", "Instant", "Matrix", "Metadata", "Source"]

#: How far before a range's start to reach for the sample exactly at the start
#: on engines whose ranges leave their start out (Prometheus 3.x,
#: VictoriaMetrics: ``start < t``): one millisecond, the resolution of sample
#: timestamps, so that sample comes in and none before it.
LEFT_OPEN_MARGIN_S = 0.001
__all__ = ["EngineInfo", "Metadata", "Source"]

EngineKind = Literal["prometheus", "victoriametrics", "thanos", "mimir", "dataset"]


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What answers the queries, and which rules local maths must follow to agree.

    Attributes
    ----------
    kind
        ``prometheus``, ``victoriametrics``, ``thanos``, ``mimir`` or ``dataset``.
    version
        The server's reported version (``None`` when it does not say).
    rules
        The local engine's rule set that reproduces this engine's numbers.
    """

    kind: EngineKind
    version: str | None
    rules: Rules


@dataclass(frozen=True, slots=True)
class Metadata:
    """What a metric is, as its exporter declared it (``type``, ``help``, ``unit``)."""

    metric: str
    type: str
    help: str
    unit: str


@runtime_checkable
class Source(Protocol):
    """Where samples come from. Read-only: no method can change what it reads."""

    def info(self) -> EngineInfo:
        """The engine answering, and the local rule set that agrees with it."""

    def instant(self, expr: Expr, at: float) -> Instant:
        """Evaluate ``expr`` at ``at`` (unix seconds)."""

    def range(self, expr: Expr, window: Window, step: float) -> Matrix:
        """Evaluate ``expr`` at every ``step`` seconds across ``window`` (step-aligned)."""

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        """Every raw sample of the selected series within ``window`` (both ends included)."""

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        """Label sets (``__name__`` included) of series with samples in ``window``."""

    def label_names(self, window: Window) -> tuple[str, ...]:
        """Label names present in ``window``, sorted."""

    def label_values(self, label: str, window: Window) -> tuple[str, ...]:
        """Values of ``label`` present in ``window``, sorted (``__name__`` lists metrics)."""

    def metadata(self, metric: str | None = None) -> tuple[Metadata, ...]:
        """Declared type, help and unit of ``metric`` (or of every metric)."""
