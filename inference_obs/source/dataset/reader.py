"""Observation datasets on disk: what a dataset directory holds, read and checked.

A dataset is a directory (the format is described in ``datasets/README.md``)::

    manifest.json     the Manifest; ``files`` maps each data file to its SHA-256
    samples.om        every raw sample, OpenMetrics text promtool backfills as is
    aggregates.json   optional: published numbers, one JSON object
    requests.csv      optional: ground-truth request records of synthetic data

:func:`read_dataset` checks everything before it returns anything: the
manifest against its schema, every checksum, that no unlisted file lies in
the directory, and every line of the samples. ``samples.om`` is streamed
(hashed while it is parsed, never in memory whole), and the parsed samples of
a large one are kept in a cache named by its checksum; rereading a file
nothing has changed since its last hash costs neither parsing nor hashing
(:mod:`~inference_obs.source.dataset.samples_file` says why that is safe).
:func:`~inference_obs.source.dataset.writer.write_dataset` writes one, and
reads back what it writes with :func:`json_object` and :func:`read_requests`.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic

from inference_obs.documents import json_document
from inference_obs.errors import DatasetError, DocumentError
from inference_obs.samples import SampleSet
from inference_obs.source.dataset.manifest import Manifest, validation_problems
from inference_obs.source.dataset.memory import check_fits
from inference_obs.source.dataset.samples_file import DEFAULT_CACHE, SampleCache, read_samples

if TYPE_CHECKING:
    import pandas

__all__ = [
    "AGGREGATES",
    "MANIFEST",
    "REQUESTS",
    "SAMPLES",
    "Dataset",
    "json_object",
    "read_dataset",
    "read_manifest",
    "read_requests",
]

#: File names of a dataset; only these may appear in a dataset directory.
MANIFEST = "manifest.json"
SAMPLES = "samples.om"
AGGREGATES = "aggregates.json"
REQUESTS = "requests.csv"
_DATA_FILES = (SAMPLES, AGGREGATES, REQUESTS)
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True, eq=False)
class Dataset:
    """An observation dataset, as read from (or just written to) a directory.

    Attributes
    ----------
    path
        The dataset directory.
    manifest
        Its ``manifest.json``, with ``files`` holding every data file's SHA-256.
    samples
        Every raw sample; series in the order of ``samples.om``, which the
        writer orders by metric name, then labels.
    aggregates
        The published numbers of ``aggregates.json``, or ``None``.
    requests
        The ground-truth request records of ``requests.csv``, or ``None``.
    ignored
        Hidden entries of the directory that were not read (``.DS_Store``),
        sorted; empty for a dataset just written.
    """

    path: Path
    manifest: Manifest
    samples: SampleSet
    aggregates: Mapping[str, Any] | None
    requests: pandas.DataFrame | None
    ignored: tuple[str, ...] = ()


def read_dataset(
    path: Path, *, cache: SampleCache | None = DEFAULT_CACHE, deadline: float | None = None
) -> Dataset:
    """Read and check a dataset directory.

    Parameters
    ----------
    path
        The dataset directory.
    cache
        Where the parsed samples of a large ``samples.om`` are kept between
        reads (by default under the user's cache directory, for files from
        64 MiB), or ``None`` to parse and hash every time. With a cache, a
        file is hashed again only when the file system shows it changed
        since its last hash; see :mod:`inference_obs.source.dataset.samples_file`.
    deadline
        A :func:`time.monotonic` time after which reading stops with
        :class:`~inference_obs.errors.TimeBudgetExceeded` (checked between
        blocks of ``samples.om``); ``None`` for no limit.

    Returns
    -------
    Dataset
        Series ordered as in ``samples.om``; timestamps as promtool stores them.

    Raises
    ------
    DatasetError
        Naming the file (and for ``samples.om`` the line) and the problem: a
        missing or invalid manifest (unknown fields included), a checksum
        mismatch, a file the manifest does not list, malformed data; or a
        dataset whose report would not fit this machine's memory, naming the
        route through a store (:mod:`~inference_obs.source.dataset.memory`).
    TimeBudgetExceeded
        When ``deadline`` passed while reading.
    """
    path = Path(path)
    manifest = read_manifest(path)
    ignored = []
    for entry in sorted(path.iterdir()):
        if entry.name.startswith("."):
            ignored.append(entry.name)
        elif entry.name != MANIFEST and entry.name not in manifest.files:
            raise DatasetError(
                f"{entry}: not listed in {MANIFEST} files; a dataset holds only listed files "
                "(hidden files and folders, named with a leading '.', are ignored)"
            )
    contents = {
        name: _checked_bytes(path / name, digest)
        for name, digest in manifest.files.items()
        if name != SAMPLES
    }
    # Past this machine's memory, refuse now, naming the route through a store.
    window = manifest.window.window()
    check_fits(path / SAMPLES, path, window.seconds, manifest.scrape_interval_seconds)
    # Streamed: the text is never in memory whole, and its checksum is checked as it is read.
    samples = read_samples(
        path / SAMPLES, manifest.files[SAMPLES], manifest=MANIFEST, cache=cache, deadline=deadline
    )
    aggregates = None
    if AGGREGATES in contents:
        aggregates = json_object(contents[AGGREGATES], str(path / AGGREGATES))
    requests = None
    if REQUESTS in contents:
        requests = read_requests(contents[REQUESTS], str(path / REQUESTS))
    return Dataset(path, manifest, samples, aggregates, requests, tuple(ignored))


def read_manifest(path: Path) -> Manifest:
    """The checked manifest of the dataset directory ``path``, without reading its samples.

    Raises
    ------
    DatasetError
        No directory there, or a missing or invalid manifest (named, with each
        offending field).
    """
    path = Path(path)
    if not path.is_dir():
        raise DatasetError(f"{path}: no dataset directory there")
    return _read_manifest(path / MANIFEST)


def _read_manifest(file: Path) -> Manifest:
    try:
        text = file.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{file}: missing; every dataset has a manifest") from None
    except OSError as exc:
        raise DatasetError(f"{file}: cannot be read ({exc.strerror})") from None
    try:
        manifest = Manifest.model_validate(json_object(text, str(file)))
    except pydantic.ValidationError as exc:
        raise DatasetError(f"{file}: {validation_problems(exc)}") from None
    for name, digest in manifest.files.items():
        if name not in _DATA_FILES:
            raise DatasetError(
                f"{file}: files lists {name!r}; a dataset's data files are {list(_DATA_FILES)}"
            )
        if not _SHA256_HEX.fullmatch(digest):
            raise DatasetError(f"{file}: files[{name!r}] is not a lowercase SHA-256 hex digest")
    if SAMPLES not in manifest.files:
        raise DatasetError(f"{file}: files does not list {SAMPLES}, which every dataset has")
    return manifest


def _checked_bytes(file: Path, digest: str) -> bytes:
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise DatasetError(f"{file}: listed in {MANIFEST} but missing") from None
    except OSError as exc:
        raise DatasetError(f"{file}: cannot be read ({exc.strerror})") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise DatasetError(
            f"{file}: SHA-256 is {actual} but {MANIFEST} says {digest}; the file changed"
        )
    return data


def json_object(data: bytes, file: str) -> dict[str, Any]:
    """Parse a JSON object under :mod:`inference_obs.documents`' rules (finite, unique keys)."""
    try:
        value = json_document(data.decode("utf-8"), file)
    except DocumentError as exc:
        raise DatasetError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{file}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise DatasetError(f"{file}: must hold a JSON object, not {type(value).__name__}")
    return value


def read_requests(data: bytes, file: str) -> pandas.DataFrame:
    import pandas  # here, not at the top: `import inference_obs` stays free of pandas

    # pandas 2 needs the round-trip float parser to read back the exact doubles
    # to_csv wrote; pandas 3 parses exactly by default and deprecates the option.
    floats: dict[str, Any] = (
        {"float_precision": "round_trip"} if int(pandas.__version__.split(".")[0]) < 3 else {}
    )
    try:
        # Only an empty cell is missing (not "NA", "null", ...).
        frame: pandas.DataFrame = pandas.read_csv(
            io.BytesIO(data),
            encoding="utf-8",
            keep_default_na=False,
            na_values=[""],
            low_memory=False,  # one pass, so no DtypeWarning about mixed chunks
            **floats,
        )
    except ValueError as exc:  # pandas' ParserError and EmptyDataError are ValueErrors
        problem = " ".join(str(exc).split())
        raise DatasetError(f"{file}: not a CSV table with a header ({problem})") from None
    return frame
