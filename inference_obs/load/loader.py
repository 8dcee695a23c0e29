"""A dataset's samples streamed into a store, in batches of a bounded size.

``samples.om`` is read block by block through the project's one
OpenMetrics reader (:meth:`~inference_obs.source.openmetrics.reader.OpenMetricsReader.take`),
so what is held at once is a block's samples, one batch, and each series'
labels (a few hundred bytes a series), whatever the file's length.

The order differs by protocol, because the stores differ:

* **vm-import** sends in file order (series by series): VictoriaMetrics takes
  samples in any order, of any age within its retention.
* **remote-write** sends in time order. A Prometheus TSDB head (Mimir's,
  Thanos Receive's and Cortex's ingesters are the same code) refuses a sample
  more than an hour older than the newest it holds ("out of bounds") unless
  an out-of-order window is configured: in file order, every series after the
  first would be refused back to an hour before the first one's end. A first
  pass therefore spools the samples to temporary files, one per
  :data:`SLAB_S` of time, 24 bytes a sample on disk (about a tenth of the
  text's size); the second sends slab after slab, each series' samples in
  time order within it.

Sending the same samples twice (a load stopped half way and run again with
:attr:`Existing.WRITE`; the order and batches are the same each time for the
same ``batch_samples``) was tried on both stores:

* VictoriaMetrics 1.79 keeps both copies of a sample unless it runs with
  ``-dedup.minScrapeInterval`` (1ms is enough: identical timestamps
  collapse), so counts over time double; run it with that flag for a load
  that may be repeated. (It also drops, with only a log line, samples older
  than its ``-retentionPeriod`` counted back from today.)
* Prometheus 2.42 refuses a remote-write request holding a sample it already
  has (HTTP 400 "out of order sample" or "out of bounds", the request rolled
  back whole), so a batch sent before is refused and changes nothing: with
  :attr:`Existing.WRITE` such a refusal counts as already held, and the load
  goes on.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import numpy as np
import numpy.typing as npt

from inference_obs.errors import ConfigurationError, DatasetError, SourceError
from inference_obs.load import wire
from inference_obs.load.client import WireProtocol, WriteClient
from inference_obs.query import Matcher, Selector
from inference_obs.samples import Floats, Ints, Labels, SampleSet, describe
from inference_obs.source.base import Source
from inference_obs.source.dataset.reader import MANIFEST, SAMPLES, read_manifest
from inference_obs.source.limits import BATCH_SAMPLES
from inference_obs.source.openmetrics.reader import BLOCK_BYTES, OpenMetricsReader

__all__ = ["SLAB_S", "Existing", "LoadResult", "Progress", "check_not_loaded", "load_dataset"]

#: Seconds of samples sent together in time order to a remote-write store: half the
#: hour a Prometheus head accepts behind its newest sample, so no slab is out of bounds.
SLAB_S = 1800.0
# A spooled sample: series index, timestamp (ms), value.
_RECORD = np.dtype([("series", "<i8"), ("t_ms", "<i8"), ("value", "<f8")])
# A batch: each sample's series index, time (int64 ms) and value.
_Batch = tuple[Ints, Ints, Floats]
# What Prometheus (and its descendants) answer for a sample they already hold.
_HELD = ("out of order sample", "out of bounds", "duplicate sample for timestamp")


class Existing(Enum):
    """What a load does when the store already holds series of the dataset in its window."""

    #: Refuse before sending anything (the default).
    REFUSE = "refuse"
    #: Send every sample anyway: resumes a load that stopped (see the module's notes).
    WRITE = "write"


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a load has got.

    Attributes
    ----------
    samples
        Samples the store accepted so far.
    series
        Series with at least one accepted sample.
    fraction
        Share of the work done, 0 to 1 (of the file read for vm-import; of
        the spooled samples sent for remote-write).
    held
        Samples in requests the store refused as already held (only with
        :attr:`Existing.WRITE`).
    stage
        ``"sending"``, or ``"spooling"`` while remote-write reads the file
        into time order.
    """

    samples: int
    series: int
    fraction: float
    held: int = 0
    stage: str = "sending"


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What a finished load sent: counts, requests, and the largest batch (samples)."""

    samples: int
    series: int
    requests: int
    held: int
    largest_batch: int


@dataclass
class _Tally:
    """Counts kept while sending, and how they are reported."""

    report: Callable[[Progress], None]
    seen: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, np.bool_))
    samples: int = 0
    held: int = 0
    requests: int = 0
    largest: int = 0

    def sent(self, series: npt.NDArray[np.int64], accepted: bool, fraction: float) -> None:
        if self.seen.size <= int(series.max(initial=-1)):
            grown = np.zeros(max(int(series.max()) + 1, 2 * self.seen.size), np.bool_)
            grown[: self.seen.size] = self.seen
            self.seen = grown
        self.requests += 1
        self.largest = max(self.largest, series.size)
        if accepted:
            self.samples += series.size
            self.seen[series] = True
        else:
            self.held += series.size
        self.report(Progress(self.samples, int(self.seen.sum()), fraction, self.held))

    def result(self) -> LoadResult:
        return LoadResult(
            self.samples, int(self.seen.sum()), self.requests, self.held, self.largest
        )


def load_dataset(
    path: Path,
    client: WriteClient,
    *,
    existing: Existing = Existing.REFUSE,
    batch_samples: int = BATCH_SAMPLES,
    before_writing: Callable[[str, Labels], None] | None = None,
    progress: Callable[[Progress], None] | None = None,
    spool: Path | None = None,
) -> LoadResult:
    """Send every sample of the dataset at ``path`` through ``client``.

    Parameters
    ----------
    path
        The dataset directory; its ``samples.om`` must have the SHA-256 its
        manifest lists (checked before anything is sent).
    client
        The store's write client; its protocol sets the order (module notes).
    existing
        :attr:`Existing.WRITE` counts a remote-write request refused as
        already held and goes on; :attr:`Existing.REFUSE` stops there.
    batch_samples
        Most samples in one request: with a block of text, what bounds the
        memory held.
    before_writing
        Called with the first series' name and labels before the first
        request (the check that the store does not hold the dataset yet).
    progress
        Called after every request.
    spool
        Directory for remote-write's time-ordered spool (a temporary one
        inside it, removed afterwards; the system's temporary directory by
        default).

    Raises
    ------
    DatasetError
        The dataset is missing, changed since its manifest, or malformed.
    SourceError
        The store refused a request (its answer in the message).
    SourceUnavailable
        The store could not be reached after bounded retries.
    """
    if batch_samples < 1:
        raise ConfigurationError(f"batch_samples {batch_samples!r}: expected at least 1")
    file = _checked_samples(Path(path))
    report = progress or (lambda _: None)
    tally = _Tally(report)
    send = _Sender(client, existing, tally)
    first = _FirstSeries(before_writing)
    if client.protocol is WireProtocol.VM_IMPORT:
        for chunk, since, until in _chunks(file):
            first.check(chunk)
            total = int(chunk.offsets[-1])
            for lo, (series, t_ms, values) in _batches(chunk, batch_samples):
                share = (lo + series.size) / total
                send(chunk, series, t_ms, values, since + (until - since) * share)
        return tally.result()
    with tempfile.TemporaryDirectory(prefix="inference-obs-load-", dir=spool) as temporary:
        slabs, names, labels = _spool(file, Path(temporary), report, first)
        total = sum(size for size, _ in slabs.values())
        sent = 0
        every = SampleSet(names, labels, np.zeros(len(names) + 1, np.int64), *_EMPTY)
        for slab in sorted(slabs):
            for series, t_ms, values in _read_slab(slabs[slab][1], batch_samples):
                sent += series.size
                send(every, series, t_ms, values, sent / max(total, 1))
    return tally.result()


class _FirstSeries:
    """Runs the check before writing once, on the first series the file holds."""

    def __init__(self, check: Callable[[str, Labels], None] | None) -> None:
        self.pending = check

    def check(self, chunk: SampleSet) -> None:
        if self.pending is None:
            return
        has = np.flatnonzero(np.diff(chunk.offsets) > 0)
        if has.size:
            check, self.pending = self.pending, None
            check(chunk.names[int(has[0])], chunk.labels[int(has[0])])


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.float64))


def check_not_loaded(source: Source, path: Path, name: str, labels: Labels, url: str) -> None:
    """Refuse a store that already holds the series ``name{labels}`` in the dataset's window.

    One read-only ``series`` request through ``source``.

    Raises
    ------
    ConfigurationError
        Naming the store (``url``, without credentials) and the series.
    """
    window = read_manifest(Path(path)).window.window()
    matchers = (Matcher.equal("__name__", name), *(Matcher.equal(k, v) for k, v in labels.items()))
    if source.series(Selector(None, matchers), window):
        raise ConfigurationError(
            f"{url} already holds {describe(name, labels)} in the dataset's window "
            f"{window.start.isoformat()} to {window.end.isoformat()}: it has been loaded "
            "there before (completely or in part); load into an empty store, or give "
            "--existing write to send every sample again (see --help for what each store does)"
        )


class _Sender:
    """Encodes a batch for the client's protocol, sends it, and counts what the store did."""

    def __init__(self, client: WriteClient, existing: Existing, tally: _Tally) -> None:
        self.client, self.existing, self.tally = client, existing, tally
        self.encoded: dict[int, bytes | str] = {}  # each series' labels, encoded once

    def __call__(
        self,
        chunk: SampleSet,
        series: npt.NDArray[np.int64],
        t_ms: npt.NDArray[np.int64],
        values: npt.NDArray[np.float64],
        fraction: float,
    ) -> None:
        starts = np.flatnonzero(np.diff(series, prepend=-1))
        ends = np.append(starts[1:], series.size)
        vm = self.client.protocol is WireProtocol.VM_IMPORT
        parts: list[bytes | str] = []
        for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
            s = int(series[lo])
            head = self.encoded.get(s)
            if head is None:
                name, labels = chunk.names[s], chunk.labels[s]
                head = wire.vm_metric(name, labels) if vm else wire.encode_labels(name, labels)
                self.encoded[s] = head
            if isinstance(head, str):
                parts.append(wire.vm_line(head, t_ms[lo:hi], values[lo:hi]))
            else:
                parts.append(
                    wire.encode_timeseries(head, wire.encode_samples(t_ms[lo:hi], values[lo:hi]))
                )
        if vm:
            body = gzip.compress(
                ("\n".join(p for p in parts if isinstance(p, str)) + "\n").encode(), 1
            )
        else:
            body = wire.snappy_block(b"".join(p for p in parts if isinstance(p, bytes)))
        status, text = self.client.post(body)
        held = (
            not vm
            and status == 400
            and self.existing is Existing.WRITE
            and any(reason in text for reason in _HELD)
        )
        if not 200 <= status < 300 and not held:
            raise SourceError(
                f"{self.client.url}: HTTP {status}: {text or '(no text)'}; the store refused "
                f"a batch after {self.tally.samples:,} samples were accepted"
                + (
                    " (a remote-write store refuses samples older than an hour before its "
                    "newest one: load into a store that holds nothing newer)"
                    if not vm and "out of bounds" in text
                    else ""
                )
            )
        self.tally.sent(series, not held, fraction)


def _checked_samples(path: Path) -> Path:
    """The dataset's ``samples.om`` after checking it has the SHA-256 its manifest lists."""
    manifest = read_manifest(path)
    file = path / SAMPLES
    hasher = hashlib.sha256()
    try:
        with file.open("rb") as data:
            while block := data.read(BLOCK_BYTES):
                hasher.update(block)
    except FileNotFoundError:
        raise DatasetError(f"{file}: listed in {MANIFEST} but missing") from None
    except OSError as exc:
        raise DatasetError(f"{file}: cannot be read ({exc.strerror})") from None
    if hasher.hexdigest() != manifest.files[SAMPLES]:
        raise DatasetError(
            f"{file}: SHA-256 is {hasher.hexdigest()} but {MANIFEST} says "
            f"{manifest.files[SAMPLES]}; the file changed"
        )
    return file


def _chunks(file: Path) -> Iterator[tuple[SampleSet, float, float]]:
    """The file's samples a block at a time, and the share of the file they span (from, to).

    A block's samples span from where the last samples handed out ended to
    the share read so far (the last, to the end): text carried over to the
    next block is counted there.
    """
    reader = OpenMetricsReader(str(file))
    size = max(file.stat().st_size, 1)
    done, since = 0, 0.0
    with file.open("rb") as data:
        while block := data.read(BLOCK_BYTES):
            done += len(block)
            reader.feed(block)
            chunk = reader.take()
            yield chunk, since, done / size
            if chunk.t_ms.size:
                since = done / size
    yield reader.finish(), since, 1.0


def _batches(chunk: SampleSet, size: int) -> Iterator[tuple[int, _Batch]]:
    """The chunk's samples in pieces of at most ``size``, and where each piece starts."""
    counts = np.diff(chunk.offsets)
    series = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    for lo in range(0, series.size, size):
        hi = min(lo + size, series.size)
        yield lo, (series[lo:hi], chunk.t_ms[lo:hi], chunk.values[lo:hi])


def _spool(
    file: Path, directory: Path, report: Callable[[Progress], None], first: _FirstSeries
) -> tuple[dict[int, tuple[int, Path]], tuple[str, ...], tuple[Labels, ...]]:
    """Write every sample to one spool file per slab of time; their sizes, the series.

    The check before writing runs on the first block, not after the whole pass.
    """
    slab_ms = int(SLAB_S * 1000)
    slabs: dict[int, tuple[int, Path]] = {}
    chunk = SampleSet((), (), np.zeros(1, np.int64), *_EMPTY)
    for chunk, _, fraction in _chunks(file):
        first.check(chunk)
        counts = np.diff(chunk.offsets)
        records = np.empty(chunk.t_ms.size, _RECORD)
        records["series"] = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
        records["t_ms"], records["value"] = chunk.t_ms, chunk.values
        # Grouped by slab in one stable sort: each series stays in time order.
        order = np.argsort(chunk.t_ms // slab_ms, kind="stable")
        records = records[order]
        which = chunk.t_ms[order] // slab_ms
        found, starts = np.unique(which, return_index=True)
        ends = np.append(starts[1:], which.size)[: starts.size]  # none for an empty chunk
        for slab, lo, hi in zip(found.tolist(), starts.tolist(), ends.tolist(), strict=True):
            mine = records[lo:hi]
            size, spooled = slabs.get(slab, (0, directory / f"{slab}.bin"))
            with spooled.open("ab") as out:
                mine.tofile(out)
            slabs[slab] = (size + mine.size, spooled)
        report(Progress(0, 0, fraction, stage="spooling"))
    return slabs, chunk.names, chunk.labels


def _read_slab(spooled: Path, size: int) -> Iterator[_Batch]:
    """A slab's samples in batches of at most ``size``, each grouped by series in time order."""
    with spooled.open("rb") as data:
        while (records := np.fromfile(data, _RECORD, count=size)).size:
            # Stable: a series' samples were spooled in time order and stay so.
            order = np.argsort(records["series"], kind="stable")
            records = records[order]
            yield records["series"].copy(), records["t_ms"].copy(), records["value"].copy()
    with contextlib.suppress(OSError):
        spooled.unlink()
