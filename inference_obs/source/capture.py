"""Observe without Prometheus: scrape ``/metrics`` endpoints read-only into a dataset.

:func:`capture` scrapes every target once per interval, as a Prometheus scrape
job would, and writes what it saw as an observation dataset
(:func:`~inference_obs.source.dataset.writer.write_dataset`), so reports, checks and
backfills read it like any other. What Prometheus does, this does:

* every sample of a scrape carries the time the scrape started (whole
  milliseconds), or the timestamp the exporter exposed, if any;
* the target's ``job`` and ``instance`` labels are added; an exposed label of
  the same name moves to ``exported_job``/``exported_instance`` (Prometheus's
  ``honor_labels: false``, the default);
* each scrape adds ``up`` (1, or 0 when it failed), ``scrape_duration_seconds``
  and ``scrape_samples_scraped`` for its target, so a failed scrape is in the
  data, not hidden; the manifest's methodology counts them per target;
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
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import numpy as np

from inference_obs.deployment import Deployment, Engine, Hardware
from inference_obs.errors import ConfigurationError, DatasetError, InferenceObsError
from inference_obs.metrics import FAMILIES
from inference_obs.metrics.dcgm import MIG_LABELS
from inference_obs.metrics.dcgm_labels import GpuLabelScheme, scheme_of, workload_labels
from inference_obs.metrics.renames import HISTOGRAM_PARTS, exposed_names
from inference_obs.samples import Labels, Series
from inference_obs.source.dataset.manifest import Manifest, ManifestWindow
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.writer import write_dataset
from inference_obs.source.openmetrics.exposition import (
    Exposition,
    ExpositionFormat,
    parse_exposition,
)
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
        for sample in scrape.samples:
            labels = _with_target(sample.labels, target)
            self._append(
                sample.name, labels, at_ms if sample.t_ms is None else sample.t_ms, sample.value
            )
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
        end_ms = max(self.last_ms, self.first_ms + max(round(interval_s * 1000), 1))
        manifest = Manifest(
            title=title,
            synthetic=False,
            window=ManifestWindow(start=_moment(self.first_ms), end=_moment(end_ms)),
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
        labels = Labels({"instance": target.instance, "job": target.job})
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


# Engine series prefixes, as exporters spell them: vLLM's, Ray Serve's re-export of vLLM's,
# SGLang's, and the SGLang router's (metrics.renames.REEXPORT_PREFIXES). NVIDIA NIM exports
# vLLM's names without a prefix: those are told by name (_CATALOGUED).
_PREFIXES: tuple[tuple[str, Literal["vllm", "sglang"]], ...] = (
    ("vllm:", "vllm"),
    ("ray_vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("sglang_", "sglang"),
)
# Every exposed series name of the engines' catalogue families, under every prefix they are
# re-exported with, histogram and counter parts included: name -> engine.
_CATALOGUED: dict[str, Literal["vllm", "sglang"]] = {
    f"{name}{part}": "vllm" if family.exporter == "vllm" else "sglang"
    for family in FAMILIES
    if family.exporter in ("vllm", "sglang")
    for name in exposed_names(family)
    for part in ("", *HISTOGRAM_PARTS, "_total")
}
# The label naming the model: model_name; SGLang 0.3 named it "name" (a label
# its function-latency histogram uses for the function, hence only on catalogued series).
_MODEL_LABELS = ("model_name", "name")
#: The deployment proposed when no series names a model.
PLACEHOLDER = "unnamed"


@dataclass
class _Seen:
    """What the scraped series show: models served, GPUs and their pods."""

    models: dict[tuple[str, str], tuple[str, set[str]]] = field(default_factory=dict)
    pods: set[str] = field(default_factory=set)
    engine_instances: set[str] = field(default_factory=set)
    gpus: dict[tuple[str, ...], str] = field(default_factory=dict)
    gpu_models: set[str] = field(default_factory=set)
    gpu_instances: set[str] = field(default_factory=set)

    def engine(self, one: Series) -> None:
        engine = next((e for prefix, e in _PREFIXES if one.name.startswith(prefix)), None)
        engine = engine or _CATALOGUED.get(one.name)
        if engine is None:
            return
        instance = one.labels.get("instance", "")
        self.engine_instances.add(instance)
        self.pods.update(one.labels[k] for k in ("pod", "exported_pod") if one.labels.get(k))
        for label in _MODEL_LABELS:
            model = one.labels.get(label)
            if label == "name" and _CATALOGUED.get(one.name) != "sglang":
                continue
            if model:
                self.models.setdefault((label, model), (engine, set()))[1].add(instance)
                return

    def gpu(self, one: Series) -> None:
        labels = one.labels
        # One unit per GPU, or per MIG instance of a GPU: a MIG instance is its own device.
        gpu = labels.get("UUID") or labels.get("uuid") or labels.get("gpu")
        if gpu:
            instance = labels.get("instance", "")
            unit = (instance, gpu, *(labels.get(k, "") for k in MIG_LABELS))
            self.gpus[unit] = self.gpus.get(unit) or _workload_pod(labels)
            self.gpu_instances.add(instance)
        if labels.get("modelName"):
            self.gpu_models.add(labels["modelName"])


def _workload_pod(labels: Labels) -> str:
    """The pod using the GPU a DCGM series is of: ``exported_pod`` when the scrape moved the
    exporter's label there, ``pod_name`` (1.x names), else ``pod`` unless it is the exporter's
    own; empty when none is named."""
    if scheme_of([labels]) is GpuLabelScheme.EXPORTED:
        return workload_labels(labels).get("pod", "")
    return labels.get("pod") or labels.get("pod_name") or ""


def propose_deployments(series: Iterable[Series]) -> tuple[tuple[Deployment, ...], list[str]]:
    """One deployment per model served (``model_name``, or SGLang 0.3's ``name``, of engine
    series: ``vllm:``, Ray Serve's ``ray_vllm:``, ``sglang:``/``sglang_``, NIM's unprefixed).

    Hardware comes from dcgm-exporter series where they say it: the GPU model
    when one ``modelName`` is seen, GPUs per replica when one model is served
    (GPUs seen divided by the engine instances serving it, when that divides
    evenly; a MIG instance counts as one GPU), and a GPU selector of the
    dcgm-exporter instances when one model is served. A GPU whose series name
    a pod that no engine series names is another pod's: when any is seen, no
    GPU is taken as the deployment's. Otherwise the hardware is a placeholder
    (GPU model ``unknown``, one GPU per replica, no GPU selector) the notes name.
    When no series names a model, one placeholder deployment (:data:`PLACEHOLDER`)
    selects every engine target (every target when none is an engine's).

    Returns
    -------
    tuple
        The deployments, and methodology notes saying how they were proposed.
    """
    seen = _Seen()
    instances: set[str] = set()
    for one in series:
        instances.add(one.labels.get("instance", ""))
        if one.name.lower().startswith("dcgm_"):
            seen.gpu(one)
        else:
            seen.engine(one)
    if not seen.models:
        return _placeholder(seen.engine_instances or instances)
    others = sorted({pod for pod in seen.gpus.values() if pod and pod not in seen.pods})
    gpu_model = next(iter(seen.gpu_models)) if len(seen.gpu_models) == 1 and not others else None
    deployments: list[Deployment] = []
    names: set[str] = set()
    notes = [
        f"Deployments proposed from the scraped series, one per model ({len(seen.models)}); "
        "edit the manifest's deployments or capture again with --deployments to declare them."
    ]
    for (label, model), (engine, served) in sorted(seen.models.items()):
        per_replica, gpu_selector = 1, None
        gpus = len(seen.gpus)
        if len(seen.models) == 1 and gpus and not others and gpus % len(served) == 0:
            per_replica = gpus // len(served)
            pattern = "|".join(re.escape(i) for i in sorted(seen.gpu_instances))
            gpu_selector = {"instance": f"~{pattern}"}
        deployments.append(
            Deployment(
                name=_short_name(model, names),
                selector={label: _equal(model)},
                gpu_selector=gpu_selector,
                hardware=Hardware(gpu_model=gpu_model or "unknown", gpus_per_replica=per_replica),
                engine=Engine(name=engine),
            )
        )
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        notes.append(
            f"GPUs unknown: the GPU series scraped name other pods ({shown}), none an engine "
            "series names, so none is taken as a deployment's; give gpu_selector to name them."
        )
    elif gpu_model is None:
        notes.append("GPU model unknown: no single dcgm-exporter modelName was scraped.")
    if not others and (len(seen.models) > 1 or not seen.gpus):
        notes.append(
            "GPUs per replica set to 1 and no GPU selector: which GPUs serve which model "
            "cannot be told from the scrapes."
        )
    return tuple(deployments), notes


def proposal_line(series: Iterable[Series]) -> str:
    """One line saying which deployments ``series`` would give (see :func:`propose_deployments`)."""
    deployments, notes = propose_deployments(series)
    if deployments[0].name == PLACEHOLDER:
        return notes[0]
    named = "; ".join(
        f"{d.name} ({d.engine.name}, {', '.join(f'{k}={v}' for k, v in d.selector.items())})"
        for d in deployments
    )
    return f"deployments proposed from the first scrape: {named}. " + " ".join(notes[1:])


def _placeholder(instances: set[str]) -> tuple[tuple[Deployment, ...], list[str]]:
    """One placeholder deployment selecting ``instances``, and the note saying how to name it."""
    pattern = "|".join(re.escape(i) for i in sorted(instances)) or ".+"
    deployment = Deployment(
        name=PLACEHOLDER,
        selector={"instance": f"~{pattern}"},
        hardware=Hardware(gpu_model="unknown", gpus_per_replica=1),
        engine=Engine(name="vllm"),
    )
    note = (
        f"No engine series naming a model (model_name) was scraped, so one placeholder "
        f"deployment '{PLACEHOLDER}' selects the targets {', '.join(sorted(instances))}, with "
        "unknown hardware: name the deployments in the manifest (name, selector, hardware) or "
        "capture again with --deployments FILE."
    )
    return (deployment,), [note]


def _short_name(model: str, taken: set[str]) -> str:
    """The model's last path part, made unique among ``taken`` (which it joins)."""
    base = model.rstrip("/").rpartition("/")[2] or model
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def _equal(value: str) -> str:
    """The compact selector text matching exactly ``value`` (see deployment.parse_selector)."""
    if value.startswith("~"):
        return "=" + value  # "=~x" is the literal "~x"
    if value.startswith(("!", "=~")):
        return "~" + re.escape(value)
    return value


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
        A new or empty directory.
    interval_s, duration_s
        Seconds between scrape rounds, and how long to scrape. Rounds start at
        ``0, interval, 2 x interval, ...`` while before ``duration_s``.
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
        Without a target, or when ``interval_s`` or ``duration_s`` is not
        above 0 seconds.
    """
    if not clients:
        raise ConfigurationError("capture needs at least one target: give one ScrapeClient each")
    if not (interval_s > 0 and duration_s > 0):
        raise ConfigurationError(
            f"the interval ({interval_s!r} s) and the duration ({duration_s!r} s) of a capture "
            "must both be above 0 seconds"
        )
    stop = stop if stop is not None else threading.Event()
    recording = Recording()
    started, wall = time.monotonic(), time.time()
    rounds = 0
    with concurrent.futures.ThreadPoolExecutor(
        min(len(clients), max(parallel, 1)), "inference-obs-scrape"
    ) as pool:
        while not stop.is_set():
            due = started + rounds * interval_s
            if due - started >= duration_s:
                break
            if stop.wait(max(due - time.monotonic(), 0.0)):
                break
            deadline = due + interval_s
            done = pool.map(_scrape, clients, [deadline] * len(clients))
            for client, (at_ms, took, result) in zip(clients, done, strict=True):
                if isinstance(result, str):
                    recording.fail(client.target, at_ms, result, took)
                else:
                    recording.add(client.target, at_ms, result, took)
            rounds += 1
            if rounds == 1 and deployments is None and proposal is not None:
                proposal(proposal_line(recording.series()))
            if progress is not None:
                elapsed = time.monotonic() - started
                progress(Progress(rounds, recording.scrapes, recording.failures, elapsed))
    method = _methodology(clients, interval_s, rounds, wall, ended_early=stop.is_set())
    name = title or f"Capture of {len(clients)} target(s) from {_iso(round(wall * 1000))}"
    return recording.write(
        out, interval_s=interval_s, title=name, method=method, deployments=deployments
    )


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
