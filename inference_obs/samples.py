"""The currency between sources, the engine and analyses: series in, answers out.

A :class:`Series` is one time series' raw samples (timestamps in float unix
seconds, values float64); a :class:`SampleSet` holds many series in columnar
form (one timestamp and one value array, with per-series offsets) so the
engine works on whole arrays, never on one Python object per sample.

Timestamps are kept to whole milliseconds, as Prometheus stores them; a
:class:`SampleSet` also exposes them as int64 milliseconds for exact window
arithmetic.

The answers to queries, whoever computes them: a :class:`Vector` (one value
per series at one time), an :class:`Instant` (the answer to an instant query:
a vector or a scalar) and a :class:`Matrix` (the answer to a range query).
:data:`Floats` and :data:`Ints` name the numpy arrays all of them hold.
"""

from __future__ import annotations

import math
from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from inference_obs.errors import Annotation, ConfigurationError, DatasetError, QueryError
from inference_obs.query.names import LABEL_NAME, METRIC_NAME, parse_duration

__all__ = [
    "NAME",
    "SHARED_TEXTS_MAX",
    "STALE_BITS",
    "STALE_NAN",
    "Floats",
    "Instant",
    "Ints",
    "Labels",
    "Matrix",
    "SampleSet",
    "Series",
    "Vector",
    "Window",
    "describe",
    "is_stale",
]

#: float64 arrays: sample values, float unix seconds.
Floats: TypeAlias = npt.NDArray[np.float64]
#: int64 arrays: unix milliseconds, offsets, indexes.
Ints: TypeAlias = npt.NDArray[np.int64]

#: The label holding a series' metric name in a :class:`Vector`'s label sets.
NAME = "__name__"

# Float64 seconds keep sub-millisecond precision up to about 1e11 s (year 5138).
_MAX_ABS_SECONDS = 1e11

#: Prometheus's staleness marker: a NaN with this exact bit pattern (never
#: returned by the HTTP API; written when a series disappears from a scrape).
STALE_BITS = 0x7FF0000000000002
STALE_NAN: float = float(np.array([STALE_BITS], dtype=np.int64).view(np.float64)[0])


def is_stale(values: Floats) -> npt.NDArray[np.bool_]:
    """Which values are staleness markers (not ordinary NaNs)."""
    stale: npt.NDArray[np.bool_] = np.asarray(values, dtype=np.float64).view(np.int64) == STALE_BITS
    return stale


#: Label names and values in use, each kept once (:class:`Labels` takes its texts from here):
#: every answer decodes its own copy of ``namespace="llm"``, of each pod's name and of each
#: ``le``, and a fleet's series repeat them thousands of times. Emptied when it reaches
#: :data:`SHARED_TEXTS_MAX` texts, so a long session seeing pods come and go keeps no more.
_SHARED_TEXTS: dict[str, str] = {}
#: The most texts :data:`_SHARED_TEXTS` holds (a few MiB of short strings at most).
SHARED_TEXTS_MAX = 1 << 16


class Labels(Mapping[str, str]):
    """An immutable, hashable label set whose items iterate in label-name order.

    Parameters
    ----------
    labels
        Label names mapped to values, or ``(name, value)`` pairs.

    Examples
    --------
    >>> labels = Labels({"pod": "b", "model": "a"})
    >>> list(labels.items())
    [('model', 'a'), ('pod', 'b')]
    >>> labels == {"model": "a", "pod": "b"}
    True
    """

    # One dict in label-name order (a tuple of pairs beside it doubled the memory of
    # every label set a fleet's answers carry); the hash is worked out once.
    __slots__ = ("_derived", "_hash", "_index")

    def __init__(self, labels: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        index = dict(labels)
        if len(_SHARED_TEXTS) >= SHARED_TEXTS_MAX:
            _SHARED_TEXTS.clear()
        shared = _SHARED_TEXTS.setdefault  # one C call a text, atomic between threads
        self._index: dict[str, str] = {shared(k, k): shared(v, v) for k, v in sorted(index.items())}
        self._hash: int | None = None
        # Label sets made from this one by keep/drop, by (kept?, names).
        self._derived: dict[tuple[bool, frozenset[str]], Labels] | None = None

    def keep(self, names: frozenset[str]) -> Labels:
        """Only the labels named in ``names`` (this set itself when it has no others).

        Remembered per ``names``: a query evaluated over many steps asks for
        the same set's signature or group at every step.

        >>> Labels({"pod": "b", "gpu": "0"}).keep(frozenset({"pod"}))
        Labels({'pod': 'b'})
        """
        return self._derive(True, names)

    def drop(self, names: frozenset[str]) -> Labels:
        """The labels not named in ``names`` (this set itself when it has none of them).

        Remembered per ``names``, as :meth:`keep` is.

        >>> Labels({"pod": "b", "le": "1.0"}).drop(frozenset({"le"}))
        Labels({'pod': 'b'})
        """
        return self._derive(False, names)

    def _derive(self, kept: bool, names: frozenset[str]) -> Labels:
        derived = self._derived
        if derived is None:
            derived = self._derived = {}
        found = derived.get((kept, names))
        if found is None:
            items = [item for item in self._index.items() if (item[0] in names) is kept]
            found = self if len(items) == len(self._index) else Labels(items)
            derived[(kept, names)] = found
        return found

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Labels):
            return self._index == other._index
        return super().__eq__(other)

    def __getitem__(self, name: str) -> str:
        return self._index[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def items(self) -> ItemsView[str, str]:
        # The index's own read-only view, in name order: iterated in C, where
        # Mapping's looks up each name (a frame of 256 series paid 2 ms for it).
        return self._index.items()

    def __hash__(self) -> int:
        found = self._hash
        if found is None:
            found = self._hash = hash(tuple(self._index.items()))
        return found

    def __repr__(self) -> str:
        return f"Labels({self._index!r})"


@dataclass(frozen=True, slots=True, eq=False, init=False)
class Series:
    """The raw samples of one series.

    Compared by identity: numpy arrays have no single truth value, so a
    field-wise ``==`` would be ambiguous. Compare ``name``, ``labels`` and the
    arrays (``numpy.array_equal``) instead.

    Parameters
    ----------
    name
        Metric name, matching ``[a-zA-Z_:][a-zA-Z0-9_:]*``.
    labels
        Label names (``[a-zA-Z_][a-zA-Z0-9_]*``, not ``__name__``) mapped to
        non-empty values, or ``(name, value)`` pairs; stored as
        :class:`Labels`. Prometheus treats an empty value as an absent label,
        so one would not round-trip.
    timestamps
        Sample times, unix seconds, finite and strictly increasing. Stored as
        a read-only float64 copy.
    values
        Sample values (``NaN`` and infinities allowed), one per timestamp.
        Stored as a read-only float64 copy.

    Raises
    ------
    DatasetError
        If a name is invalid or the arrays do not fit; the message names the series.

    Examples
    --------
    >>> s = Series("up", {"job": "vllm"}, [0.0, 15.0], [1.0, 1.0])
    >>> s.labels["job"], s.timestamps.tolist()
    ('vllm', [0.0, 15.0])
    """

    name: str
    labels: Labels
    timestamps: Floats
    values: Floats
    t_ms: Ints

    # A hand-written __init__ so callers may pass lists and plain mappings
    # while the fields keep their precise, validated types.
    def __init__(
        self,
        name: str,
        labels: Mapping[str, str] | Iterable[tuple[str, str]],
        timestamps: npt.ArrayLike,
        values: npt.ArrayLike,
    ) -> None:
        if not isinstance(name, str) or not METRIC_NAME.fullmatch(name):
            raise DatasetError(
                f"series {name!r}: invalid metric name; metric names match [a-zA-Z_:][a-zA-Z0-9_:]*"
            )
        pairs = dict(labels)
        where = f"series {describe(name, pairs)}"
        for label, value in pairs.items():
            if not isinstance(label, str) or not LABEL_NAME.fullmatch(label):
                raise DatasetError(
                    f"{where}: invalid label name {label!r}; "
                    "label names match [a-zA-Z_][a-zA-Z0-9_]*"
                )
            if label == "__name__":
                raise DatasetError(f"{where}: give the metric name as `name`, not a label")
            if not isinstance(value, str) or not value:
                raise DatasetError(
                    f"{where}: label {label} needs a non-empty string value "
                    "(Prometheus drops labels with empty values)"
                )
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise DatasetError(f"{where}: label {label} is not valid UTF-8 text") from exc
        times = _frozen_float_array(timestamps, where, "timestamps")
        samples = _frozen_float_array(values, where, "values")
        if times.shape != samples.shape:
            raise DatasetError(f"{where}: {times.size} timestamps but {samples.size} values")
        if not np.all(np.isfinite(times)):
            raise DatasetError(f"{where}: timestamps must be finite")
        if times.size and np.max(np.abs(times)) > _MAX_ABS_SECONDS:
            raise DatasetError(f"{where}: timestamps beyond +-{_MAX_ABS_SECONDS:g} s")
        # Prometheus keeps whole milliseconds: two samples in one millisecond
        # would silently collide in any TSDB.
        millis = np.rint(times * 1000.0).astype(np.int64)
        steps = np.diff(millis)
        if np.any(steps <= 0):
            first = int(np.flatnonzero(steps <= 0)[0])
            raise DatasetError(
                f"{where}: timestamps must be strictly increasing, at least 1 ms apart; "
                f"{times[first]!r} is followed by {times[first + 1]!r}"
            )
        millis.flags.writeable = False
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "labels", Labels(pairs))
        object.__setattr__(self, "timestamps", times)
        object.__setattr__(self, "values", samples)
        object.__setattr__(self, "t_ms", millis)


def _frozen_float_array(data: object, where: str, what: str) -> Floats:
    try:
        array = np.array(data, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise DatasetError(f"{where}: {what} are not float64 numbers ({exc})") from exc
    if array.ndim != 1:
        raise DatasetError(f"{where}: {what} must be one-dimensional, got shape {array.shape}")
    array.flags.writeable = False
    return array


def describe(name: str, labels: Mapping[str, str]) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in labels.items())
    return f"{name}{{{inner}}}"


@dataclass(frozen=True, slots=True, eq=False)
class SampleSet:
    """Many series in columnar form: the input of the local engine.

    Series ``i`` has name ``names[i]``, labels ``labels[i]`` (without
    ``__name__``) and samples ``t_ms[offsets[i]:offsets[i + 1]]`` (int64 unix
    milliseconds, strictly increasing) with ``values`` at the same positions
    (float64; staleness markers kept as :data:`STALE_NAN`).

    Build it with :meth:`from_series`; every field is read-only.
    """

    names: tuple[str, ...]
    labels: tuple[Labels, ...]
    offsets: Ints
    t_ms: Ints
    values: Floats

    @classmethod
    def from_series(cls, series: Iterable[Series]) -> SampleSet:
        """Gather series into one sample set; a repeated (name, labels) is an error."""
        members = list(series)
        seen: set[tuple[str, Labels]] = set()
        for one in members:
            key = (one.name, one.labels)
            if key in seen:
                raise DatasetError(f"series {describe(one.name, one.labels)} is given twice")
            seen.add(key)
        sizes = np.array([one.values.size for one in members], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        t_ms = np.concatenate([one.t_ms for one in members]) if members else np.zeros(0, np.int64)
        values = (
            np.concatenate([one.values for one in members]) if members else np.zeros(0, np.float64)
        )
        for array in (offsets, t_ms, values):
            array.flags.writeable = False
        return cls(
            tuple(one.name for one in members),
            tuple(one.labels for one in members),
            offsets,
            t_ms.astype(np.int64, copy=False),
            values.astype(np.float64, copy=False),
        )

    def __len__(self) -> int:
        return len(self.names)

    def __iter__(self) -> Iterator[Series]:
        for i in range(len(self)):
            yield self.series(i)

    def series(self, i: int) -> Series:
        """Series ``i`` as a :class:`Series`."""
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return Series(self.names[i], self.labels[i], self.t_ms[lo:hi] / 1000.0, self.values[lo:hi])

    def take(self, indices: Sequence[int] | npt.NDArray[np.intp]) -> SampleSet:
        """The series at ``indices``, in that order."""
        return SampleSet.from_series(self.series(int(i)) for i in indices)


@dataclass(frozen=True, slots=True, eq=False)
class Vector:
    """An instant vector: ``labels[i]`` has value ``values[i]`` (float64).

    The result of an instant evaluation: one value per series, each with its
    label set (:data:`NAME` included while a function has not dropped it).
    """

    labels: tuple[Labels, ...]
    values: Floats
    annotations: tuple[Annotation, ...] = ()

    def __len__(self) -> int:
        return len(self.labels)

    def as_dict(self) -> dict[Labels, float]:
        """Label set -> value, for inspection and tests."""
        return dict(zip(self.labels, self.values.tolist(), strict=True))


@dataclass(frozen=True, slots=True, eq=False)
class Instant:
    """The answer to an instant query at ``at`` (unix seconds).

    ``value`` is a :class:`Vector` for vector expressions and a float for
    scalar ones. An empty vector means no series matched: no data, never zero.
    """

    value: Vector | float
    at: float
    promql: str
    annotations: tuple[Annotation, ...] = ()


@dataclass(frozen=True, slots=True, eq=False)
class Matrix:
    """The answer to a range query: series ``i`` has ``labels[i]`` and samples
    ``t_ms[offsets[i]:offsets[i + 1]]`` (unix ms) with ``values`` at the same positions.
    """

    labels: tuple[Labels, ...]
    offsets: Ints
    t_ms: Ints
    values: Floats
    promql: str
    annotations: tuple[Annotation, ...] = ()

    def __len__(self) -> int:
        return len(self.labels)

    def points(self, i: int) -> tuple[Ints, Floats]:
        """Series ``i``'s step times (unix ms) and values, as views of the columns."""
        lo, hi = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.t_ms[lo:hi], self.values[lo:hi]


def _length_seconds(length: str | float) -> float:
    """A window's length, seconds: a PromQL duration text (``1h``) or a finite number."""
    if isinstance(length, str):
        try:
            return parse_duration(length)
        except QueryError as exc:
            raise ConfigurationError(f"window length: {exc}") from None
    try:
        seconds = float(length)
    except (TypeError, ValueError):
        seconds = math.nan
    if not math.isfinite(seconds):
        raise ConfigurationError(
            f"window length {length!r} is neither seconds nor a duration such as '1h'"
        )
    return seconds


@dataclass(frozen=True, slots=True)
class Window:
    """A time window ``[start, end]`` with timezone-aware edges.

    The timezone is kept for display (a report in the deployment's local
    time); all arithmetic uses :attr:`start_s` and :attr:`end_s`, unix seconds.

    Examples
    --------
    >>> w = Window.parse("2026-10-19T17:40+08:00", "1h")
    >>> w.seconds, w.end.isoformat()
    (3600.0, '2026-10-19T18:40:00+08:00')
    """

    start: datetime
    end: datetime

    def __post_init__(self) -> None:
        for edge, value in (("start", self.start), ("end", self.end)):
            if not isinstance(value, datetime):
                raise ConfigurationError(
                    f"window {edge} {value!r} is not a datetime; give a timezone-aware datetime "
                    "or use Window.parse with text such as '2026-10-19T17:40+08:00'"
                )
            if value.utcoffset() is None:
                raise ConfigurationError(
                    f"window {edge} {value!r} has no timezone; write it as "
                    "'2026-10-19T17:40+08:00' or with 'Z' for UTC"
                )
        if self.end <= self.start:
            raise ConfigurationError(
                f"window end {self.end.isoformat()} is not after its start {self.start.isoformat()}"
            )

    @classmethod
    def parse(cls, start: str | datetime, length: str | float) -> Window:
        """A window from an ISO start time with offset and a length ('1h' or seconds).

        Raises
        ------
        ConfigurationError
            Naming the start or the length that cannot make a window.
        """
        if isinstance(start, str):
            try:
                start = datetime.fromisoformat(start)
            except ValueError:
                raise ConfigurationError(
                    f"window start {start!r} is not an ISO 8601 time such as "
                    "'2026-10-19T17:40+08:00'"
                ) from None
        if not isinstance(start, datetime):
            raise ConfigurationError(
                f"window start {start!r} is not a datetime, nor ISO 8601 text such as "
                "'2026-10-19T17:40+08:00'"
            )
        return cls(start, start + timedelta(seconds=_length_seconds(length)))

    @classmethod
    def ending(cls, end: datetime, length: str) -> Window:
        """The window of ``length`` that ends at ``end``: the last hour, the last 30 minutes.

        Parameters
        ----------
        end
            The window's end, timezone-aware; its timezone is kept for display.
        length
            A PromQL duration: ``"30m"``, ``"1h"``, ``"6h"``, ``"1h30m"``, ``"7d"``.

        Raises
        ------
        ConfigurationError
            ``end`` has no timezone (or is no datetime), ``length`` is not a
            duration, or an edge falls outside the years 1 to 9999 in UTC; the
            message names the input and shows what was given.

        Examples
        --------
        >>> from datetime import UTC, datetime
        >>> w = Window.ending(datetime(2026, 10, 19, 10, 40, tzinfo=UTC), "1h")
        >>> w.start.isoformat(), w.seconds
        ('2026-10-19T09:40:00+00:00', 3600.0)
        """
        if not isinstance(end, datetime):
            raise ConfigurationError(
                f"window end {end!r} is not a datetime: give a timezone-aware one, e.g. "
                "datetime.now(UTC)"
            )
        if end.utcoffset() is None:
            raise ConfigurationError(
                f"window end {end.isoformat()} has no timezone: give an aware datetime, e.g. "
                "one made with tzinfo=UTC"
            )
        try:
            seconds = parse_duration(length)
        except QueryError:
            raise ConfigurationError(
                f"window length {length!r} is not a duration: give one such as '30m', '1h' or "
                "'6h' (units ms, s, m, h, d, w, y)"
            ) from None
        # Both edges must exist in UTC, where sources and reports read them.
        try:
            end.astimezone(UTC)
        except OverflowError:
            raise ConfigurationError(
                f"window end {end.isoformat()} is outside the years 1 to 9999 in UTC"
            ) from None
        try:
            start = end - timedelta(seconds=seconds)
            start.astimezone(UTC)
        except OverflowError:
            raise ConfigurationError(
                f"window length {length!r} ending {end.isoformat()} starts before the year 1 in UTC"
            ) from None
        return cls(start, end)

    @property
    def start_s(self) -> float:
        """Start, unix seconds."""
        return self.start.timestamp()

    @property
    def end_s(self) -> float:
        """End, unix seconds."""
        return self.end.timestamp()

    @property
    def seconds(self) -> float:
        """Length in seconds."""
        return (self.end - self.start).total_seconds()
