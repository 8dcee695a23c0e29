"""A dataset's ``samples.om``, read in one pass, and the columnar cache that makes rereading fast.

:func:`read_samples` streams the file through
:class:`~inference_obs.source.openmetrics.reader.OpenMetricsReader` block by
block while another thread reads the blocks ahead and computes the SHA-256
(reading and ``hashlib`` release the GIL), so the text is never in memory
whole and checking the checksum costs no extra pass. The checksum decides
first: a file that changed is reported as changed, whatever its text.

A large file (:attr:`SampleCache.min_bytes`, 64 MiB by default) is parsed
once: its columns (series, int64 milliseconds, float64 values) are then kept
in ``$XDG_CACHE_HOME/inference-obs/samples/`` (``~/.cache/...`` without it)
under the file's SHA-256 and a fingerprint of the reader's own code, and
used only when the manifest names that SHA-256, so the cache can never
answer for other bytes, nor for text a changed reader would read
differently. An unreadable, truncated or inconsistent entry is ignored (zip
CRCs and shape checks) and rewritten. Entries take about 16 bytes per
sample; past :attr:`SampleCache.max_bytes` in all (4 GiB by default) the
least recently used are removed after each write.

Whether the file still has that SHA-256 is known without reading it again
when nothing has touched it since it was last hashed. Each time a hash
proves the manifest right, a *stamp* beside the entry records what the file
system says of the file (device, inode, size, modification and change
times in nanoseconds, from an open descriptor, which makes a network file
system revalidate them); a later read whose file shows exactly that
identity uses the entry without hashing (6.4 GB of text cost about 5 s to
hash). This is as safe as hashing against every change made through the
file system: any write, truncation, rename over the file or ``utime``
sets the change time to the current time, which no program can set back,
so a changed file never shows the recorded identity and is hashed again,
and reported as changed. A stamp is written only when the file's last
change lies :attr:`SampleCache.settled_s` before the hash began (time
stamps have a granularity: a change in the same tick as the recorded one
would otherwise keep the same change time) and the identity is the same
after the hash as before it. What a stamp cannot see is a change made
around the file system (a disk edited underneath it); the samples then
still come from the entry, parsed from bytes that were proved right. A
stamp is named after the entry and the file's resolved path, so a copy
elsewhere is hashed once on its own; ``read_dataset(path, cache=None)``
always parses and hashes.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import logging
import os
import time
import zipfile
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from inference_obs import samples as _samples_module
from inference_obs.errors import DatasetError, TimeBudgetExceeded
from inference_obs.samples import Labels, SampleSet
from inference_obs.source.openmetrics import (
    grammar as _grammar,
    reader as _reader,
    scan as _scan,
    tokens as _tokens,
)
from inference_obs.source.openmetrics.reader import BLOCK_BYTES, OpenMetricsReader

__all__ = ["DEFAULT_CACHE", "SampleCache", "read_samples"]

log = logging.getLogger("inference_obs.source.dataset")

# Blocks read (and hashed) ahead of the parser: bounds the memory held.
_READ_AHEAD = 2


@dataclass(frozen=True, slots=True)
class SampleCache:
    """Where parsed samples of large dataset files are kept, and from what size.

    Attributes
    ----------
    directory
        The cache directory; ``None`` for ``$XDG_CACHE_HOME/inference-obs/samples``
        (``~/.cache/inference-obs/samples`` when XDG_CACHE_HOME is unset),
        resolved at each read.
    min_bytes
        Smaller ``samples.om`` files are parsed every time (a few MB parse
        faster than a cache entry is written).
    max_bytes
        Entries beyond this total are removed after each write, least
        recently used first (reading an entry marks it used); the entry just
        written always stays. Default 4 GiB: about ten fleets of 25 million
        samples (16 bytes a sample).
    settled_s
        Seconds a file's last change must lie before the start of its hash
        for a stamp to vouch for it later. Default 2 s: the coarsest time
        stamps of common file systems (FAT's modification times) tick every
        2 s, ext3's and HFS+'s every second, the others' every nanosecond.
    """

    directory: Path | None = None
    min_bytes: int = 64 << 20
    max_bytes: int = 4 << 30
    settled_s: float = 2.0

    def path(self) -> Path:
        """The cache directory this cache uses now."""
        if self.directory is not None:
            return Path(self.directory)
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        return Path(base) / "inference-obs" / "samples"


#: The cache :func:`~inference_obs.source.dataset.reader.read_dataset` uses unless told otherwise.
DEFAULT_CACHE = SampleCache()


def read_samples(
    file: Path,
    digest: str,
    *,
    manifest: str,
    cache: SampleCache | None,
    deadline: float | None = None,
) -> SampleSet:
    """Every sample of ``file``, which must have SHA-256 ``digest``.

    Parameters
    ----------
    file
        The dataset's ``samples.om``.
    digest
        Its SHA-256 (lowercase hex) as the manifest lists it.
    manifest
        How to name the manifest in the checksum error.
    cache
        Where parsed columns of large files are kept, or ``None`` for no cache.
    deadline
        A :func:`time.monotonic` time; reading stops after it, between blocks.

    Raises
    ------
    DatasetError
        The file is missing or unreadable, its SHA-256 is not ``digest`` (said
        before any problem in its text), or its text is malformed.
    TimeBudgetExceeded
        When ``deadline`` passed before the file was read.
    """
    budget = _Budget(file, deadline)
    try:
        size = file.stat().st_size
        entry = _entry(cache.path(), digest) if cache and size >= cache.min_bytes else None
        seen = _Seen(file, digest, cache.settled_s) if cache and entry is not None else None
        if entry is not None and seen is not None and entry.is_file():
            if seen.vouched_by(_stamp(entry, file)):
                cached = _load(entry)
            else:
                # Hash (most of the time) while another thread reads the columns back.
                with ThreadPoolExecutor(max_workers=1) as pool:
                    hashed = pool.submit(_sha256, file, budget)
                    cached = _load(entry)
                    actual = hashed.result()
                _check(file, actual, digest, manifest)
                seen.vouch(_stamp(entry, file))
            if cached is not None:
                with contextlib.suppress(OSError):
                    os.utime(entry)  # used now: the last to be evicted
                return cached
        samples = _parse(file, digest, manifest, budget)
    except FileNotFoundError:
        raise DatasetError(f"{file}: listed in {manifest} but missing") from None
    except TimeBudgetExceeded:  # a TimeoutError, so an OSError too: not a read failure
        raise
    except OSError as exc:
        raise DatasetError(f"{file}: cannot be read ({exc.strerror})") from None
    if cache and entry is not None and seen is not None:
        _store(cache.path(), digest, samples)
        seen.vouch(_stamp(entry, file))
        _evict(cache.path(), keep=entry, max_bytes=cache.max_bytes)
    return samples


#: What the file system says of a file's bytes: device, inode, size, mtime and ctime (ns).
Identity = tuple[int, int, int, int, int]


def _identity(file: Path) -> Identity:
    """``file``'s identity, from an open descriptor (a network file system revalidates on open)."""
    with file.open("rb") as handle:
        st = os.fstat(handle.fileno())
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Seen:
    """A file's identity before it is hashed, and whether a stamp may vouch for it later."""

    def __init__(self, file: Path, digest: str, settled_s: float) -> None:
        self.file, self.digest = file, digest
        self.started_ns = time.time_ns()
        self.before = _identity(file)
        # Taken before the hash: a change after this instant gets a later change time.
        self.settled = max(self.before[3:]) <= self.started_ns - round(settled_s * 1e9)

    def _record(self) -> dict[str, object]:
        return {"file": str(self.file.resolve()), "sha256": self.digest, "identity": self.before}

    def vouched_by(self, stamp: Path) -> bool:
        """Whether ``stamp`` recorded this identity after a hash proved ``digest``."""
        try:
            recorded = json.loads(stamp.read_bytes())
        except (OSError, ValueError):
            return False
        return bool(recorded == json.loads(json.dumps(self._record())))

    def vouch(self, stamp: Path) -> None:
        """After a hash proved ``digest``: record the identity, if settled and unchanged since."""
        if not self.settled or _identity(self.file) != self.before:
            return
        temporary = stamp.with_name(f".{stamp.name}.{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps(self._record()), encoding="utf-8")
            os.replace(temporary, stamp)
        except OSError as exc:
            log.debug("sample cache stamp %s not written: %s", stamp, exc)
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)


def _stamp(entry: Path, file: Path) -> Path:
    """Where the stamp of ``file`` for the cache entry ``entry`` is kept."""
    where = hashlib.sha256(os.fsencode(file.resolve())).hexdigest()[:16]
    return entry.with_name(f"{entry.stem}.{where}.stamp")


def _check(file: Path, actual: str, digest: str, manifest: str) -> None:
    if actual != digest:
        raise DatasetError(
            f"{file}: SHA-256 is {actual} but {manifest} says {digest}; the file changed"
        )


@dataclass(frozen=True, slots=True)
class _Budget:
    """When reading ``file`` must stop (a :func:`time.monotonic` time, or None)."""

    file: Path
    deadline: float | None

    def check(self, done: int) -> None:
        """Raise once the deadline has passed, saying how far the read got (bytes)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TimeBudgetExceeded(
                f"{self.file}: the time budget ran out while reading it "
                f"({done / 2**20:.1f} MiB read)"
            )


def _sha256(file: Path, budget: _Budget) -> str:
    hasher = hashlib.sha256()
    done = 0
    with file.open("rb") as data:
        while chunk := data.read(BLOCK_BYTES):
            budget.check(done)
            hasher.update(chunk)
            done += len(chunk)
    return hasher.hexdigest()


def _parse(file: Path, digest: str, manifest: str, budget: _Budget) -> SampleSet:
    """Parse while another thread reads and hashes; the checksum is checked before any text problem.

    The other thread reads each block and adds it to the hash (both release
    the GIL), :data:`_READ_AHEAD` blocks ahead of the parser, so this thread
    only parses.
    """
    reader = OpenMetricsReader(str(file))
    hasher = hashlib.sha256()
    problem: DatasetError | None = None
    samples: SampleSet | None = None
    with ThreadPoolExecutor(max_workers=1) as pool, file.open("rb") as data:

        def read() -> bytes:  # the one worker runs these in order
            chunk = data.read(BLOCK_BYTES)
            hasher.update(chunk)
            return chunk

        ahead = deque(pool.submit(read) for _ in range(_READ_AHEAD))
        done = 0
        while chunk := ahead.popleft().result():
            budget.check(done)
            done += len(chunk)
            ahead.append(pool.submit(read))
            if problem is None:
                try:
                    reader.feed(chunk)
                except DatasetError as exc:
                    problem = exc  # hash on: a changed file is reported as changed
        for rest in ahead:
            rest.result()
    if problem is None:
        try:
            samples = reader.finish()
        except DatasetError as exc:
            problem = exc
    _check(file, hasher.hexdigest(), digest, manifest)
    if problem is not None:
        raise problem
    assert samples is not None
    return samples


@cache
def _reader_fingerprint() -> str:
    """A digest of the code that turns text into samples: a change to it retires old entries."""
    code = hashlib.sha256()
    for module in (_reader, _scan, _tokens, _grammar, _samples_module):
        code.update(Path(module.__file__ or "").read_bytes())
    return code.hexdigest()[:16]


def _entry(directory: Path, digest: str) -> Path:
    return directory / f"{digest}-{_reader_fingerprint()}.npz"


def _load(entry: Path) -> SampleSet | None:
    """The columns kept in the cache entry ``entry``, or None if it is unusable."""
    try:
        columns = _arrays(entry)
        offsets, t_ms, values = columns["offsets"], columns["t_ms"], columns["values"]
        names, labels = _series(columns["series"].tobytes())
        consistent = (
            offsets.dtype == np.int64
            and t_ms.dtype == np.int64
            and values.dtype == np.float64
            and offsets.ndim == t_ms.ndim == values.ndim == 1
            and offsets.size == len(names) + 1
            and int(offsets[0]) == 0
            and int(offsets[-1]) == t_ms.size == values.size
            and bool(np.all(np.diff(offsets) >= 0))
        )
    except Exception as exc:  # any damage to a cache entry only means parsing again
        log.debug("ignoring sample cache entry %s: %s", entry, exc)
        return None
    if not consistent:
        log.debug("ignoring inconsistent sample cache entry %s", entry)
        return None
    for array in (offsets, t_ms, values):
        array.flags.writeable = False
    return SampleSet(names, labels, offsets, t_ms, values)


def _series(text: bytes) -> tuple[tuple[str, ...], tuple[Labels, ...]]:
    """The series' names and label sets kept in an entry, made with the cyclic collector paused.

    The fleet's 17,472 series are some 250,000 small lists and tuples, none
    in a cycle: with the collector on, making them set off three full
    collections, each scanning every object of the process for nothing
    (0.3 s). It is paused here only, and switched back on as it was.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        series = json.loads(text.decode("utf-8"))
        names = tuple(str(name) for name, _ in series)
        labels = tuple(Labels((str(k), str(v)) for k, v in pairs) for _, pairs in series)
    finally:
        if enabled:
            gc.enable()
    return names, labels


# Room for any .npy header numpy writes (numpy's own reader refuses longer ones).
_NPY_HEADER_MAX = 10_000


def _arrays(entry: Path) -> dict[str, npt.NDArray[Any]]:
    """The arrays of an uncompressed ``.npz``, each member read whole in one call.

    What ``numpy.load`` gives, about five times faster on 400 MB: numpy
    copies a zip member out in small pieces. Reading a member to its end
    checks its CRC-32 (``zipfile.BadZipFile`` otherwise).
    """
    arrays = {}
    with zipfile.ZipFile(entry) as archive:
        for name in archive.namelist():
            with archive.open(name) as member:
                data = member.read()
            header = io.BytesIO(data[:_NPY_HEADER_MAX])
            version = np.lib.format.read_magic(header)
            read_header = {
                (1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0,
            }[version]
            shape, fortran_order, dtype = read_header(header)
            if fortran_order or len(shape) != 1 or dtype.hasobject:
                raise ValueError(f"{name}: not a flat array of numbers")
            arrays[name.removesuffix(".npy")] = np.frombuffer(
                data, dtype=dtype, count=shape[0], offset=header.tell()
            )
    return arrays


def _store(directory: Path, digest: str, samples: SampleSet) -> None:
    """Keep ``samples`` under ``digest``; a failure to write is logged, never raised."""
    entry = _entry(directory, digest)
    temporary = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    series = [
        [name, list(labels.items())]
        for name, labels in zip(samples.names, samples.labels, strict=True)
    ]
    text = json.dumps(series, ensure_ascii=False).encode("utf-8")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with temporary.open("wb") as out:
            np.savez(
                out,
                offsets=samples.offsets,
                t_ms=samples.t_ms,
                values=samples.values,
                series=np.frombuffer(text, dtype=np.uint8),
            )
        os.replace(temporary, entry)  # atomic: readers see a whole entry or none
    except OSError as exc:
        log.debug("sample cache entry %s not written: %s", entry, exc)
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def _evict(directory: Path, *, keep: Path, max_bytes: int) -> None:
    """Remove the least recently used entries beyond ``max_bytes`` in all, never ``keep``.

    Entries of other files and of other reader versions count alike; an
    entry that cannot be read or removed is left, never an error.
    """
    entries = []
    for entry in directory.glob("*.npz"):
        with contextlib.suppress(OSError):  # another process may have removed it
            stat = entry.stat()
            entries.append((stat.st_mtime, stat.st_size, entry))
    total = 0
    for _, size, entry in sorted(entries, key=lambda e: (e[2] != keep, -e[0])):
        total += size
        if total > max_bytes and entry != keep:
            log.debug("evicting sample cache entry %s", entry)
            with contextlib.suppress(OSError):
                entry.unlink()
    for stamp in directory.glob("*.stamp"):  # a stamp vouches only for its entry's file
        if not stamp.with_name(f"{stamp.name.split('.')[0]}.npz").exists():
            with contextlib.suppress(OSError):
                stamp.unlink()
