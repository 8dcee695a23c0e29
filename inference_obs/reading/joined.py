"""Several instant questions in one request: a report's round trips are its time on a slow link.

An analysis often asks several similar questions in a row: four quantiles
of one histogram, the means of five GPU families, a counter ratio's reset
check, both sums and the recheck query. :func:`joined` asks them as one
query: each part's series marked with its position in the :data:`PART`
label (``label_replace``), the parts joined with ``or``. Neither operator
changes a value, and parts never share a label set, so :func:`split` gives
each part the series it gets alone. :func:`instants` does both and returns
an :class:`~inference_obs.source.base.Instant` per question, as the source
would have answered it alone.

Annotations cannot be told apart by part (a server names positions in the
query it was sent), so an answer that carries any is asked again part by
part: each Instant then carries exactly what its question gets alone. So is
an answer whose part labels cannot be trusted: a :data:`PART` that is not one
of the parts asked (VictoriaMetrics 1.79 writes a ``pod`` value holding a
newline into it, in ``histogram_quantile`` joined with ``or``), a series
without one, or two series of one part with the same labels.

A joined query is kept under :data:`JOINED_BYTES` of PromQL, since
VictoriaMetrics refuses a query longer than 16 KiB (``-search.maxQueryLen``):
more questions than fit are asked as several joined queries, at once
(:func:`batches`); a question longer than that alone is asked alone.

An engine in this process (a dataset's, kind ``dataset``) has no round trips
to save and would only do the joining's work as well: it is asked each
question alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from inference_obs.errors import MalformedAnswer, QueryError
from inference_obs.query import Binary, Expr, ValueType, label_replace, to_promql
from inference_obs.reading.schedule import together
from inference_obs.samples import Instant, Labels, Vector
from inference_obs.source.base import Source
from inference_obs.source.remembering import unremembered

__all__ = [
    "JOINED_BYTES",
    "PART",
    "batches",
    "in_process",
    "instants",
    "joined",
    "joined_expr",
    "split",
    "vectors",
]

#: The label that tells the parts of a joined query apart; no exporter uses it, and a
#: series' own label of that name would be overwritten.
PART = "inference_obs_part"

#: The longest joined query asked, in bytes of PromQL: under VictoriaMetrics's default
#: limit of 16 KiB (``-search.maxQueryLen=16384``), with room to spare.
JOINED_BYTES = 15_000


def _marked(expr: Expr, i: int) -> Expr:
    return label_replace(expr, PART, str(i), PART, ".*")


def batches(exprs: Sequence[Expr], limit: int = JOINED_BYTES) -> list[range]:
    """The positions of ``exprs`` in consecutive runs whose joined query stays within
    ``limit`` bytes of PromQL (a question longer than that alone is a run of its own).

    Each part counts its marked text and 6 bytes for the ``or`` and the
    parentheses that join it to the others.

    >>> from inference_obs.query import Selector
    >>> [list(run) for run in batches([Selector("a" * 50)] * 5, limit=300)]
    [[0, 1], [2, 3], [4]]
    """
    runs: list[range] = []
    start, used = 0, 0
    for i, expr in enumerate(exprs):
        size = len(to_promql(_marked(expr, i - start)).encode()) + 6
        if i > start and used + size > limit:
            runs.append(range(start, i))
            start, used = i, len(to_promql(_marked(expr, 0)).encode()) + 6
        else:
            used += size
    if exprs:
        runs.append(range(start, len(exprs)))
    return runs


def joined(source: Source, exprs: Sequence[Expr], at: float, *, remember: bool = True) -> Instant:
    """Instant vectors ``exprs`` asked as one query at ``at`` (:func:`joined_expr`).

    Each part's series are what the part alone gives; :func:`split` takes
    them apart again. The answer's annotations belong to the parts together.
    ``remember`` False for a batch only its caller asks: the run does not keep
    its answer (:func:`~inference_obs.source.remembering.unremembered`).
    """
    with unremembered(not remember):
        return source.instant(joined_expr(exprs), at)


def joined_expr(exprs: Sequence[Expr]) -> Expr:
    """Instant vectors ``exprs`` as one expression: each part's series marked with its
    position in :data:`PART` (``label_replace``), the parts joined with ``or``.

    Neither operator changes a value, so each part's series are what the part
    alone gives.
    """
    marked = [_marked(e, i) for i, e in enumerate(exprs)]
    # Joined pairwise, a balanced tree: each series is matched against the others
    # log2(parts) times, not once per part after it.
    while len(marked) > 1:
        pairs = zip(marked[::2], marked[1::2], strict=False)
        marked = [Binary("or", a, b) for a, b in pairs] + marked[len(marked) - len(marked) % 2 :]
    return marked[0]


def split(answer: Instant, count: int) -> list[Vector]:
    """The ``count`` parts of an answer of :func:`joined`, in order, :data:`PART` removed.

    Raises
    ------
    MalformedAnswer
        When the answer's part labels cannot be trusted (see :func:`_parts`).
    """
    parts = _parts(answer, count)
    if parts is None:
        raise MalformedAnswer(
            f"the answer's {PART} labels are not the {count} parts asked", promql=answer.promql
        )
    return parts


def _parts(answer: Instant, count: int) -> list[Vector] | None:
    """:func:`split`'s parts, or None when the answer's part labels cannot be trusted.

    Each series must carry a :data:`PART` that is one of the ``count`` asked
    (spelled as :func:`joined` wrote it: ``int`` would also take ``" 1"``, ``"01"``
    or other scripts' digits), and no part may hold one label set twice, as
    no answer to a part alone does.
    """
    position = {str(i): i for i in range(count)}
    found: list[tuple[list[Labels], list[float]]] = [([], []) for _ in range(count)]
    if isinstance(answer.value, Vector):
        for labels, value in zip(answer.value.labels, answer.value.values.tolist(), strict=True):
            i = position.get(labels.get(PART, ""))
            if i is None:
                return None
            found[i][0].append(Labels((k, v) for k, v in labels.items() if k != PART))
            found[i][1].append(value)
    if any(len(set(labels)) != len(labels) for labels, _ in found):
        return None
    return [Vector(tuple(lb), np.array(vs, dtype=np.float64)) for lb, vs in found]


def in_process(source: Source) -> bool:
    """Whether ``source``'s engine answers in this process, with no round trip to save."""
    return source.info().kind == "dataset"


def vectors(source: Source, exprs: Sequence[Expr], at: float) -> list[Vector]:
    """Each of the instant vectors ``exprs`` at ``at``, annotations aside: one joined query
    (:func:`joined`; several at once past :data:`JOINED_BYTES`, see :func:`batches`), or
    each alone, all at once, from an engine in this process or when a joined answer's part
    labels cannot be trusted.

    A scalar or range expression among ``exprs`` raises
    :class:`~inference_obs.errors.QueryError` naming it, before anything is asked."""
    for expr in exprs:
        if expr.type is not ValueType.VECTOR:
            raise QueryError(
                f"{to_promql(expr)} is a {expr.type.value}; vectors() asks instant-vector "
                "expressions only (ask a scalar with Source.instant)"
            )
    if not in_process(source) and len(exprs) > 1:
        runs = batches(exprs)
        if len(runs) > 1:
            asked = together([partial(vectors, source, exprs[r.start : r.stop], at) for r in runs])
            return [vector for found in asked for vector in found]
        parts = _parts(joined(source, exprs, at), len(exprs))
        if parts is not None:
            return parts
        # Part labels that cannot be trusted: each question alone, as below.
    found = []
    for expr, answer in zip(
        exprs, together([partial(source.instant, e, at) for e in exprs]), strict=True
    ):
        if not isinstance(answer.value, Vector):
            # An invariant, not input: a source answers a vector expression with a Vector.
            raise TypeError(f"expected an instant vector from {to_promql(expr)}")
        found.append(answer.value)
    return found


def instants(source: Source, exprs: Sequence[Expr], at: float) -> list[Instant]:
    """Each of ``exprs`` at ``at``, asked in one request where they are all instant vectors
    (:func:`joined`; several at once past :data:`JOINED_BYTES`, see :func:`batches`), else
    (or from an engine in this process) each alone, all at once.

    An answer with annotations is asked again part by part, since annotations
    cannot be told apart by part: each Instant then carries exactly what its
    question alone gets; so is an answer whose part labels cannot be trusted.

    Examples
    --------
    >>> from inference_obs.query import Selector
    >>> from inference_obs.source.dataset.source import DatasetSource
    >>> source = DatasetSource("datasets/r1-decode")
    >>> at = source.dataset.manifest.window.window().end_s
    >>> exprs = [Selector(f"vllm:num_requests_{n}").sum() for n in ("running", "waiting")]
    >>> [one.value.values.tolist() for one in instants(source, exprs, at)] == [
    ...     source.instant(e, at).value.values.tolist() for e in exprs
    ... ]
    True
    """
    alone = [partial(source.instant, e, at) for e in exprs]
    vector = all(e.type is ValueType.VECTOR for e in exprs)
    if len(exprs) < 2 or not vector or in_process(source):
        return together(alone)
    runs = batches(exprs)
    if len(runs) > 1:
        asked = together([partial(instants, source, exprs[r.start : r.stop], at) for r in runs])
        return [one for found in asked for one in found]
    # One caller's questions of one step: no other asks this batch (counter totals, whose
    # pairs several analyses share, are asked through vectors() and kept).
    answer = joined(source, exprs, at, remember=False)
    parts = None if answer.annotations else _parts(answer, len(exprs))
    if parts is None:
        return together(alone)
    return [Instant(vector, at, to_promql(e)) for e, vector in zip(exprs, parts, strict=True)]
