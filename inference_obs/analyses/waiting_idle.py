"""Requests waiting against GPUs idle: a 2x2 contingency of rows, and how strongly they go together.

Queueing classifies each row (an app scrape, or a tile) of a replica; this
module counts the same rows in a 2x2 table, one question per axis:

=====================  ======================  ======================
..                     GPUs idle               GPUs busy
=====================  ======================  ======================
requests waiting       ``waiting_idle``        ``waiting_busy``
no request waiting     ``not_waiting_idle``    ``not_waiting_busy``
=====================  ======================  ======================

"waiting" is ``num_requests_waiting > 0``; "idle" is the replica's mean GPU
utilisation below queueing's busy threshold (so "idle" here is not the
``idle`` class, which also needs nothing waiting and nothing running). Rows
without an aligned GPU reading are left out. Per table, three numbers:

- the **odds ratio** ``(waiting_idle x not_waiting_busy) / (waiting_busy x
  not_waiting_idle)``: how much likelier the GPUs are idle in a row with a
  queue than in one without (1: no association; above 1: queues come with
  idle GPUs, which points away from GPU capacity);
- **phi**, the Pearson correlation of the two yes/no columns (-1 to 1);
- the two-sided **p-value** of Fisher's exact test (``scipy.stats.fisher_exact``):
  the chance, were waiting and idle independent with these margins, of a
  table at least as far from independence.

A zero cell makes the odds ratio 0, infinite or undefined; an empty margin
(no row waited, or the GPUs were never idle) leaves phi undefined. Rows are
consecutive scrapes of one replica, not independent draws, so the p-value is
a guide to how surprising the table is, not a test a decision can rest on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict

from inference_obs.errors import Annotation
from inference_obs.query import Expr, to_promql
from inference_obs.reading.context import Reading
from inference_obs.reading.measurement import Measurement, Status

__all__ = ["CAVEATS", "TwoByTwo", "WaitingIdle", "waiting_idle"]

CAVEATS = (
    "Correlation is not causation: rows where requests waited and GPUs idled together say "
    "where to look (host, transfers, scheduling), not what caused the queue.",
    "Rows are consecutive scrapes (or tiles) of one replica, not independent draws: the "
    "p-value says how surprising the table is, not a significance a decision can rest on.",
    "App and GPU series are scraped independently: a row's GPU reading may be a few seconds "
    "off its queue reading.",
)
POOLED = (
    "Pooled over replicas: a pattern in one replica can vanish (or reverse) in the pool; "
    "read the replicas' tables too."
)


@dataclass(frozen=True, slots=True)
class TwoByTwo:
    """Counts of rows in the four cells of waiting (rows) against GPUs idle (columns).

    Examples
    --------
    >>> t = TwoByTwo(waiting_idle=3, waiting_busy=3, not_waiting_idle=50, not_waiting_busy=4)
    >>> t.total, t.waiting, t.idle
    (60, 6, 53)
    >>> # 3·4 / (3·50) = 0.08; phi = (12 - 150) / sqrt(6·54·53·7) = -138 / 346.7
    >>> round(t.odds_ratio(), 4), round(t.phi() or 0, 4)
    (0.08, -0.398)
    >>> TwoByTwo(2, 0, 5, 7).odds_ratio()
    inf
    >>> TwoByTwo(0, 3, 0, 9).phi() is None  # the GPUs were never idle: no idle column
    True
    """

    waiting_idle: int
    waiting_busy: int
    not_waiting_idle: int
    not_waiting_busy: int

    def __add__(self, other: TwoByTwo) -> TwoByTwo:
        return TwoByTwo(
            self.waiting_idle + other.waiting_idle,
            self.waiting_busy + other.waiting_busy,
            self.not_waiting_idle + other.not_waiting_idle,
            self.not_waiting_busy + other.not_waiting_busy,
        )

    @property
    def total(self) -> int:
        """Rows counted (with a GPU reading)."""
        return self.waiting + self.not_waiting_idle + self.not_waiting_busy

    @property
    def waiting(self) -> int:
        """Rows with requests waiting."""
        return self.waiting_idle + self.waiting_busy

    @property
    def idle(self) -> int:
        """Rows with the GPUs idle (below the busy threshold)."""
        return self.waiting_idle + self.not_waiting_idle

    def cells(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The table as rows (waiting, not waiting) of columns (idle, busy)."""
        return (
            (self.waiting_idle, self.waiting_busy),
            (self.not_waiting_idle, self.not_waiting_busy),
        )

    def odds_ratio(self) -> float:
        """The sample odds ratio ``ad / bc``: ``inf`` when only ``bc`` is 0, NaN when both are."""
        ad = self.waiting_idle * self.not_waiting_busy
        bc = self.waiting_busy * self.not_waiting_idle
        if bc == 0:
            return math.inf if ad else math.nan
        return ad / bc

    def phi(self) -> float | None:
        """Pearson's r of the two yes/no columns, -1 to 1; None when a margin is empty."""
        margins = (self.waiting, self.total - self.waiting, self.idle, self.total - self.idle)
        if 0 in margins:
            return None
        ad = self.waiting_idle * self.not_waiting_busy
        bc = self.waiting_busy * self.not_waiting_idle
        return (ad - bc) / math.sqrt(math.prod(margins))

    def p_value(self) -> float | None:
        """Two-sided p-value of Fisher's exact test; None for an empty table."""
        if not self.total:
            return None
        # Imported here, when a report first needs it: scipy.stats takes about 1 s to load,
        # which `import inference_obs` should not pay.
        from scipy.stats import fisher_exact

        return float(fisher_exact(np.asarray(self.cells()), alternative="two-sided").pvalue)

    def degenerate(self) -> str:
        """Why a zero cell or an empty margin leaves a statistic undefined, in words."""
        margins = (
            (self.waiting, "no row had requests waiting"),
            (self.total - self.waiting, "every row had requests waiting"),
            (self.idle, "the GPUs were never idle"),
            (self.total - self.idle, "the GPUs were always idle"),
        )
        why = [text for count, text in margins if count == 0]
        named = (
            ("waiting & idle", self.waiting_idle),
            ("waiting & busy", self.waiting_busy),
            ("not waiting & idle", self.not_waiting_idle),
            ("not waiting & busy", self.not_waiting_busy),
        )
        empty = [name for name, count in named if count == 0]
        return "; ".join(why) or f"no row was {' nor '.join(empty)}"


class WaitingIdle(BaseModel):
    """The waiting-vs-idle table of one replica (or of every replica pooled) as Measurements.

    Attributes
    ----------
    scope
        The replica, or None for the deployment (rows of every replica pooled). Not a
        name: a replica may be called ``all`` (a deployment without replica labels is).
    waiting_idle, waiting_busy, not_waiting_idle, not_waiting_busy
        Rows in each cell (samples, or tiles).
    odds_ratio
        ``(waiting_idle x not_waiting_busy) / (waiting_busy x not_waiting_idle)``,
        a ratio of odds (1: no association); ``invalid`` where a zero cell makes it
        infinite or undefined (the annotation names the cells).
    phi
        Correlation of the two yes/no columns, -1 to 1; ``invalid`` when a margin is empty.
    p_value
        Two-sided p-value of Fisher's exact test, 0-1.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: str | None
    waiting_idle: Measurement
    waiting_busy: Measurement
    not_waiting_idle: Measurement
    not_waiting_busy: Measurement
    odds_ratio: Measurement
    phi: Measurement
    p_value: Measurement


def _statistic(
    r: Reading,
    name: str,
    value: float | None,
    unit: str,
    table: TwoByTwo,
    how: tuple[Expr, ...],
    computation: str,
    caveats: tuple[str, ...],
) -> Measurement:
    """A statistic of ``table``: ``no_data`` without rows, ``invalid`` where it is undefined."""
    notes: tuple[Annotation, ...] = ()
    if not table.total:
        status, notes = Status.NO_DATA, (Annotation("no_data", "no row with a GPU reading"),)
    elif value is None or not math.isfinite(value):
        what = "infinite" if value == math.inf else "undefined"
        counts = f"{table.waiting} of {table.total} rows waited, {table.idle} had idle GPUs"
        note = f"{what}: {table.degenerate()} ({counts})"
        status, notes = Status.INVALID, (Annotation("zero_cell", note),)
    else:
        status = Status.OK
    return r.made(
        name,
        value if status is Status.OK else None,
        unit,
        status,
        promql=tuple(to_promql(e) for e in how),
        computation=computation,
        annotations=notes,
        caveats=caveats,
    )


def waiting_idle(
    r: Reading,
    table: TwoByTwo,
    scope: str | None,
    *,
    unit: str,
    busy_threshold: float,
    reads: tuple[Expr, ...],
) -> WaitingIdle:
    """``table`` as Measurements ``waiting_idle_*`` (``...[scope]`` unless ``scope`` is None).

    Parameters
    ----------
    r
        The queueing reading (its deployment, window and source name the keys).
    table
        The rows counted.
    scope
        A replica's name, or None for every replica pooled.
    unit
        What a row is: ``samples`` or ``tiles``.
    busy_threshold
        Mean GPU utilisation, percent (0-100), at and above which a row's GPUs are busy.
    reads
        The queries the rows came from, for the provenance.
    """
    suffix = "" if scope is None else f"[{scope}]"
    cells = (
        f"rows with num_requests_waiting > 0 (or not) against the replica's mean "
        f"DCGM_FI_DEV_GPU_UTIL < {busy_threshold:g} % (idle) or not, rows without a GPU "
        f"reading left out{'; every replica pooled' if scope is None else ''}"
    )
    caveats = (*CAVEATS, POOLED) if scope is None else CAVEATS

    def one(name: str, value: float | None, unit: str, computation: str) -> Measurement:
        return _statistic(
            r, f"{name}{suffix}", value, unit, table, reads, f"{computation}: {cells}", caveats
        )

    return WaitingIdle(
        scope=scope,
        waiting_idle=one("waiting_idle_count", table.waiting_idle, unit, "count of"),
        waiting_busy=one("waiting_busy_count", table.waiting_busy, unit, "count of"),
        not_waiting_idle=one("not_waiting_idle_count", table.not_waiting_idle, unit, "count of"),
        not_waiting_busy=one("not_waiting_busy_count", table.not_waiting_busy, unit, "count of"),
        odds_ratio=one(
            "waiting_idle_odds_ratio",
            table.odds_ratio(),
            "ratio",
            "(waiting, idle) x (not waiting, busy) / ((waiting, busy) x (not waiting, idle))",
        ),
        phi=one("waiting_idle_phi", table.phi(), "ratio", "phi coefficient of the 2x2 table"),
        p_value=one(
            "waiting_idle_p_value",
            table.p_value(),
            "ratio",
            "two-sided Fisher's exact test (scipy.stats.fisher_exact) of the 2x2 table",
        ),
    )
