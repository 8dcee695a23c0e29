"""Collection health: whether the series hold every scrape the window should have.

Before any number is read, a report says what was collected: samples per
app instance against the count the measured scrape interval predicts, scrape
gaps (the longest named with its times), counter resets (restarts) over the
deployment's vLLM counters, and GPUs that stopped reporting part-way or never
reported, by name.

The scrape interval is measured from the data (the median spacing of raw
samples), per deployment and target kind: a live source declares none. Scrape
times come from the raw samples of one gauge per target kind,
``vllm:num_requests_running`` for the app targets and ``DCGM_FI_DEV_GPU_UTIL``
for the GPUs (each scrape carries both, so every scrape is seen once). Resets
are counted by the one detector the exact counter changes use
(:func:`~inference_obs.reading.counter_resets.counted_resets`).

Coverage: the part of the window the deployment's series cover, app and GPU
apart, each the union over targets of their first to last sample widened as
``increase()`` extrapolates (:meth:`~inference_obs.reading.coverage.Coverage.spans`).
A window longer than the data, or pods that start or stop inside it, cover
less than the window; rates are per second of the covered span
(:func:`app_coverage`), never of the window's empty part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from inference_obs.analyses.gpu import StoppedGpu, gpu_name, gpu_presence, stopped_gpus
from inference_obs.analyses.unit import Analysis, Settings
from inference_obs.errors import Annotation
from inference_obs.metrics import dcgm, vllm
from inference_obs.metrics.family import Family, MetricType
from inference_obs.query import Expr, count_over_time, to_promql
from inference_obs.reading.alignment import gpu_label_sets
from inference_obs.reading.context import Reading
from inference_obs.reading.counter_resets import closed_range, counted_resets
from inference_obs.reading.coverage import Coverage, Gap, Span, coverage, union
from inference_obs.reading.measurement import Measurement, Status
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Labels, Vector

__all__ = [
    "COVERAGE",
    "CollectionResult",
    "CollectionSettings",
    "CoveredSpan",
    "ScrapeGap",
    "app_coverage",
    "collection",
    "coverage_note",
]

#: The app gauge whose scrapes are counted: every vLLM scrape carries it.
APP_GAUGE = vllm.NUM_REQUESTS_RUNNING
#: The GPU gauge whose scrapes are counted.
GPUS = dcgm.GPU_UTIL
#: The label naming a scrape target: Prometheus adds it to every scraped series.
TARGET = "instance"
#: Counters whose resets are counted: the core vLLM counters and histograms' _count.
COUNTERS: tuple[Family, ...] = tuple(
    f for f in vllm.CORE_FAMILIES if f.type in (MetricType.COUNTER, MetricType.HISTOGRAM)
)


class CollectionSettings(Settings):
    """What counts as a scrape gap."""

    gap_factor: float = Field(
        1.75,
        gt=1,
        le=10,
        description="A spacing of two consecutive samples of one target longer than this "
        "many measured scrape intervals (ratio) is a gap; a GPU whose last sample is that "
        "far before the window's end stopped reporting. 1.75: jitter stays under it, one "
        "missed scrape (2 intervals) does not.",
    )


class ScrapeGap(BaseModel):
    """No sample of one target (an app instance, a GPU exporter) from ``start`` to ``end``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: str = Field(description="'app <instance>' or 'gpu <instance>'.")
    start: AwareDatetime = Field(description="The last sample before the gap.")
    end: AwareDatetime = Field(description="The first sample after it.")
    seconds: float = Field(description="end - start, seconds.")


class CoveredSpan(BaseModel):
    """A stretch of the window that one kind of series (app or GPU) covers, without a break."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: AwareDatetime = Field(description="Where the covered stretch begins.")
    end: AwareDatetime = Field(description="Where it ends.")
    seconds: float = Field(description="end - start, seconds.")


class CollectionResult(AnalysisResult):
    """What was collected for one deployment over one window.

    Attributes
    ----------
    app_samples
        Per app instance (its ``instance`` label): distinct scrapes in the window.
    expected_app_samples
        Window / measured app scrape interval: the scrapes a target present the
        whole window has (to within one); None when the interval is unknown.
    gaps
        Every scrape gap, longest first.
    stopped_gpus
        GPUs that stopped reporting part-way, with their last sample.
    silent_gpus
        GPUs seen in another DCGM family without any utilisation sample, by name.
    covered_start, covered_end
        Where the app series' covered span begins and ends, seconds after the
        window's start (0 and the window's length when they cover all of it).
    covered_seconds, covered_share
        The app series' covered span (the union over targets), seconds, and as
        a share (ratio 0-1) of the window: the span rates are per second of.
    gpu_covered_share
        The same share for the GPU utilisation series, which sample-weighted
        utilisation describes.
    app_covered, gpu_covered
        The covered stretches themselves, in time order.
    """

    scrape_interval: Measurement
    gpu_scrape_interval: Measurement
    app_samples: dict[str, Measurement]
    expected_app_samples: float | None
    scrape_gaps: Measurement
    gaps: tuple[ScrapeGap, ...]
    counter_resets: Measurement
    gpus_stopped: Measurement
    stopped_gpus: tuple[StoppedGpu, ...]
    gpus_silent: Measurement
    silent_gpus: tuple[str, ...]
    covered_start: Measurement
    covered_end: Measurement
    covered_seconds: Measurement
    covered_share: Measurement
    gpu_covered_share: Measurement
    app_covered: tuple[CoveredSpan, ...]
    gpu_covered: tuple[CoveredSpan, ...]


def _target(labels: Labels) -> str:
    return labels.get(TARGET) or "all"


#: A span of coverage is widened as increase() extrapolates; gaps inside it do not matter
#: to it, so any gap factor serves when only spans are wanted.
_SPANS_ONLY = 2.0
#: The annotation kind of a number over a span shorter than its window.
COVERAGE = "coverage"


def app_coverage(r: Reading, key: Callable[[Labels], str]) -> Coverage:
    """The :class:`~inference_obs.reading.coverage.Coverage` of the deployment's app series
    grouped by the replica ``key`` names from their labels (a pod, an instance): with
    :meth:`~inference_obs.reading.coverage.Coverage.spans`, the span each covers.

    Read from the raw samples of :data:`APP_GAUGE` that collection health reads (one
    question for both); series ``key`` names ``""`` are left out.
    """
    raw = r.raw(APP_GAUGE.select(r.matchers))
    found = coverage(raw, key, _SPANS_ONLY)
    return replace(
        found,
        samples={k: v for k, v in found.samples.items() if k},
        first_ms={k: v for k, v in found.first_ms.items() if k},
        last_ms={k: v for k, v in found.last_ms.items() if k},
    )


def _length(seconds: float) -> str:
    """A window's length as people say it: ``2 h``, ``90 min``, ``45 s``."""
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def coverage_note(
    r: Reading, spans: Sequence[Span], gpu_share: float | None = None, who: str | None = None
) -> Annotation | None:
    """The ``coverage`` annotation of numbers over ``spans`` (disjoint, in time order) when
    they cover less of the window than all of it (to the millisecond); None when they do,
    or when there are none. ``gpu_share`` (ratio 0-1), the GPU series' share, is named
    when it is below 1; ``who`` names whose series they are (the deployment's by default).
    """
    covered = sum(s.seconds for s in spans)
    if not spans or covered >= r.seconds - 1e-3:
        return None
    zone = r.window.start.tzinfo
    start = datetime.fromtimestamp(spans[0].start_ms / 1000, zone)
    end = datetime.fromtimestamp(spans[-1].end_ms / 1000, zone)
    until = f"{end:%H:%M:%S}" if end.date() == start.date() else _second(end)
    broken = f" in {len(spans)} stretches" if len(spans) > 1 else ""
    gpus = (
        f" (GPU series {gpu_share:.0%})"
        if gpu_share is not None and gpu_share < 1 - 1e-3 / r.seconds
        else ""
    )
    return Annotation(
        COVERAGE,
        f"{who or r.deployment.name}'s series cover {_second(start)} to {until}{broken}, "
        f"{covered / r.seconds:.0%} of the {_length(r.seconds)} window{gpus}; rates are per "
        "second of that span",
    )


#: How many targets covering part of the window a note names; past it, it counts them.
NAMED_TARGETS = 3


def _partial_targets(r: Reading, spans: dict[str, Span], covered: float) -> Annotation | None:
    """The ``coverage`` note naming the app targets whose span (stretched to the deployment's
    edges where scraped in the same round) is shorter than the deployment's ``covered``
    seconds: pods that started or stopped inside it. None when there are none."""
    part = {k: s for k, s in sorted(spans.items()) if s.seconds < covered - 1e-3}
    if not part:
        return None
    zone = r.window.start.tzinfo
    named = [
        f"{k} from {datetime.fromtimestamp(s.start_ms / 1000, zone):%H:%M:%S} to "
        f"{datetime.fromtimestamp(s.end_ms / 1000, zone):%H:%M:%S} ({s.seconds / r.seconds:.0%})"
        for k, s in list(part.items())[:NAMED_TARGETS]
    ]
    more = f" and {len(part) - NAMED_TARGETS} more" if len(part) > NAMED_TARGETS else ""
    return Annotation(
        COVERAGE,
        f"{r.deployment.name}: app targets present for part of the {_length(r.seconds)} "
        f"window: {', '.join(named)}{more}; a replica's rates are per second of its own span",
    )


def _gpus_only(r: Reading, gpus: tuple[Span, ...], share: float | None) -> Annotation | None:
    """The ``coverage`` note when the GPU series alone cover less of the window than the app
    series (all of it): utilisation then describes a shorter span than the rates."""
    if not gpus or share is None or share >= 1 - 1e-3 / r.seconds:
        return None
    zone = r.window.start.tzinfo
    start = datetime.fromtimestamp(gpus[0].start_ms / 1000, zone)
    end = datetime.fromtimestamp(gpus[-1].end_ms / 1000, zone)
    return Annotation(
        COVERAGE,
        f"{r.deployment.name}'s GPU series cover {start:%H:%M:%S} to {end:%H:%M:%S}, "
        f"{share:.0%} of the {_length(r.seconds)} window, its app series all of it: "
        "utilisation describes the shorter span",
    )


def _coverage(
    r: Reading,
    app: tuple[Span, ...],
    gpus: tuple[Span, ...],
    targets: dict[str, Span],
    reads: tuple[Expr, ...],
) -> dict[str, Measurement]:
    """Covered start, end, seconds and share of the app series; the GPU series' share.

    ``app`` and ``gpus`` are the unions of the targets' spans; ``targets`` the app
    targets' spans stretched to the union's edges (``Coverage.together``)."""
    how = (
        "union over targets of each one's first to last raw sample, widened to the window's "
        "edge within 1.1 average spacings of it, else by half a spacing (as increase() "
        "extrapolates)"
    )
    start_ms, w = r.window.start_s * 1000, r.seconds
    covered = sum(s.seconds for s in app) if app else None
    gpu_share = sum(s.seconds for s in gpus) / w if gpus else None
    values = {
        "covered_start": (app[0].start_ms - start_ms) / 1000 if app else None,
        "covered_end": (app[-1].end_ms - start_ms) / 1000 if app else None,
        "covered_seconds": covered,
        "covered_share": None if covered is None else covered / w,
        "gpu_covered_share": gpu_share,
    }
    units = {"covered_seconds": "seconds", "covered_share": "ratio", "gpu_covered_share": "ratio"}
    out = {}
    for name, value in values.items():
        family = GPUS if name.startswith("gpu") else APP_GAUGE
        out[name] = r.local(
            name,
            value,
            units.get(name, "seconds after the window's start"),
            reads=reads[1:] if family is GPUS else reads[:1],
            computation=f"{how}, of {family.name}",
            missing=[family],
        )
    notes = [
        coverage_note(r, app, gpu_share) or _gpus_only(r, gpus, gpu_share),
        _partial_targets(r, targets, covered or 0.0),
    ]
    if any(notes):
        share = out["covered_share"]
        out["covered_share"] = share.model_copy(
            update={"annotations": tuple(n for n in notes if n is not None)}
        )
    return out


def _stretches(r: Reading, spans: tuple[Span, ...]) -> tuple[CoveredSpan, ...]:
    zone = r.window.start.tzinfo
    return tuple(
        CoveredSpan(
            start=datetime.fromtimestamp(s.start_ms / 1000, zone),
            end=datetime.fromtimestamp(s.end_ms / 1000, zone),
            seconds=s.seconds,
        )
        for s in spans
    )


def _interval(r: Reading, name: str, found: Coverage, family: Family, reads: Expr) -> Measurement:
    value = found.interval_ms / 1000 if found.interval_ms > 0 else None
    return r.local(
        name,
        value,
        "seconds",
        reads=(reads,),
        computation=f"median spacing of consecutive raw samples of each {family.name} series",
        missing=[family],
    )


def _app_samples(r: Reading, found: Coverage, expected: float | None) -> dict[str, Measurement]:
    """Scrapes per app instance, by the server: ``max by (instance) (count_over_time(x[w]))``
    (the engines of one instance are scraped together)."""
    window = closed_range(APP_GAUGE.select(r.matchers), r.seconds, r.info().rules)
    expr = count_over_time(window).max(by=(TARGET,))
    note = (
        f"About {expected:,.0f} expected over the window at the measured interval."
        if expected is not None
        else "No measured interval: no expected count."
    )
    wanted = {Labels({TARGET: k}): f"app_samples[{k}]" for k in found.samples}
    measured = r.measure_by(wanted, expr, (TARGET,), "samples", caveats=(note,))
    return {labels[TARGET]: m for labels, m in measured.items()}


def _gaps(r: Reading, gaps: list[ScrapeGap], seen: bool, reads: tuple[Expr, ...]) -> Measurement:
    """How many scrape gaps, the longest named in an annotation; ``no_data`` without samples."""
    how = (
        "spacings of consecutive scrapes of one target (app instance, GPU exporter) longer "
        "than gap_factor x the measured interval of its kind"
    )
    if not seen:
        return r.local(
            "scrape_gaps", None, "gaps", reads=reads, computation=how, missing=[APP_GAUGE, GPUS]
        )
    notes: tuple[Annotation, ...] = ()
    if gaps:
        longest = gaps[0]
        notes = (
            Annotation(
                "longest_gap",
                f"longest: {longest.target}, no sample from {_second(longest.start)} to "
                f"{_second(longest.end)} ({longest.seconds:g} s)",
            ),
        )
    return r.made(
        "scrape_gaps",
        float(len(gaps)),
        "gaps",
        Status.OK,
        promql=tuple(to_promql(e) for e in reads),
        computation=how,
        annotations=notes,
    )


def _second(moment: datetime) -> str:
    return moment.isoformat(sep=" ", timespec="seconds")


def _gap(r: Reading, gap: Gap, kind: str) -> ScrapeGap:
    zone = r.window.start.tzinfo
    return ScrapeGap(
        target=f"{kind} {gap.key}",
        start=datetime.fromtimestamp(gap.start_ms / 1000, zone),
        end=datetime.fromtimestamp(gap.end_ms / 1000, zone),
        seconds=gap.seconds,
    )


def _resets(r: Reading) -> Measurement:
    """Restarts seen on the counters: per instance, the most resets of any one counter
    series (a restart resets them all at once), summed over instances."""
    rules = r.info().rules
    exprs = [
        counted_resets(
            f.select(r.matchers, "count" if f.type is MetricType.HISTOGRAM else None),
            r.seconds,
            rules,
        ).max(by=(TARGET,))
        for f in COUNTERS
    ]
    per_instance: dict[str, float] = {}
    for answer in r.ask(exprs):
        if isinstance(answer.value, Vector):
            for labels, value in answer.value.as_dict().items():
                name = _target(labels)
                per_instance[name] = max(per_instance.get(name, 0.0), value)
    promql = tuple(to_promql(e) for e in exprs)
    computation = (
        "sum over instances of the largest resets() of any one series of the core vLLM "
        "counters (histograms' _count included) on that instance"
    )
    if not per_instance:
        return r.local(
            "counter_resets",
            None,
            "resets",
            reads=exprs,
            computation=computation,
            missing=["every core vLLM counter"],
        )
    restarted = {k: v for k, v in sorted(per_instance.items()) if v > 0}
    notes = (
        (
            Annotation(
                "counter_resets",
                "reset on " + ", ".join(f"{k} ({v:g})" for k, v in restarted.items()),
            ),
        )
        if restarted
        else ()
    )
    return r.made(
        "counter_resets",
        sum(per_instance.values()),
        "resets",
        Status.OK,
        promql=promql,
        computation=computation,
        annotations=notes,
        caveats=("A new pod is a new series, not a reset: a replaced pod shows no reset.",),
    )


def _gpus(
    r: Reading, statistic: str, names: list[str], found: Coverage, reads: Expr, how: str
) -> Measurement:
    if not found.samples and not names:
        return r.local(statistic, None, "GPUs", reads=(reads,), computation=how)
    notes = (Annotation(statistic, ", ".join(names)),) if names else ()
    return r.made(
        statistic,
        float(len(names)),
        "GPUs",
        Status.OK,
        promql=(to_promql(reads),),
        computation=how,
        annotations=notes,
    )


def _collection(r: Reading, settings: CollectionSettings) -> CollectionResult:
    """Collection health of the deployment over the window (see the module docstring).

    Every scrape time comes from raw samples of the window; intervals in
    seconds, samples and gaps as counts, GPUs by name.
    """
    factor = settings.gap_factor
    app_read, gpu_read = APP_GAUGE.select(r.matchers), GPUS.select(r.deployment.gpu_matchers)
    presence = r.soon(partial(gpu_presence, r))
    profiled = r.soon(
        partial(gpu_label_sets, r.source, r.deployment, dcgm.PROF_GR_ENGINE_ACTIVE, r.window),
    )
    resets = r.soon(partial(_resets, r))
    app_raw, gpu_raw = r.together([partial(r.raw, s) for s in (app_read, gpu_read)])
    app = coverage(app_raw, _target, factor)
    exporters, by_gpu = coverage(gpu_raw, _target, factor), coverage(gpu_raw, gpu_name, factor)
    reads = (app_read.over(r.seconds), gpu_read.over(r.seconds))
    interval = _interval(r, "scrape_interval", app, APP_GAUGE, reads[0])
    gpu_interval = _interval(r, "gpu_scrape_interval", exporters, GPUS, reads[1])
    expected = r.seconds / interval.value if interval.value else None
    gaps = sorted(
        [*(_gap(r, g, "app") for g in app.gaps), *(_gap(r, g, "gpu") for g in exporters.gaps)],
        key=lambda g: (-g.seconds, g.target, g.start),
    )
    stopped = stopped_gpus(r, by_gpu, factor)
    found = presence.result()
    # dcgm-exporter exports only profiling fields for MIG instances (no GPU_UTIL, no FB): a GPU
    # with profiling samples reports, so it is not listed as silent.
    reporting = {
        gpu_name(Labels({k: v for k, v in labels.items() if k in found.ident}))
        for labels in profiled.result()
    }
    silent = tuple(name for name in found.missing if name not in reporting)
    bounds = (r.window.start_s * 1000, r.window.end_s * 1000)
    app_union, gpu_union = (union(c.spans(*bounds).values()) for c in (app, exporters))
    return CollectionResult(
        **_coverage(r, app_union, gpu_union, app.together(*bounds), reads),
        app_covered=_stretches(r, app_union),
        gpu_covered=_stretches(r, gpu_union),
        scrape_interval=interval,
        gpu_scrape_interval=gpu_interval,
        app_samples=_app_samples(r, app, expected),
        expected_app_samples=expected,
        scrape_gaps=_gaps(r, gaps, bool(app.samples or by_gpu.samples), reads),
        gaps=tuple(gaps),
        counter_resets=resets.result(),
        gpus_stopped=_gpus(
            r,
            "gpus_stopped",
            [f"{g.name} (last sample {_second(g.last_sample)})" for g in stopped],
            by_gpu,
            reads[1],
            f"GPUs whose last raw sample is over {factor:g} x the measured GPU scrape "
            "interval before the window's end",
        ),
        stopped_gpus=stopped,
        gpus_silent=_gpus(
            r,
            "gpus_silent",
            list(silent),
            by_gpu,
            reads[1],
            "GPUs seen in another DCGM family (FB, power, temperature, clocks) without any "
            "utilisation or graphics-engine-activity sample in the window",
        ),
        silent_gpus=silent,
    )


collection = Analysis(
    name="collection",
    title="Collection health",
    entry=_collection,
    result=CollectionResult,
    settings=CollectionSettings,
    summary="Samples per target, measured scrape interval, gaps, resets, GPUs that stopped, "
    "the span the series cover.",
)
