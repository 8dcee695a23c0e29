"""Reading: what one analysis reads (source, deployment, window) and the factory of its numbers.

An analysis receives one :class:`Reading` and makes every
:class:`~inference_obs.reading.measurement.Measurement` through it:
:meth:`Reading.measure` (one value of a query), :meth:`Reading.measure_by`
(one value per group of a query), :meth:`Reading.local` (a value computed
here from raw samples) and :meth:`Reading.made` (a value computed here from
answers already read). A value without data is ``no_data`` naming the
families that have no series, found by walking the query
(:func:`~inference_obs.query.walk.selectors`), never passed by hand; an
answer the server marked partial gives a ``partial`` Measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from threading import Lock
from typing import TypeVar

from inference_obs.deployment import Deployment
from inference_obs.errors import Annotation, QueryError
from inference_obs.metrics import family as catalogue_family
from inference_obs.metrics.family import Family, MetricType
from inference_obs.query import (
    Aggregate,
    Call,
    Expr,
    Matcher,
    Range,
    Selector,
    Subquery,
    to_promql,
)
from inference_obs.query.walk import selectors
from inference_obs.reading.discovery import view
from inference_obs.reading.joined import instants
from inference_obs.reading.measurement import (
    OUT_OF_RANGE,
    Bounds,
    Measurement,
    Provenance,
    Status,
    no_data_note,
)
from inference_obs.reading.schedule import Pending, soon, together
from inference_obs.samples import Instant, Labels, Matrix, SampleSet, Vector, Window
from inference_obs.source.base import EngineInfo, Source
from inference_obs.source.remembering import unremembered
from inference_obs.source.view import ViewSource

__all__ = ["Ahead", "Reading", "Source", "missing_families", "missing_families_by"]

T = TypeVar("T")

#: The annotation kind a source gives an answer the server marked partial.
PARTIAL_RESPONSE = "partial_response"


class Ahead:
    """Instant questions at the window's end asked before the analyses that need them start.

    A run asks every analysis's first round (``Analysis.questions``) in one
    batch, and :meth:`Reading.ask` takes its answers from it.

    Parameters
    ----------
    exprs
        The questions, in the order ``asking`` answers them.
    asking
        The batch, started (or to run where first needed).
    """

    def __init__(self, exprs: Sequence[Expr], asking: Pending[list[Instant]]) -> None:
        self._index = {expr: i for i, expr in enumerate(exprs)}
        self._asking = asking

    def answers(self, exprs: Sequence[Expr]) -> list[Instant] | None:
        """The answers to ``exprs`` when the batch holds every one of them, else None."""
        if not exprs or any(expr not in self._index for expr in exprs):
            return None
        got = self._asking.result()
        return [got[self._index[expr]] for expr in exprs]


@dataclass(frozen=True)
class Reading:
    """One analysis's view of one deployment over one window.

    Attributes
    ----------
    source
        Where the series come from (read-only).
    deployment
        Whose series: its matchers select the app series, its GPU matchers the DCGM ones.
    window
        The window every number covers.
    analysis
        The analysis's name: the middle part of every Measurement key.
    step
        Tile width, seconds, the per-scrape questions read at; ``None``: every scrape
        (see :mod:`~inference_obs.reading.resolution`).
    ahead
        Answers a run asked ahead for this deployment and window (:class:`Ahead`), if any.
    """

    source: Source
    deployment: Deployment
    window: Window
    analysis: str
    step: float | None = None
    ahead: Ahead | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Every question is read as this deployment's data holds its series (older family
        # names, the exporter's pod labels, shared GPUs): see reading.discovery. A view of
        # the same deployment and window is kept, so the analyses of one run share it.
        source = self.source
        if not (
            isinstance(source, ViewSource)
            and source.deployment_name == self.deployment.name
            and source.window == self.window
        ):
            object.__setattr__(self, "source", view(source, self.deployment, self.window))

    def of(self, analysis: str) -> Reading:
        """The same reading, for another analysis's numbers."""
        return replace(self, analysis=analysis)

    @property
    def matchers(self) -> tuple[Matcher, ...]:
        """The matchers of the deployment's app (vLLM) series."""
        return tuple(self.deployment.matchers)

    @property
    def seconds(self) -> float:
        """The window's length, seconds."""
        return self.window.seconds

    def instant(self, expr: Expr) -> Instant:
        """``expr`` at the window's end."""
        return self.source.instant(expr, self.window.end_s)

    def ask(self, exprs: Sequence[Expr]) -> list[Instant]:
        """Each of ``exprs`` at the window's end, in as few requests as the source allows
        (:func:`~inference_obs.reading.joined.instants`); from the answers the run asked
        ahead (:class:`Ahead`) where they hold every one."""
        if self.ahead is not None and (found := self.ahead.answers(exprs)) is not None:
            return found
        return instants(self.source, exprs, self.window.end_s)

    def ask_each(self, groups: Sequence[Sequence[Expr]]) -> list[list[Instant]]:
        """:meth:`ask` for several groups of questions at once, the answers given per group."""
        answers = iter(self.ask([expr for group in groups for expr in group]))
        return [[next(answers) for _ in group] for group in groups]

    def range(self, expr: Expr, step: float, *, remember: bool = True) -> Matrix:
        """``expr`` across the window every ``step`` seconds; ``remember`` False for a
        question only this caller asks: the run does not keep its answer (a figure's range
        of every GPU would be held to the report's end for nobody; see
        :func:`~inference_obs.source.remembering.unremembered`)."""
        with unremembered(not remember):
            return self.source.range(expr, self.window, step)

    def raw(self, selector: Selector, window: Window | None = None) -> SampleSet:
        """Raw samples of ``selector`` in the window (or in ``window``)."""
        return self.source.raw(selector, window or self.window)

    def series(self, selector: Selector, *, remember: bool = True) -> tuple[Labels, ...]:
        """Label sets of the series ``selector`` selects in the window; ``remember`` False
        for a question only this caller asks, as for :meth:`range`."""
        with unremembered(not remember):
            return self.source.series(selector, self.window)

    def info(self) -> EngineInfo:
        """The engine answering: its kind and the range rules its numbers follow."""
        return self.source.info()

    def as_read(self, promql: str) -> str:
        """The PromQL a query rendered as ``promql`` was read with: the data's own family
        names and labels where they differ from the catalogue's (see
        :mod:`~inference_obs.reading.discovery`)."""
        if isinstance(self.source, ViewSource):  # always, past __post_init__; typed for mypy
            return self.source.promql(promql)
        return promql

    @staticmethod
    def soon(call: Callable[[], T]) -> Pending[T]:
        """``call`` started now in the run's threads, where it has some
        (:func:`~inference_obs.reading.schedule.soon`); its result when asked."""
        return soon(call)

    @staticmethod
    def together(calls: Sequence[Callable[[], T]]) -> list[T]:
        """The results of ``calls``, in order, run at once where the run allows
        (:func:`~inference_obs.reading.schedule.together`)."""
        return together(calls)

    def measure(
        self,
        statistic: str,
        expr: Expr,
        unit: str,
        *,
        caveats: Sequence[str] = (),
        bounds: Bounds | None = None,
        answer: Instant | None = None,
    ) -> Measurement:
        """The single value ``expr`` gives at the window's end.

        No series, or a NaN (no observation in the window), gives ``no_data``
        naming the families of ``expr`` that have no series. ``answer`` is
        ``expr``'s answer when it was asked already (with other questions).

        Raises
        ------
        QueryError
            When ``expr`` gives several series: the analysis asked the wrong question.
        """
        if answer is None:
            answer = self.instant(expr)
        value: float | None
        if isinstance(answer.value, Vector):
            if len(answer.value) > 1:
                raise QueryError(
                    f"{to_promql(expr)} returned {len(answer.value)} series, expected 1"
                )
            value = float(answer.value.values[0]) if len(answer.value) else None
        else:
            value = float(answer.value)
        missing = partial(missing_families, self.source, expr, self.window)
        return self._answered(statistic, value, unit, expr, answer, missing, caveats, bounds)

    def measure_by(
        self,
        statistics: Mapping[Labels, str],
        expr: Expr,
        by: Sequence[str],
        unit: str,
        *,
        caveats: Sequence[str] = (),
        answer: Instant | None = None,
    ) -> dict[Labels, Measurement]:
        """The value of each group of ``expr`` (aggregated ``by`` labels), from one answer.

        ``statistics`` maps each wanted group (its ``by`` labels) to its
        statistic's name; a group the answer lacks, or whose value is NaN, is
        ``no_data``, naming the families of ``expr`` without series in that group.
        """
        if answer is None:
            answer = self.instant(expr)
        found = answer.value.as_dict() if isinstance(answer.value, Vector) else {}
        missing_in = missing_families_by(self.source, expr, self.window, by)
        return {
            group: self._answered(
                statistic,
                found.get(group),
                unit,
                expr,
                answer,
                partial(missing_in, group),
                caveats,
                None,
            )
            for group, statistic in statistics.items()
        }

    def local(
        self,
        statistic: str,
        value: float | None,
        unit: str,
        *,
        reads: Sequence[Expr],
        computation: str,
        caveats: Sequence[str] = (),
        missing: Sequence[Family | str] = (),
    ) -> Measurement:
        """A value computed here from the raw samples of ``reads`` (selectors or ranges).

        ``value`` None or not finite gives ``no_data``; ``missing`` names the
        families without series, in its annotation.
        """
        names = [m if isinstance(m, str) else m.name for m in missing]
        ok = value is not None and math.isfinite(value)
        return self.made(
            statistic,
            value if ok else None,
            unit,
            Status.OK if ok else Status.NO_DATA,
            promql=tuple(to_promql(e) for e in reads),
            computation=computation,
            annotations=() if ok else (no_data_note(self.deployment.name, names),),
            caveats=caveats,
        )

    def made(
        self,
        statistic: str,
        value: float | None,
        unit: str,
        status: Status,
        *,
        promql: Sequence[str],
        computation: str | None = None,
        bounds: Bounds | None = None,
        annotations: Sequence[Annotation] = (),
        caveats: Sequence[str] = (),
    ) -> Measurement:
        """The Measurement ``statistic`` of this reading: every other method ends here.

        A value is kept only where the status is ``ok`` or ``partial``; an
        ``ok`` whose answer the server marked partial becomes ``partial``.
        """
        if status is Status.OK and any(a.kind == PARTIAL_RESPONSE for a in annotations):
            status = Status.PARTIAL
        readable = status in (Status.OK, Status.PARTIAL)
        info = self.source.info()
        if isinstance(self.source, ViewSource):  # always, past __post_init__; typed for mypy
            promql = tuple(self.source.promql(text) for text in promql)
            annotations = tuple(dict.fromkeys((*annotations, *self.source.notes(promql))))
        return Measurement(
            key=f"{self.deployment.name}/{self.analysis}/{statistic}",
            deployment=self.deployment.name,
            analysis=self.analysis,
            statistic=statistic,
            value=value if readable else None,
            unit=unit,
            window_start=self.window.start,
            window_end=self.window.end,
            status=status,
            bounds=bounds if readable else None,
            provenance=Provenance(
                promql=tuple(promql),
                engine=info.kind,
                rules=info.rules.value,
                computation=computation,
            ),
            annotations=tuple(annotations),
            caveats=tuple(caveats),
        )

    def _answered(
        self,
        statistic: str,
        value: float | None,
        unit: str,
        expr: Expr,
        answer: Instant,
        missing: Callable[[], list[str]],
        caveats: Sequence[str],
        bounds: Bounds | None,
    ) -> Measurement:
        notes = list(answer.annotations)
        status = Status.OK
        if value is None or math.isnan(value):
            status, value = Status.NO_DATA, None
            notes.append(no_data_note(self.deployment.name, missing()))
        else:
            outside = _out_of_range(expr, value)
            if outside is not None:
                status = Status.INVALID
                notes.append(outside)
        return self.made(
            statistic,
            value,
            unit,
            status,
            promql=(to_promql(expr),),
            bounds=bounds,
            annotations=notes,
            caveats=caveats,
        )


# Functions and aggregations whose answer lies within the range of the values they read: a
# value of theirs outside a family's range is a sample outside it.
_KEEPS_RANGE_CALLS = frozenset(
    {"max_over_time", "min_over_time", "avg_over_time", "last_over_time", "quantile_over_time"}
)
_KEEPS_RANGE_AGGREGATIONS = frozenset({"max", "min", "avg", "quantile", "topk", "bottomk"})


def _ranged_family(expr: Expr) -> Family | None:
    """The one catalogue family with a value range ``expr`` reads, where every step of
    ``expr`` keeps its values within the range of what it reads (a max, a mean, the last)."""
    node = expr
    while True:
        if isinstance(node, Selector):
            try:
                found = catalogue_family(node.metric or "")
            except QueryError:
                return None
            return found if found.value_range is not None else None
        if isinstance(node, Range):
            node = node.selector
        elif isinstance(node, Subquery):
            node = node.expr
        elif isinstance(node, Call) and node.name in _KEEPS_RANGE_CALLS and node.args:
            node = node.args[-1]
        elif isinstance(node, Aggregate) and node.op in _KEEPS_RANGE_AGGREGATIONS:
            node = node.expr
        else:
            return None


def _out_of_range(expr: Expr, value: float) -> Annotation | None:
    """An ``out_of_range`` note when ``value`` lies outside the range of the family ``expr``
    reads (see :func:`_ranged_family`); None when it lies within or no range applies."""
    family = _ranged_family(expr)
    if family is None or family.value_range is None:
        return None
    low, high = family.value_range
    if low <= value <= high:
        return None
    return Annotation(
        OUT_OF_RANGE,
        f"{value:g} is outside {family.name}'s range {low:g} to {high:g}: the exporter "
        "reported an impossible value, so it is kept out of every reading",
    )


def _group(labels: Labels, by: tuple[str, ...]) -> Labels:
    return Labels((k, v) for k, v in labels.items() if k in by)


def _probes(expr: Expr) -> dict[str, Selector]:
    """Per family read by ``expr`` (as named there, in the order written), the series that
    show it exists: a histogram's ``_count`` (its buckets may be dropped by relabelling
    while the family is there), with the selector's own matchers but not ``le``."""
    out: dict[str, Selector] = {}
    for sel in selectors(expr):
        if sel.metric is None:  # selected by labels alone: no family to name
            continue
        name = probe = sel.metric
        try:
            histogram = catalogue_family(name).type is MetricType.HISTOGRAM
        except QueryError:  # not in the catalogue: nothing to strip
            histogram = False
        if histogram:
            for part in ("_bucket", "_sum", "_count"):
                name = name.removesuffix(part)
            probe = f"{name}_count"
        if name not in out:
            out[name] = Selector(probe, tuple(m for m in sel.matchers if m.label != "le"))
    return out


def missing_families(
    source: Source, expr: Expr, window: Window, group: Labels | None = None
) -> list[str]:
    """The families ``expr`` reads that have no series in ``window`` (with ``group``'s labels,
    when given), in the order written."""
    within = tuple(Matcher.equal(k, v) for k, v in (group or Labels(())).items())
    probes = _probes(expr)
    # Every family's series at once: one round trip, not one per family.
    found = together(
        [
            partial(source.series, Selector(probe.metric, (*probe.matchers, *within)), window)
            for probe in probes.values()
        ]
    )
    return [name for name, series in zip(probes, found, strict=True) if not series]


def missing_families_by(
    source: Source, expr: Expr, window: Window, by: Sequence[str]
) -> Callable[[Labels], list[str]]:
    """Per group of the ``by`` labels, the families ``expr`` reads that have no series of
    that group in ``window`` (in the order written).

    Asked on the first call, for every group at once: one series request per
    family, however many groups (replicas) are asked about afterwards.
    """
    keys = tuple(by)
    present: dict[str, set[Labels]] = {}
    lock = Lock()

    def missing_in(group: Labels) -> list[str]:
        with lock:  # groups may be worked out in parallel: still asked once
            if not present:
                probes = _probes(expr)
                # Every family's series at once: one round trip, not one per family.
                found = together([partial(source.series, p, window) for p in probes.values()])
                for name, series in zip(probes, found, strict=True):
                    present[name] = {_group(one, keys) for one in series}
        return [name for name, groups in present.items() if group not in groups]

    return missing_in
