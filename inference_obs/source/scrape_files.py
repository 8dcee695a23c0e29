"""Saved ``/metrics`` answers, read back as the scrapes they were: ``dataset from-scrapes``.

Two forms are read; a file is in the first when it holds a marker line.

**Marked** (several scrapes in one file, any targets)::

    # SCRAPE 2026-05-01T12:00:00Z vllm=http://10.0.0.1:8000/metrics
    ...the answer, as the endpoint gave it...
    # SCRAPE 1777636815.5 http://10.0.0.1:9400/metrics
    ...

Each ``# SCRAPE TIME TARGET`` line starts a scrape that runs to the next
marker or the end of the file. TIME is unix seconds (``1777636815.5``) or
ISO 8601 with an offset (``2026-05-01T12:00:15+00:00``); TARGET is the URL
scraped, ``JOB=URL`` to name its job (default ``capture``). A shell loop
makes such a file::

    while sleep 15; do
      echo "# SCRAPE $(date +%s.%N) http://10.0.0.1:8000/metrics"
      curl -s http://10.0.0.1:8000/metrics
    done >> scrapes.prom

**Named** (one scrape a file): ``[JOB=]HOST[:PORT]@TIME.EXT``, e.g.
``vllm=10.0.0.1:8000@1777636815.5.prom``; TIME as above, or compact UTC
``20260501T120015Z`` (``.123`` milliseconds allowed).

Neither form may hold credentials: a marker's ``user:password@`` is refused,
and so is a name's (``vllm=user:password@10.0.0.1:8000@TIME.prom``), without
echoing them. A file is named in errors and in the dataset's methodology with
any ``user:password@`` of its name shown as ``<credentials>@`` (:func:`_shown`).

The answer must be Prometheus text format (what exporters serve by default);
its samples are stamped with the scrape's time, as :func:`capture
<inference_obs.source.capture.capture>` stamps them.
"""

from __future__ import annotations

import contextlib
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError, DatasetError
from inference_obs.source.capture import Recording
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.openmetrics.exposition import parse_exposition
from inference_obs.source.scrape import Target, parse_target
from inference_obs.version import __version__

__all__ = ["MARKER", "SavedScrape", "dataset_from_scrapes", "read_scrape_files"]

#: The line that starts a scrape in the marked form.
MARKER = "# SCRAPE "
_COMPACT = re.compile(r"(\d{8}T\d{6}(?:\.\d{1,3})?)Z")
_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_EXTENDED = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T")  # ISO 8601's extended date, then a time
#: A job name and its ``=`` at the start of a file's name (what parse_target accepts as one).
_JOB = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*=")


@dataclass(frozen=True, slots=True)
class SavedScrape:
    """One saved answer: whose, when (unix ms), and where it was read (file and first line)."""

    target: Target
    at_ms: int
    body: bytes
    source: str
    first_line: int


def _shown(path: Path) -> str:
    """``path`` as errors and the manifest name it: a ``user:password@`` in its name hidden.

    In the named form the scrape's time follows the last ``@``; any ``@``
    before that ends userinfo, which is hidden whole (a password may hold
    ``@``, ``=`` or ``:``).

    Examples
    --------
    >>> _shown(Path("saved/vllm=bob:s3cret@10.0.0.1:8000@1777636815.prom"))
    'saved/vllm=<credentials>@10.0.0.1:8000@1777636815.prom'
    >>> _shown(Path("saved/10.0.0.1:8000@1777636815.prom"))
    'saved/10.0.0.1:8000@1777636815.prom'
    """
    spec, at, rest = path.name.rpartition("@")
    if "@" not in spec:
        return str(path)
    job = _JOB.match(spec)
    host = spec.rpartition("@")[2]
    return str(path.with_name(f"{job[0] if job else ''}<credentials>@{host}{at}{rest}"))


def read_scrape_files(paths: Sequence[Path]) -> list[SavedScrape]:
    """Every scrape in ``paths`` (files, or directories whose files are read), in time order.

    Raises
    ------
    DatasetError
        Naming the file (and line) of an unreadable file, a bad marker or
        name, a marker or name that holds credentials, or an answer that does
        not parse.
    """
    files: list[Path] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise DatasetError(f"{_shown(path)}: no such file or directory")
    if not files:
        raise DatasetError("no scrape files given")
    scrapes: list[SavedScrape] = []
    for file in files:
        where = _shown(file)
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise DatasetError(f"{where}: cannot be read ({exc.strerror})") from None
        scrapes.extend(_marked(where, data) if _has_marker(data) else [_named(file, where, data)])
    scrapes.sort(key=lambda s: (s.at_ms, s.target.job, s.target.instance))
    return scrapes


def _has_marker(data: bytes) -> bool:
    return data.startswith(MARKER.encode()) or f"\n{MARKER}".encode() in data


def _marked(file: str, data: bytes) -> Iterable[SavedScrape]:
    lines = data.split(b"\n")
    current: tuple[Target, int, int] | None = None
    body: list[bytes] = []
    for number, line in enumerate(lines, 1):
        if line.startswith(MARKER.encode()):
            if current is not None:
                yield _saved(file, current, body)
            current, body = _marker(file, number, line), []
        elif current is None:
            if line.strip():
                raise DatasetError(
                    f"{file}:{number}: text before the first '{MARKER.strip()}' line"
                )
        else:
            body.append(line)
    if current is not None:
        yield _saved(file, current, body)


def _saved(file: str, current: tuple[Target, int, int], body: list[bytes]) -> SavedScrape:
    target, at_ms, number = current
    # Lines are numbered from the marker, so an error names the file's own line.
    text = b"\n" * number + b"\n".join(body)
    return SavedScrape(target, at_ms, text, file, number + 1)


def _marker(file: str, number: int, line: bytes) -> tuple[Target, int, int]:
    words = line.decode("utf-8", "replace")[len(MARKER) :].split()
    if len(words) != 2:
        raise DatasetError(f"{file}:{number}: expected '{MARKER}TIME TARGET'")
    at_ms = _time(words[0], f"{file}:{number}")
    try:
        target, auth = parse_target(words[1])
    except ConfigurationError as exc:
        raise DatasetError(f"{file}:{number}: {exc}") from None
    if auth is not None:
        raise DatasetError(f"{file}:{number}: the target holds credentials; give the URL without")
    return target, at_ms, number


def _named(file: Path, where: str, data: bytes) -> SavedScrape:
    spec, at, rest = file.name.rpartition("@")
    if not at or not spec:
        raise DatasetError(
            f"{where}: no '{MARKER.strip()} TIME TARGET' line and the name is not "
            "[JOB=]HOST[:PORT]@TIME.EXT; one of the two says when and where it was scraped"
        )
    if "@" in spec:  # user:password@ before the host, refused as in a marker
        raise DatasetError(
            f"{where}: the name's target holds credentials; rename the file without them"
        )
    job, eq, host = spec.rpartition("=")
    try:
        target, _ = parse_target(f"{job if eq else 'capture'}=http://{host}")
    except ConfigurationError as exc:
        raise DatasetError(f"{where}: {exc}") from None
    try:
        at_ms = _time(rest, where)
    except DatasetError:  # the name's time is followed by an extension
        at_ms = _time(rest.rpartition(".")[0], where)
    return SavedScrape(target, at_ms, data, where, 1)


def _time(text: str, where: str) -> int:
    """Unix ms of ``text``: unix seconds, ISO 8601 with an offset, or compact UTC."""
    if _SECONDS.fullmatch(text):
        seconds = float(text)
    else:
        compact = _COMPACT.fullmatch(text)
        iso = f"{compact.group(1)}+00:00" if compact else text
        moment = None
        if compact or _EXTENDED.match(text):
            with contextlib.suppress(ValueError):
                moment = datetime.fromisoformat(iso)
        if moment is None or moment.tzinfo is None:
            raise DatasetError(
                f"{where}: time {text!r} is not unix seconds or ISO 8601 with an offset"
            ) from None
        seconds = moment.timestamp()
    if not math.isfinite(seconds) or seconds > 1e11:
        raise DatasetError(f"{where}: time {text!r} is out of range")
    return round(seconds * 1000)


def dataset_from_scrapes(
    paths: Sequence[Path],
    out: Path,
    *,
    deployments: Sequence[Deployment] | None = None,
    interval_s: float | None = None,
    title: str | None = None,
) -> Dataset:
    """Convert saved scrapes (see the module's forms) into a dataset, as a capture writes it.

    Parameters
    ----------
    paths
        Files, or directories whose files are each read.
    out
        A new or empty directory.
    deployments
        What was observed; None proposes one per model served.
    interval_s
        The nominal scrape interval; None takes the median gap between a
        target's consecutive scrapes.
    title
        One line for the manifest.

    Raises
    ------
    DatasetError
        Naming the file and line of anything that does not read.
    """
    scrapes = read_scrape_files(paths)
    recording = Recording()
    for scrape in scrapes:
        recording.add(
            scrape.target, scrape.at_ms, parse_exposition(scrape.body, source=scrape.source)
        )
    interval = interval_s if interval_s is not None else _median_gap(scrapes)
    files = sorted({s.source for s in scrapes})
    method = [
        f"Converted with inference_obs {__version__} (inference-obs dataset from-scrapes) from "
        f"{len(scrapes)} saved scrapes in {len(files)} file(s): {', '.join(files[:5])}"
        + (", ..." if len(files) > 5 else "")
        + ".",
        "Samples carry the time saved with their scrape; job and instance labels are added as "
        "a Prometheus scrape adds them. Scrapes that failed were not saved, so up is 1 throughout "
        "and gaps are where they would be.",
    ]
    name = title or f"Saved scrapes of {len({s.target for s in scrapes})} target(s)"
    return recording.write(
        out, interval_s=interval, title=name, method=method, deployments=deployments
    )


def _median_gap(scrapes: Sequence[SavedScrape]) -> float:
    """Median seconds between a target's consecutive scrapes."""
    last: dict[tuple[str, str], int] = {}
    gaps: list[int] = []
    for scrape in scrapes:
        key = (scrape.target.job, scrape.target.instance)
        if key in last and scrape.at_ms > last[key]:
            gaps.append(scrape.at_ms - last[key])
        last[key] = scrape.at_ms
    if not gaps:
        raise DatasetError(
            "no target was scraped twice, so no interval can be observed; give --interval"
        )
    return float(statistics.median(gaps)) / 1000
