"""A :class:`~inference_obs.source.base.Source` over an observation dataset, offline.

:class:`DatasetSource` answers every query of the Source protocol from a
dataset's raw samples with the local engine
(:class:`~inference_obs.engine.evaluate.Evaluator`), following the rule set it
was built with, so the same analysis code runs on a live server and on a
published dataset. One evaluator serves every query, so selections and their
time indexes are built once per selector, and a part several queries share
is evaluated once at each time (a range query is evaluated node by node over
all its steps).

Time conventions, as a Prometheus 2 server has them:

- ``instant(expr, at)`` evaluates at ``at`` rounded to the millisecond;
- ``range(expr, window, step)`` evaluates at ``start, start + step, ...``
  up to and including ``end`` (all in whole milliseconds);
- ``raw``, ``series``, ``label_names`` and ``label_values`` see the samples
  with ``start <= t <= end``: both ends included, like a Prometheus 2 range
  selector, whatever the rule set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.rules import Rules
from inference_obs.engine.windows import Windows
from inference_obs.errors import Annotation, ConfigurationError, QueryError
from inference_obs.metrics import MetricType, family
from inference_obs.query import Expr, Selector, to_promql
from inference_obs.samples import (
    NAME,
    Floats,
    Instant,
    Ints,
    Labels,
    Matrix,
    SampleSet,
    Vector,
    Window,
)
from inference_obs.source.base import EngineInfo, Metadata
from inference_obs.source.dataset.reader import Dataset, read_dataset

__all__ = ["DatasetSource"]


class DatasetSource:
    """The Source protocol answered from a dataset's samples by the local engine.

    Parameters
    ----------
    dataset
        A :class:`~inference_obs.source.dataset.reader.Dataset`, or the path of a
        dataset directory (read and checked with
        :func:`~inference_obs.source.dataset.reader.read_dataset`).
    rules
        The engine's rule set the answers follow (Prometheus 2.42 by default).
    deadline
        A :func:`time.monotonic` time by which a dataset given as a path must
        be read (a caller's time budget); ``None`` for no limit.

    Raises
    ------
    DatasetError
        If ``dataset`` is a path that does not hold a valid dataset.
    ConfigurationError
        If ``rules`` is not a :class:`~inference_obs.engine.rules.Rules` member.
    TimeBudgetExceeded
        If ``deadline`` passed while the dataset was read.

    Notes
    -----
    Used like any other source::

        source = DatasetSource(Path("datasets/r1-decode"))
        window = source.dataset.manifest.window.window()
        source.instant(Selector("vllm:num_requests_running"), window.end_s)
    """

    def __init__(
        self,
        dataset: Dataset | str | Path,
        *,
        rules: Rules = Rules.PROMETHEUS_2,
        deadline: float | None = None,
    ) -> None:
        if not isinstance(dataset, Dataset):
            dataset = read_dataset(Path(dataset), deadline=deadline)
        if not isinstance(rules, Rules):
            choices = ", ".join(f"Rules.{r.name}" for r in Rules)
            raise ConfigurationError(f"rules must be one of {choices}, not {rules!r}")
        self.dataset = dataset
        self.rules = rules
        self._evaluator = Evaluator(dataset.samples, rules=rules)
        self._spans = _Spans.of(dataset.samples)

    def __repr__(self) -> str:
        return f"DatasetSource({str(self.dataset.path)!r}, rules={self.rules.value!r})"

    @property
    def samples(self) -> SampleSet:
        """Every raw sample of the dataset."""
        return self.dataset.samples

    def info(self) -> EngineInfo:
        """``kind="dataset"``, no version, and the rule set the answers follow."""
        return EngineInfo(kind="dataset", version=None, rules=self.rules)

    def instant(self, expr: Expr, at: float) -> Instant:
        """Evaluate ``expr`` as an instant query at ``at``.

        Parameters
        ----------
        expr
            The expression.
        at
            Evaluation time, unix seconds (kept to the millisecond).

        Returns
        -------
        Instant
            A vector (empty when no series matched: no data, never zero) or a
            float, with the PromQL of ``expr`` and the engine's annotations.

        Raises
        ------
        ConfigurationError
            If ``at`` is not a finite number.
        NotSupportedOffline
            If the engine has no rule for a node of ``expr`` under these rules.
        """
        seconds = _finite(at, "evaluation time")
        value = self._evaluator.evaluate(expr, seconds)
        annotations = value.annotations if isinstance(value, Vector) else ()
        return Instant(value, seconds, to_promql(expr), annotations)

    def range(self, expr: Expr, window: Window, step: float) -> Matrix:
        """Evaluate ``expr`` at every ``step`` across ``window``, as a range query does.

        Parameters
        ----------
        expr
            The expression.
        window
            Evaluation times run from ``window.start`` to ``window.end``.
        step
            Seconds between evaluation times (whole milliseconds, > 0).

        Returns
        -------
        Matrix
            One series per label set met at any step, sorted by labels, with
            the steps where it had a value (unix ms). A scalar expression gives
            one series with no labels. Annotations of all steps, each once.

        Raises
        ------
        ConfigurationError
            If ``step`` is not a positive number of milliseconds.
        QueryError
            If ``expr`` gives two values for one label set at a step.
        NotSupportedOffline
            If the engine has no rule for a node of ``expr`` under these rules.
        """
        step_ms = round(_finite(step, "range query step") * 1000)
        if step_ms <= 0:
            raise ConfigurationError(
                f"range query step {step!r} s is below 1 ms; give a positive number of seconds"
            )
        start_ms, end_ms = _ms(window.start_s), _ms(window.end_s)
        times = np.arange(start_ms, end_ms + 1, step_ms, dtype=np.int64)
        index: dict[Labels, int] = {}
        # Steps mostly hand on the same label tuple: its owners are found once.
        known: dict[int, tuple[tuple[Labels, ...], Ints]] = {}
        owners: list[Ints] = []
        stamps: list[Ints] = []
        values: list[Floats] = []
        annotations: dict[Annotation, None] = {}
        answers = self._evaluator.evaluate_range(expr, start_ms, end_ms, step_ms)
        for t, value in zip(times.tolist(), answers, strict=True):
            if isinstance(value, Vector):
                labels, points = value.labels, value.values
                annotations.update(dict.fromkeys(value.annotations))
            else:
                labels, points = (Labels(),), np.array([value], dtype=np.float64)
            seen = known.get(id(labels))
            if seen is not None and seen[0] is labels:
                owner = seen[1]
            else:
                owner = np.fromiter(
                    (index.setdefault(one, len(index)) for one in labels), np.int64, len(labels)
                )
                if np.unique(owner).size != owner.size:
                    raise QueryError(
                        f"{to_promql(expr)} gives two values for one label set at {t / 1000} s; "
                        "a range query needs distinct label sets at every step"
                    )
                known[id(labels)] = (labels, owner)  # held: the id stays this tuple's
            owners.append(owner)
            stamps.append(np.full(owner.size, t, dtype=np.int64))
            values.append(np.asarray(points, dtype=np.float64))
        return _matrix(index, owners, stamps, values, to_promql(expr), tuple(annotations))

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        """Every sample of the selected series with ``start <= t <= end``.

        Both ends are included, like a Prometheus 2 range selector, under any
        rule set. Series without a sample in the window are left out; the
        others keep the dataset's order.

        Parameters
        ----------
        selector
            Metric name and matchers; no ``offset`` or ``@``.
        window
            The time window.

        Returns
        -------
        SampleSet
            The selected series' samples (timestamps unix ms).

        Raises
        ------
        QueryError
            If ``selector`` has an offset or an ``@`` modifier.
        """
        if selector.offset is not None or selector.at is not None:
            raise QueryError(
                f"raw({to_promql(selector)}): a raw fetch takes a window, not offset or @"
            )
        # The evaluator's own selection (matchers, staleness markers dropped),
        # shared with the range functions that select the same series.
        subset, index = self._evaluator._subset(selector, ranged=True)
        return _slice(subset, index.window(_ms(window.start_s), _ms(window.end_s), left_open=False))

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        """Label sets (``__name__`` included) of the selected series with samples in ``window``.

        Sorted by labels, as Prometheus sorts them.
        """
        found = self.raw(selector, window)
        return tuple(
            sorted(
                (
                    Labels({NAME: name, **labels})
                    for name, labels in zip(found.names, found.labels, strict=True)
                ),
                key=lambda one: tuple(one.items()),
            )
        )

    def label_names(self, window: Window) -> tuple[str, ...]:
        """Label names (``__name__`` included) of series with samples in ``window``, sorted."""
        names: set[str] = set()
        present = self._present(window)
        for i in present.tolist():
            names.update(self.samples.labels[i])
        if present.size:
            names.add(NAME)
        return tuple(sorted(names))

    def label_values(self, label: str, window: Window) -> tuple[str, ...]:
        """Values of ``label`` on series with samples in ``window``, sorted.

        ``__name__`` lists metric names. A label no series carries gives ``()``.
        """
        samples = self.samples
        if label == NAME:
            found = {samples.names[i] for i in self._present(window).tolist()}
        else:
            found = {
                samples.labels[i][label]
                for i in self._present(window).tolist()
                if label in samples.labels[i]
            }
        return tuple(sorted(found))

    def metadata(self, metric: str | None = None) -> tuple[Metadata, ...]:
        """Type, help and unit, from the catalogue, of the metrics the dataset holds.

        Parameters
        ----------
        metric
            One metric (a histogram by its base name, without ``_bucket``,
            ``_sum`` or ``_count``), or ``None`` for every metric.

        Returns
        -------
        tuple of Metadata
            Sorted by metric name. Metrics the catalogue does not know, and
            ``metric`` when the dataset does not hold it, give no entry. The
            type is what the exporter declares where it differs from the
            family's semantic type.
        """
        found: dict[str, Metadata] = {}
        for name in sorted(set(self.samples.names)):
            try:
                known = family(name)
            except ConfigurationError:  # a metric the catalogue does not know
                continue
            # The family's name as exposed here (a histogram's without its part suffix).
            parts = ("_bucket", "_sum", "_count") if known.type is MetricType.HISTOGRAM else ()
            base = next((n for n in known.names if name in (n, *(n + p for p in parts))), None)
            if base is None:  # found only by a suffix that is not a part of its type
                continue
            found[base] = Metadata(
                metric=base,
                type=known.declared_type or known.type.value,
                help=known.help,
                unit=known.unit,
            )
        if metric is not None:
            return (found[metric],) if metric in found else ()
        return tuple(found[name] for name in sorted(found))

    def _present(self, window: Window) -> npt.NDArray[np.intp]:
        """Indices of the series with a sample in ``[start, end]`` (both included), ascending."""
        return self._spans.present(_ms(window.start_s), _ms(window.end_s))


@dataclass(frozen=True, slots=True)
class _Spans:
    """Each series' first and last sample time, for listing the series present in a window.

    Known from the sample set's offsets alone (a series' samples strictly
    increase in time), so a window is answered series by series, not sample
    by sample: a series whose span lies inside the window is present, one
    whose span misses it is not, and only one that straddles an edge (a few,
    or none when the window is the dataset's) is searched for a sample
    inside. Counting every sample of a 1,024-GPU fleet in the window took
    about a second at each call.
    """

    offsets: Ints
    t_ms: Ints
    filled: npt.NDArray[np.intp]  # the series with samples
    first: Ints  # their first and last sample times, ms
    last: Ints

    @classmethod
    def of(cls, samples: SampleSet) -> _Spans:
        offsets, t_ms = samples.offsets, samples.t_ms
        filled = np.flatnonzero(offsets[1:] > offsets[:-1])
        first = t_ms[offsets[:-1][filled]]
        last = t_ms[offsets[1:][filled] - 1]
        return cls(offsets, t_ms, filled, first, last)

    def present(self, start_ms: int, end_ms: int) -> npt.NDArray[np.intp]:
        """Indices of the series with a sample at ``start_ms <= t <= end_ms``, ascending."""
        inside = (self.first >= start_ms) & (self.last <= end_ms)
        edge = np.flatnonzero(~inside & (self.last >= start_ms) & (self.first <= end_ms))
        if edge.size:
            series = self.filled[edge]
            # The first sample at or after start in each straddling series (all at once, by
            # halving), then whether it is still within the window.
            lo, hi = self.offsets[series].copy(), self.offsets[series + 1].copy()
            while np.any(open_ := lo < hi):
                mid = (lo + hi) // 2
                before = open_ & (self.t_ms[np.minimum(mid, self.t_ms.size - 1)] < start_ms)
                lo = np.where(before, mid + 1, lo)
                hi = np.where(open_ & ~before, mid, hi)
            found = lo < self.offsets[series + 1]
            found[found] = self.t_ms[lo[found]] <= end_ms
            inside[edge[found]] = True
        present: npt.NDArray[np.intp] = self.filled[inside]
        return present


def _finite(value: float, what: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{what} {value!r} is not a number of seconds") from None
    if not math.isfinite(seconds):
        raise ConfigurationError(f"{what} {value!r} is not a finite number of seconds")
    return seconds


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _slice(samples: SampleSet, windows: Windows) -> SampleSet:
    """The samples ``lo[i]:hi[i]`` of every series that has any, without per-sample objects."""
    keep = np.flatnonzero(windows.counts > 0)
    lo, hi = windows.lo[keep], windows.hi[keep]
    sizes = hi - lo
    offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    positions = np.repeat(lo - offsets[:-1], sizes) + np.arange(int(offsets[-1]))
    t_ms, values = samples.t_ms[positions], samples.values[positions]
    for array in (offsets, t_ms, values):
        array.flags.writeable = False
    return SampleSet(
        tuple(samples.names[i] for i in keep.tolist()),
        tuple(samples.labels[i] for i in keep.tolist()),
        offsets,
        t_ms.astype(np.int64, copy=False),
        values.astype(np.float64, copy=False),
    )


def _matrix(
    index: dict[Labels, int],
    owners: list[Ints],
    stamps: list[Ints],
    values: list[Floats],
    promql: str,
    annotations: tuple[Annotation, ...],
) -> Matrix:
    """Columnar arrays of the per-step points, series sorted by labels."""
    labels = list(index)
    order = sorted(range(len(labels)), key=lambda i: tuple(labels[i].items()))
    rank = np.empty(len(labels), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(labels), dtype=np.int64)
    owner = rank[np.concatenate(owners)] if owners else np.zeros(0, np.int64)
    t_ms = np.concatenate(stamps) if stamps else np.zeros(0, np.int64)
    v = np.concatenate(values) if values else np.zeros(0, np.float64)
    # Stable: within a series the points stay in step (time) order.
    by_series = np.argsort(owner, kind="stable")
    offsets = np.concatenate(([0], np.cumsum(np.bincount(owner, minlength=len(labels)))))
    columns = (offsets.astype(np.int64), t_ms[by_series], v[by_series].astype(np.float64))
    for array in columns:
        array.flags.writeable = False
    return Matrix(tuple(labels[i] for i in order), *columns, promql=promql, annotations=annotations)
