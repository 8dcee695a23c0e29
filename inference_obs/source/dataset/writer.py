"""Observation datasets written: the same input gives the same bytes.

:func:`write_dataset` writes the directory that
:func:`~inference_obs.source.dataset.reader.read_dataset` reads (the format
is described in ``datasets/README.md``), and refuses what would not read back
unchanged: it reads its JSON and CSV back with the reader's own functions.
:func:`check_dataset_out` proves a directory can take a dataset before the work
that fills it starts (a capture's scrapes, an export's queries).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from inference_obs.errors import DatasetError
from inference_obs.samples import SampleSet, Series, describe, is_stale
from inference_obs.source.dataset.manifest import Manifest
from inference_obs.source.dataset.reader import (
    AGGREGATES,
    MANIFEST,
    REQUESTS,
    SAMPLES,
    Dataset,
    json_object,
    read_requests,
)
from inference_obs.source.openmetrics.writer import write_openmetrics

if TYPE_CHECKING:
    import pandas

__all__ = ["check_dataset_out", "write_dataset"]

# Hashing reads this much at a time: large enough to keep the loop cheap.
_HASH_CHUNK = 1 << 20
# What the writability probe writes: one filesystem block, so a full disk refuses it.
_PROBE_BYTES = 4096


def check_dataset_out(path: Path) -> None:
    """Refuse ``path`` unless a dataset can be written there; leave nothing behind.

    ``path`` must be an empty directory or not exist; a file of
    ``_PROBE_BYTES`` is written (and synced) in it, or in the directories that
    would be made for it, then removed with any directory made.

    Raises
    ------
    DatasetError
        One line naming ``path`` and why: not empty, a file, read-only, full.
    """
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise DatasetError(f"{path}: not an empty directory; write a dataset into a new one")
    made = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        handle, probe = tempfile.mkstemp(prefix=".probe-", dir=path)
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(bytes(_PROBE_BYTES))
                file.flush()
                os.fsync(file.fileno())  # a full disk may only say so here
        finally:
            os.unlink(probe)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    finally:
        for directory in made:  # deepest first
            if directory.is_dir():
                directory.rmdir()


def write_dataset(
    path: Path,
    manifest: Manifest,
    series: Iterable[Series],
    *,
    aggregates: Mapping[str, Any] | None = None,
    requests: pandas.DataFrame | None = None,
) -> Dataset:
    """Write a dataset directory; the same input gives the same bytes.

    Parameters
    ----------
    path
        A directory that does not exist yet or is empty.
    manifest
        What was observed; its ``files`` is replaced by the checksums of the
        files written.
    series
        The raw samples; each (name, labels) at most once, no staleness markers
        (OpenMetrics text cannot carry them). Written ordered by name, then labels.
    aggregates
        Published numbers: a mapping of JSON data (str keys, lists or tuples,
        str, int, finite float, bool, None). Tuples read back as lists.
    requests
        Ground-truth request records with a default index and columns of
        int64, float64, bool or text; refused unless CSV reads them back equal.

    Returns
    -------
    Dataset
        What :func:`~inference_obs.source.dataset.reader.read_dataset` reads from ``path``.

    Raises
    ------
    DatasetError
        If ``path`` is not empty or cannot be written (read-only, full), or an
        input cannot be stored exactly; nothing is written then.
        ``manifest.json`` is written last, so a directory without one is an
        interrupted write, never a dataset.
    """
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise DatasetError(f"{path}: not an empty directory; write a dataset into a new one")
    members = sorted(series, key=lambda s: (s.name, tuple(s.labels.items())))
    for one in members:
        if np.any(is_stale(one.values)):
            raise DatasetError(
                f"series {describe(one.name, one.labels)} holds staleness markers, which "
                "OpenMetrics text cannot carry; drop those samples first"
            )
    samples = SampleSet.from_series(members)  # refuses a repeated series
    texts: dict[str, bytes] = {}
    aggregates_back: dict[str, Any] | None = None
    if aggregates is not None:
        texts[AGGREGATES] = _aggregates_text(aggregates)
        aggregates_back = json_object(texts[AGGREGATES], AGGREGATES)
    requests_back = None
    if requests is not None:
        texts[REQUESTS], requests_back = _requests_text(requests)
    written: list[Path] = []
    try:
        path.mkdir(parents=True, exist_ok=True)
        files = {SAMPLES: _write_samples(path / SAMPLES, members, written)}
        for name, data in texts.items():
            written.append(path / name)
            (path / name).write_bytes(data)
            files[name] = hashlib.sha256(data).hexdigest()
        final = manifest.model_copy(update={"files": dict(sorted(files.items()))})
        written.append(path / MANIFEST)
        (path / MANIFEST).write_bytes(_json_text(final.model_dump(mode="json")))
    except BaseException as exc:
        for file in written:
            file.unlink(missing_ok=True)
        if isinstance(exc, OSError):  # read-only, full: one line, not a traceback
            raise DatasetError(f"{path}: cannot be written ({exc.strerror or exc})") from None
        raise
    return Dataset(path, final, samples, aggregates_back, requests_back)


def _write_samples(file: Path, members: Sequence[Series], written: list[Path]) -> str:
    """Write samples.om and return its SHA-256 (hashing the file as written)."""
    written.append(file)
    # newline="" writes "\n" as is on every platform, so the bytes never vary.
    with file.open("w", encoding="utf-8", newline="") as out:
        write_openmetrics(members, out)
    digest = hashlib.sha256()
    with file.open("rb") as data:
        while chunk := data.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _json_text(data: object) -> bytes:
    text = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


def _aggregates_text(aggregates: Mapping[str, Any]) -> bytes:
    if not isinstance(aggregates, Mapping):
        raise DatasetError(f"aggregates must be a mapping, not {type(aggregates).__name__}")
    _check_json_data(aggregates, "aggregates")
    return _json_text(dict(aggregates))


def _check_json_data(value: object, where: str) -> None:
    """Refuse what JSON would change or drop, naming where it is."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise DatasetError(f"{where}: key {key!r} is not a string")
            _check_json_data(item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json_data(item, f"{where}[{i}]")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise DatasetError(f"{where}: {value!r} has no JSON form; use null or a string")
    elif not (value is None or isinstance(value, str | int | bool)):
        raise DatasetError(f"{where}: {type(value).__name__} is not JSON data")


def _requests_text(requests: pandas.DataFrame) -> tuple[bytes, pandas.DataFrame]:
    """CSV bytes of the records, and the frame read back from them (checked equal)."""
    import pandas  # here, not at the top: `import inference_obs` stays free of pandas

    if not isinstance(requests, pandas.DataFrame):
        raise DatasetError(f"requests must be a pandas DataFrame, not {type(requests).__name__}")
    if not requests.index.equals(pandas.RangeIndex(len(requests))):
        raise DatasetError("requests: the CSV keeps columns only; reset_index() first")
    names = list(requests.columns)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise DatasetError(f"requests: columns must be non-empty strings, got {names!r}")
    if len(set(names)) != len(names):
        raise DatasetError(f"requests: repeated column names in {names!r}")
    out = io.StringIO()
    requests.to_csv(out, index=False, lineterminator="\n")
    data = out.getvalue().encode("utf-8")
    back = read_requests(data, REQUESTS)
    try:
        pandas.testing.assert_frame_equal(back, requests, check_exact=True)
    except AssertionError as exc:
        problem = " ".join(str(exc).split())
        raise DatasetError(
            f"requests: CSV would not read them back unchanged ({problem}); use int64, "
            "float64, bool or text columns"
        ) from None
    return data, back
