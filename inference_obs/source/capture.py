"""Observe without Prometheus: scrape ``/metrics`` endpoints read-only into a dataset.

:func:`capture` scrapes every target once per interval, as a Prometheus scrape
job would, and writes what it saw as an observation dataset
(:func:`~inference_obs.source.dataset.writer.write_dataset`), so reports, checks and
backfills read it like any other. What Prometheus does, this does:

* every sample of a scrape carries the time the scrape started (whole
  milliseconds), or the timestamp the exporter exposed, if any; an exposed
  timestamp further than :data:`~inference_obs.source.limits.EXPOSED_TIME_TOLERANCE_S`
  outside the capture (before its first scrape, after the scrape that read it)
  drops its sample, counted in the methodology;
* the target's ``job`` and ``instance`` labels are added; an exposed label of
  the same name moves to ``exported_job``/``exported_instance`` (Prometheus's
  ``honor_labels: false``, the default);
* each scrape adds ``up`` (1, or 0 when it failed), ``scrape_duration_seconds``
  and ``scrape_samples_scraped`` for its target, so a failed scrape is in the
  data, not hidden; the manifest's methodology counts them per target. A
  target's own series of those names and labels is kept as ``exported_up``
  (and so on), so that it cannot overwrite the capture's record;
* a sample whose time is not after its series' last one is dropped (and counted).

A dataset cannot carry staleness markers, so a series that stops (a failed
scrape, a restart) shows as a gap, as it does after a promtool backfill.

:class:`Recording` holds the scrapes in memory (Python lists: some 70 bytes a
sample, about 35 MB for 2,000 series scraped every 15 s for an hour) and
writes the dataset; :func:`~inference_obs.source.scrape_files.read_scrape_files`
feeds it saved scrapes instead. Without deployments given, one is proposed per
model served (:func:`propose_deployments`).
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from inference_obs.deployment import Deployment
from inference_obs.errors import ConfigurationError, DatasetError, InferenceObsError
from inference_obs.samples import Labels, Series
from inference_obs.source.dataset.manifest import Manifest, ManifestWindow
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.writer import check_dataset_out, write_dataset
from inference_obs.source.limits import EXPOSED_TIME_TOLERANCE_S, MIN_INTERVAL_S
from inference_obs.source.openmetrics.exposition import (
    Exposition,
    ExpositionFormat,
    parse_exposition,
)
from inference_obs.source.proposal import PLACEHOLDER, proposal_line, propose_deployments
from inference_obs.source.scrape import ScrapeClient, Target
from inference_obs.version import __version__

__all__ = [
    "PLACEHOLDER",
    "Progress",
    "Recording",
    "capture",
    "proposal_line",
    "propose_deployments",
]

# Reasons listed per target in the methodology; more would drown the manifest.
_REASONS_SHOWN = 3
# The series a capture adds per scrape, as Prometheus adds them: its own record of each scrape.
_HEALTH = ("up", "scrape_duration_seconds", "scrape_samples_scraped")


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a capture stands: rounds of scrapes, scrapes done, failed, seconds since start."""

    rounds: int
    scrapes: int
    failures: int
    elapsed_s: float


@dataclass
class _Log:
    """What happened to one target's scrapes."""

    url: str
    scrapes: int = 0
    failures: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    first_failure_ms: int | None = None


class Recording:
    """Scrapes as Prometheus would store them, written out as a dataset.

    Feed it each scrape with :meth:`add` (or :meth:`fail`), in time order per
    target, then :meth:`write`.
    """

    def __init__(self) -> None:
        self._series: dict[tuple[str, Labels], tuple[list[int], list[float]]] = {}
        self._logs: dict[tuple[str, str], _Log] = {}
        self.dropped = 0
        self.repeated = 0
        self.outside = 0
        self.renamed = 0
        self.first_ms: int | None = None
        self.last_ms: int | None = None

    @property
    def scrapes(self) -> int:
        """Scrapes recorded, failed ones included."""
        return sum(log.scrapes for log in self._logs.values())

    @property
    def failures(self) -> int:
        """Scrapes that failed."""
        return sum(log.failures for log in self._logs.values())

    def add(
        self, target: Target, at_ms: int, scrape: Exposition, duration_s: float | None = None
    ) -> None:
        """Record a scrape of ``target`` that started at ``at_ms`` (unix ms)."""
        log = self._log(target, at_ms)
        log.scrapes += 1
        self.repeated += scrape.repeated
        assert self.first_ms is not None  # set by _log
        tolerance = round(EXPOSED_TIME_TOLERANCE_S * 1000)
        low, high = self.first_ms - tolerance, at_ms + tolerance
        health = _health_labels(target)
        for sample in scrape.samples:
            t_ms = at_ms if sample.t_ms is None else sample.t_ms
            if not low <= t_ms <= high:
                self.outside += 1
                continue
            name, labels = sample.name, _with_target(sample.labels, target)
            if name in _HEALTH and labels == health:
                name = f"exported_{name}"
                self.renamed += 1
            self._append(name, labels, t_ms, sample.value)
        self._health(target, at_ms, 1.0, duration_s, len(scrape.samples) + scrape.repeated)

    def fail(self, target: Target, at_ms: int, reason: str, duration_s: float | None) -> None:
        """Record a scrape of ``target`` at ``at_ms`` that got no usable answer."""
        log = self._log(target, at_ms)
        log.scrapes += 1
        log.failures += 1
        log.reasons[reason] += 1
        if log.first_failure_ms is None:
            log.first_failure_ms = at_ms
        self._health(target, at_ms, 0.0, duration_s, 0)

    def series(self) -> list[Series]:
        """Every recorded series."""
        return [
            Series(name, labels, np.asarray(t_ms, np.float64) / 1000.0, values)
            for (name, labels), (t_ms, values) in self._series.items()
        ]

    def methodology(self) -> list[str]:
        """One line per target (scrapes, failures, their first reasons), then the drops."""
        lines = []
        for (job, instance), log in self._logs.items():
            line = (
                f"Target {log.url} (job {job}, instance {instance}): {log.scrapes} scrapes, "
                f"{log.failures} failed"
            )
            if log.first_failure_ms is not None:
                reasons = "; ".join(
                    f"{reason} (x{count})"
                    for reason, count in log.reasons.most_common(_REASONS_SHOWN)
                )
                line += f", the first at {_iso(log.first_failure_ms)}: {reasons}"
            lines.append(line + " (up is 0 at each failed scrape).")
        if self.dropped:
            lines.append(
                f"{self.dropped:,} samples dropped whose time was not after their series' "
                "previous sample (an exposed timestamp that did not advance), as Prometheus "
                "drops them."
            )
        if self.outside:
            lines.append(
                f"{self.outside:,} samples dropped whose exposed timestamp lay more than "
                f"{EXPOSED_TIME_TOLERANCE_S:g} s outside the capture (before its first scrape or "
                "after the scrape that read them)."
            )
        if self.renamed:
            lines.append(
                f"{self.renamed:,} samples of a target's own {'/'.join(_HEALTH)} series kept as "
                "exported_<name>, so that those names stay the capture's record of its scrapes."
            )
        if self.repeated:
            lines.append(
                f"{self.repeated:,} sample lines repeated a series within one scrape; the "
                "first was kept, as Prometheus keeps it."
            )
        return lines

    def write(
        self,
        out: Path,
        *,
        interval_s: float,
        title: str,
        method: Sequence[str],
        deployments: Sequence[Deployment] | None = None,
    ) -> Dataset:
        """Write the dataset: the recorded series, a manifest, the methodology.

        ``deployments`` None proposes them (:func:`propose_deployments`).

        Raises
        ------
        DatasetError
            If nothing was scraped or ``out`` is not empty.
        """
        if self.first_ms is None or self.last_ms is None:
            raise DatasetError("no scrape was made, so there is nothing to write")
        series = self.series()
        notes: list[str] = []
        if deployments is None:
            deployments, notes = propose_deployments(series)
        # The window holds every sample kept: exposed times may lie a little outside the scrapes.
        times = [t for one in series if one.t_ms.size for t in (one.t_ms[0], one.t_ms[-1])]
        start_ms = min(self.first_ms, *times)
        end_ms = max(self.last_ms, start_ms + max(round(interval_s * 1000), 1), *times)
        manifest = Manifest(
            title=title,
            synthetic=False,
            window=ManifestWindow(start=_moment(int(start_ms)), end=_moment(int(end_ms))),
            scrape_interval_seconds=interval_s,
            deployments=tuple(deployments),
            methodology=(*method, *self.methodology(), *notes),
        )
        return write_dataset(out, manifest, series)

    def _log(self, target: Target, at_ms: int) -> _Log:
        self.first_ms = at_ms if self.first_ms is None else min(self.first_ms, at_ms)
        self.last_ms = at_ms if self.last_ms is None else max(self.last_ms, at_ms)
        return self._logs.setdefault((target.job, target.instance), _Log(target.url))

    def _health(
        self, target: Target, at_ms: int, up: float, duration_s: float | None, samples: int
    ) -> None:
        labels = _health_labels(target)
        self._append("up", labels, at_ms, up)
        if duration_s is not None:
            self._append("scrape_duration_seconds", labels, at_ms, duration_s)
        self._append("scrape_samples_scraped", labels, at_ms, float(samples))

    def _append(self, name: str, labels: Labels, t_ms: int, value: float) -> None:
        times, values = self._series.setdefault((name, labels), ([], []))
        if times and t_ms <= times[-1]:
            self.dropped += 1
            return
        times.append(t_ms)
        values.append(value)


def _health_labels(target: Target) -> Labels:
    """The labels of the series a capture adds for each scrape of ``target``."""
    return Labels({"instance": target.instance, "job": target.job})


def _with_target(labels: Labels, target: Target) -> Labels:
    """``labels`` with the target's labels (``job``, ``instance``, any others), as Prometheus
    adds them.

    Prometheus 2.42 ``mutateSampleLabels`` with ``honor_labels: false``: an
    exposed label a target label would replace moves to ``exported_<name>``,
    prefixed again while that name is taken too.
    """
    out = dict(labels)
    for name, value in (*target.labels.items(), ("instance", target.instance), ("job", target.job)):
        if name in labels:
            moved = f"exported_{name}"
            while moved in out:
                moved = f"exported_{moved}"
            out[moved] = labels[name]
        out[name] = value
    return Labels(out)


def _moment(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, UTC)


def _iso(millis: int) -> str:
    return _moment(millis).isoformat(timespec="milliseconds")


def capture(
    clients: Sequence[ScrapeClient],
    out: Path,
    *,
    interval_s: float,
    duration_s: float,
    deployments: Sequence[Deployment] | None = None,
    title: str | None = None,
    stop: threading.Event | None = None,
    progress: Callable[[Progress], None] | None = None,
    parallel: int = 8,
    proposal: Callable[[str], None] | None = None,
) -> Dataset:
    """Scrape every client's target each ``interval_s`` for ``duration_s``; write a dataset.

    Parameters
    ----------
    clients
        One per target (:class:`~inference_obs.source.scrape.ScrapeClient`); their
        ``limits.timeout`` should not exceed the interval.
    out
        A new or empty directory; checked writable before the first scrape.
    interval_s, duration_s
        Seconds between scrape rounds (at least
        :data:`~inference_obs.source.limits.MIN_INTERVAL_S`), and how long to scrape.
        Rounds start at ``0, interval, 2 x interval, ...``
        while before ``duration_s``; a round that overran skips the starts it covered
        (as a Prometheus scrape loop does), and every scrape, its answer read and
        parsed, ends by ``duration_s``, so the capture ends then (then it writes).
    deployments
        What was observed; None proposes one per model served.
    title
        One line for the manifest (default: the targets and the start).
    stop
        Set it (from a signal handler, say) to end early: the round under way
        finishes, then the dataset is written.
    progress
        Called after each round.
    parallel
        Scrapes in flight at once, at most.
    proposal
        Without ``deployments``, called once after the first round with a line saying
        what would be proposed from it (:func:`proposal_line`), so that a capture
        nothing can be proposed from is known at once, not at its end.

    Returns
    -------
    Dataset
        As written (``synthetic: false``; the methodology names the targets,
        the interval and every target's failures).

    Raises
    ------
    ConfigurationError
        Without a target, or when ``interval_s`` is below ``MIN_INTERVAL_S`` or
        ``duration_s`` is not above 0 seconds.
    DatasetError
        When ``out`` cannot take a dataset (not empty, read-only, full): before
        any scrape, or, should it fail later, when writing.
    """
    if not clients:
        raise ConfigurationError("capture needs at least one target: give one ScrapeClient each")
    if not (interval_s >= MIN_INTERVAL_S and duration_s > 0 and math.isfinite(duration_s)):
        raise ConfigurationError(
            f"the interval ({interval_s!r} s) and the duration ({duration_s!r} s) of a capture "
            f"must be at least {MIN_INTERVAL_S:g} s and above 0 s"
        )
    check_dataset_out(out)
    stop = stop if stop is not None else threading.Event()
    recording = Recording()
    started, wall = time.monotonic(), time.time()

    def after(rounds: int) -> None:
        if rounds == 1 and deployments is None and proposal is not None:
            proposal(proposal_line(recording.series()))
        if progress is not None:
            elapsed = time.monotonic() - started
            progress(Progress(rounds, recording.scrapes, recording.failures, elapsed))

    with concurrent.futures.ThreadPoolExecutor(
        min(len(clients), max(parallel, 1)), "inference-obs-scrape"
    ) as pool:
        rounds, skipped = _rounds(
            clients, recording, pool, started, interval_s, started + duration_s, stop, after
        )
    method = _methodology(clients, interval_s, rounds, wall, ended_early=stop.is_set())
    if skipped:
        method.append(
            f"{skipped} round start(s) skipped: the round before was still under way, as a "
            "Prometheus scrape loop skips them."
        )
    name = title or f"Capture of {len(clients)} target(s) from {_iso(round(wall * 1000))}"
    return recording.write(
        out, interval_s=interval_s, title=name, method=method, deployments=deployments
    )


def _rounds(
    clients: Sequence[ScrapeClient],
    recording: Recording,
    pool: concurrent.futures.Executor,
    started: float,
    interval_s: float,
    end: float,
    stop: threading.Event,
    after: Callable[[int], None],
) -> tuple[int, int]:
    """Scrape rounds from ``started`` every ``interval_s`` until ``end`` (monotonic) or ``stop``.

    Every scrape ends by the next start or ``end``, whichever is first. Returns the
    rounds made and the starts skipped because the round before overran them.
    """
    rounds = slot = skipped = 0
    while not stop.is_set():
        due = started + slot * interval_s
        if due >= end:
            break
        if stop.wait(max(due - time.monotonic(), 0.0)):
            break
        deadline = min(due + interval_s, end)
        done = pool.map(_scrape, clients, [deadline] * len(clients))
        for client, (at_ms, took, result) in zip(clients, done, strict=True):
            if isinstance(result, str):
                recording.fail(client.target, at_ms, result, took)
            else:
                recording.add(client.target, at_ms, result, took)
        rounds += 1
        # The next start not yet passed: a round that overran skips those it covered.
        late = math.floor((time.monotonic() - started) / interval_s) + 1
        skipped += max(late - slot - 1, 0)
        slot = max(slot + 1, late)
        after(rounds)
    return rounds, skipped


def _methodology(
    clients: Sequence[ScrapeClient],
    interval_s: float,
    rounds: int,
    wall: float,
    *,
    ended_early: bool,
) -> list[str]:
    """What a capture's manifest says of how it was made (``wall``: its start, unix s)."""
    targets = ", ".join(c.target.url for c in clients)
    return [
        f"Captured read-only with inference_obs {__version__} (inference-obs capture): GET of "
        f"each target's metrics endpoint every {interval_s:g} s, no Prometheus involved.",
        f"Targets: {targets}.",
        f"{rounds} rounds from {_iso(round(wall * 1000))}"
        + (" (ended early by the user)" if ended_early else "")
        + "; samples carry their scrape's start time, job and instance labels are added "
        "as a Prometheus scrape adds them, and a failed scrape is recorded as up 0.",
        "No staleness markers: a series that stopped shows as a gap.",
    ]


def _scrape(client: ScrapeClient, deadline: float) -> tuple[int, float, Exposition | str]:
    """One scrape: its start (unix ms), its seconds, and its samples or why it failed."""
    at_ms, began = round(time.time() * 1000), time.monotonic()
    try:
        answer = client.scrape(deadline)
        scrape = parse_exposition(
            answer.body,
            source=client.target.url,
            form=ExpositionFormat.of(answer.content_type),
            deadline=deadline,
        )
    except InferenceObsError as exc:
        return at_ms, time.monotonic() - began, _reason(str(exc), client.target.url)
    return at_ms, time.monotonic() - began, scrape


def _reason(message: str, url: str) -> str:
    """A failure's message without the URL it starts with (the methodology line names it)."""
    if message.startswith(f"{url}: "):
        return message[len(url) + 2 :]
    if message.startswith(f"{url}:"):  # the answer did not parse: "URL:LINE: problem"
        return f"answer line {message[len(url) + 1 :]}"
    return message
