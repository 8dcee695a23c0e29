"""A source read as one deployment's data holds its series: the names and labels found there.

Real fleets differ from what the analyses ask for in two ways this view
absorbs, found once per source, deployment and window (:class:`Found`, by
:func:`~inference_obs.reading.discovery.discover`):

- **renamed families**: an older exporter exposes a family under an older name
  (vLLM <= 0.10: ``vllm:time_per_output_token_seconds``); every expression is
  rewritten to read the name the data has
  (:func:`~inference_obs.metrics.renames.rename`);
- **another engine's families**: on an SGLang deployment each vLLM family with
  an SGLang equivalent of the same meaning and unit is read as that family
  (:func:`~inference_obs.metrics.sglang_reading.read_as_sglang`); the others
  keep their vLLM names and read "no data";
- **the DCGM label scheme**: under a default GPU Operator scrape the plain
  ``pod`` of a GPU series is the exporter's, the workload's is
  ``exported_pod``; expressions and answers are put in workload terms
  (:func:`~inference_obs.metrics.dcgm_labels.in_workload_terms`), and GPUs
  whose series repeat once per pod (time-slicing, MIG) are counted once.

What was rewritten is said: :meth:`ViewSource.promql` gives the PromQL a
number was really read with (to paste into Prometheus), and
:meth:`ViewSource.notes` the annotations that say which name and which scheme
were read, and what still differs where another engine's family stood in.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from inference_obs.errors import Annotation, QueryError
from inference_obs.metrics import FAMILIES, family as catalogue_family
from inference_obs.metrics.dcgm_labels import (
    GpuLabelScheme,
    in_workload_terms,
    raw,
    reads_only_gpus,
    without_copies,
    workload_labels,
)
from inference_obs.metrics.renames import HISTOGRAM_PARTS, rename, rename_text
from inference_obs.metrics.sglang import PER_RANK_COPIES
from inference_obs.metrics.sglang_reading import (
    UNIT_READINGS,
    StandIn,
    read_as_sglang,
    without_splits,
)
from inference_obs.query import Expr, Selector, parse, to_promql
from inference_obs.samples import Instant, Labels, Matrix, SampleSet, Series, Vector, Window
from inference_obs.source.base import EngineInfo, Metadata, Source
from inference_obs.source.remembering import remembered

__all__ = ["READ_AS_FOUND", "Found", "ViewSource"]

#: The annotation kinds a view adds: an older family name read, another engine's family
#: read for the one asked, the DCGM label scheme found, GPUs counted once though their
#: series repeat per pod.
READ_AS_FOUND: frozenset[str] = frozenset(
    {"renamed_family", "engine_equivalent", "gpu_label_scheme", "shared_gpus"}
)

_NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
_DCGM = frozenset(n for f in FAMILIES if f.exporter == "dcgm" for n in f.names)


@dataclass(frozen=True, slots=True)
class Found:
    """What one deployment's data holds, as far as reading it is concerned.

    Attributes
    ----------
    renames
        Catalogue (newest) family name -> the older name the data holds instead.
    scheme
        Whose pod the plain ``pod``/``namespace``/``container`` of the DCGM series name.
    shared
        GPUs whose series repeat once per pod (names), counted once each.
    stand_ins
        vLLM family name -> the SGLang family read in its place (an SGLang
        deployment; empty otherwise).
    """

    renames: Mapping[str, str] = field(default_factory=dict)
    scheme: GpuLabelScheme = GpuLabelScheme.WORKLOAD
    shared: tuple[str, ...] = ()
    stand_ins: Mapping[str, StandIn] = field(default_factory=dict)

    def rewrite(self, expr: Expr) -> Expr:
        """``expr`` as it must be asked of this data."""
        # Stand-ins first: an older vLLM name elsewhere in the fleet must not hide the family.
        renamed = rename(read_as_sglang(expr, self.stand_ins), self.renames)
        return in_workload_terms(renamed, self.scheme, dedupe=bool(self.shared))

    def notes(self, promql: Sequence[str], asked: Sequence[str] = ()) -> tuple[Annotation, ...]:
        """What the PromQL texts ``promql`` (as read; ``asked``: as the analyses asked them)
        read differently from the catalogue."""
        read = {name for text in promql for name in _NAME.findall(text)}
        out = list(_stood_in(self.stand_ins, read, asked))
        for newest, older in self.renames.items():
            if older in read or any(
                f"{older}{part}" in read for part in ("_bucket", "_sum", "_count")
            ):
                since = catalogue_family(newest).since
                out.append(
                    Annotation(
                        "renamed_family",
                        f"read {older}, the name this data has for {newest}"
                        + (f" (named so from {since})" if since else ""),
                    )
                )
        if read & _DCGM:
            if self.scheme is GpuLabelScheme.EXPORTED:
                out.append(
                    Annotation(
                        "gpu_label_scheme",
                        "DCGM series name the exporter's pod in pod/namespace/container and "
                        "the workload's in exported_pod/exported_namespace/exported_container "
                        "(scraped with honor_labels false): GPUs joined on the exported_* labels",
                    )
                )
            if self.shared:
                out.append(
                    Annotation(
                        "shared_gpus",
                        f"{len(self.shared)} GPU(s) export their series once per pod using them "
                        f"(time-slicing or MIG): {', '.join(self.shared[:5])}"
                        + (", ..." if len(self.shared) > 5 else "")
                        + "; each GPU is counted once (max by GPU identity)",
                    )
                )
        return tuple(out)


class ViewSource:
    """``source`` read through what ``find`` says ``deployment``'s data holds over ``window``.

    ``find`` runs once, when the first question is asked (it asks ``source``).
    Expressions are rewritten (:meth:`Found.rewrite`); answers of expressions
    reading only DCGM families name the workload's pod as ``pod``.

    Attributes
    ----------
    source, deployment_name, window
        What is read, for whom, over when.
    """

    def __init__(
        self,
        source: Source,
        deployment_name: str,
        window: Window,
        find: Callable[[Source], Found],
    ) -> None:
        self.source = source
        self.deployment_name = deployment_name
        self.window = window
        self._find = find
        self._found: Found | None = None
        self._asked: dict[str, str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ViewSource({self.source!r}, {self.deployment_name!r})"

    @property
    def found(self) -> Found:
        """What the data holds (found on first use)."""
        with self._lock:
            if self._found is None:
                # Every later question needs what is found: kept for the run whatever
                # question first needed it (one not kept, inside unremembered()).
                with remembered():
                    self._found = self._find(self.source)
            return self._found

    def promql(self, asked: str) -> str:
        """The PromQL an expression rendered as ``asked`` was read with."""
        with self._lock:
            known = self._asked.get(asked)
        if known is not None:
            return known
        if self.found.stand_ins:  # matchers are added too: rewrite the expression itself
            with contextlib.suppress(QueryError):
                return to_promql(self.found.rewrite(parse(asked)))
        return rename_text(asked, self.found.renames)

    def notes(self, promql: Sequence[str]) -> tuple[Annotation, ...]:
        """Annotations saying what ``promql`` (as read) read differently from the catalogue."""
        with self._lock:
            asked = {read: text for text, read in self._asked.items()}
        return self.found.notes(promql, [asked.get(text, text) for text in promql])

    def _rewritten(self, expr: Expr) -> Expr:
        new = self.found.rewrite(expr)
        if new is not expr:
            with self._lock:
                self._asked[to_promql(expr)] = to_promql(new)
        return new

    def _moved(self, expr: Expr) -> bool:
        return self.found.scheme is GpuLabelScheme.EXPORTED and reads_only_gpus(expr)

    def info(self) -> EngineInfo:
        """The engine answering."""
        return self.source.info()

    def instant(self, expr: Expr, at: float) -> Instant:
        """``expr`` at ``at``, as this data holds it."""
        answer = self.source.instant(self._rewritten(expr), at)
        if self._moved(expr) and isinstance(answer.value, Vector):
            value = answer.value
            labels = tuple(map(_relabel(expr), value.labels))
            moved = Vector(labels, value.values, value.annotations)
            return Instant(moved, answer.at, answer.promql, answer.annotations)
        return answer

    def range(self, expr: Expr, window: Window, step: float) -> Matrix:
        """``expr`` across ``window`` every ``step`` seconds, as this data holds it."""
        answer = self.source.range(self._rewritten(expr), window, step)
        if not self._moved(expr):
            return answer
        labels = tuple(map(_relabel(expr), answer.labels))
        return Matrix(
            labels, answer.offsets, answer.t_ms, answer.values, answer.promql, answer.annotations
        )

    def raw(self, selector: Selector, window: Window) -> SampleSet:
        """Raw samples of ``selector``; in workload terms for a DCGM family."""
        asked = self._rewritten(selector)
        samples = self.source.raw(asked if isinstance(asked, Selector) else selector, window)
        return _merged(samples) if self._moved(selector) else samples

    def series(self, selector: Selector, window: Window) -> tuple[Labels, ...]:
        """Label sets of the selected series; in workload terms for a DCGM family."""
        asked = self._rewritten(selector)
        found = self.source.series(asked if isinstance(asked, Selector) else selector, window)
        if self.found.stand_ins:
            # As the vLLM family's series: its answers are summed over the splits too.
            found = tuple(dict.fromkeys(without_splits(one, self.found.stand_ins) for one in found))
        if not self._moved(selector):
            return found
        return tuple(dict.fromkeys(workload_labels(one) for one in found))

    def label_names(self, window: Window) -> tuple[str, ...]:
        """Label names present in ``window``."""
        return self.source.label_names(window)

    def label_values(self, label: str, window: Window) -> tuple[str, ...]:
        """Values of ``label`` present in ``window``."""
        return self.source.label_values(label, window)

    def metadata(self, metric: str | None = None) -> tuple[Metadata, ...]:
        """Declared type, help and unit of ``metric`` (or of all)."""
        return self.source.metadata(metric)


def _stood_in(
    stand_ins: Mapping[str, StandIn], read: set[str], asked: Sequence[str]
) -> Iterator[Annotation]:
    """One ``engine_equivalent`` annotation per vLLM family asked (in ``asked``) and read as
    its SGLang stand-in (in ``read``)."""
    if not stand_ins:
        return
    wanted = {name for text in asked for name in _NAME.findall(text)}
    for name, one in stand_ins.items():
        if not (_holds(wanted, name) and _holds(read, one.read.name)):
            continue
        how = to_promql(Selector(one.read.name, one.matchers))
        if one.read.name in PER_RANK_COPIES:
            how += " (max over TP/PP/EP ranks: each rank counts every event)"
        unit = f" Units: {UNIT_READINGS[name]}." if name in UNIT_READINGS else ""
        yield Annotation(
            "engine_equivalent",
            f"read SGLang's {how} for {name}: {one.differs}{unit}",
        )


def _holds(names: set[str], family: str) -> bool:
    """Whether ``names`` holds the series ``family`` or one of its histogram parts."""
    return family in names or any(f"{family}{part}" in names for part in HISTOGRAM_PARTS)


def _relabel(expr: Expr) -> Callable[[Labels], Labels]:
    """How an answer of ``expr`` (reading only DCGM families, ``exported`` scheme) is put in
    workload terms: raw series lose the exporter's labels; an aggregation rewritten by
    :func:`in_workload_terms` keeps the copies it made."""
    return workload_labels if raw(expr) else without_copies


def _merged(samples: SampleSet) -> SampleSet:
    """``samples`` in workload terms; series that become alike (one GPU scraped through two
    exporter pods, as when the exporter restarts) are merged, the first sample of a time kept."""
    parts: dict[tuple[str, Labels], list[int]] = defaultdict(list)
    for i, (name, labels) in enumerate(zip(samples.names, samples.labels, strict=True)):
        parts[(name, workload_labels(labels))].append(i)
    series = []
    for (name, labels), members in parts.items():
        spans = [slice(int(samples.offsets[i]), int(samples.offsets[i + 1])) for i in members]
        t_ms = np.concatenate([samples.t_ms[s] for s in spans])
        values = np.concatenate([samples.values[s] for s in spans])
        order = np.argsort(t_ms, kind="stable")
        kept, first = np.unique(t_ms[order], return_index=True)
        series.append(Series(name, labels, kept / 1000.0, values[order][first]))
    return SampleSet.from_series(series)
