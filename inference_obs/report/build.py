"""Run every analysis once per deployment, then the judging ones, and keep the results.

:func:`build_report` is the report's only contact with a source: the
renderers (:mod:`~.markdown`, :mod:`~.html`, :mod:`~.report_json`) and the
figures (:mod:`~.figures`) read what it returns and query nothing.
Progress goes to a callback, and a deadline stops the run between analyses
with a clear error rather than leaving a half-written report.

Over a slow link a report's time is its round trips, one after another when
each question waits for the one before. The deployments' analyses need
nothing of each other but the tile width, so all start at once; inside each,
questions that do not depend on each other's answers are asked together,
and a question already in flight is waited for, not asked again
(:mod:`~inference_obs.source.remembering`); the run owns the threads
(:class:`~inference_obs.reading.schedule.Pool`). The comparison checks read the
analyses' results and ask only what those lack; the time line
(:mod:`~inference_obs.analyses.timeline`) and the judgement
(:mod:`~inference_obs.analyses.conclusions`) read them and ask nothing. Results are assembled in a
fixed order; how many requests reach a server at once is the source's to bound.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from inference_obs.analyses.conclusions import ScopeFacts, cautions, conclusions, judged
from inference_obs.analyses.run import DeploymentResults, run
from inference_obs.analyses.timeline import timeline
from inference_obs.analyses.validity.verdicts import ValidityResult, compare, windows_by_name
from inference_obs.deployment import Deployment
from inference_obs.errors import InferenceObsError
from inference_obs.reading.resolution import Resolution
from inference_obs.reading.schedule import Pending, Pool, soon
from inference_obs.report.model import Report, Scope
from inference_obs.samples import Window
from inference_obs.source.base import EngineInfo, Source
from inference_obs.source.remembering import RememberingSource

__all__ = ["WORKERS", "ReportTimeout", "build_report"]

Progress = Callable[[str], None]
#: Threads a report reading a server runs its analyses and questions in. Most wait on
#: answers other threads are fetching, so there are many more threads than requests in
#: flight (the source bounds those). Each of a deployment's 20-odd analyses holds a thread
#: while it waits, and work started when no thread is free runs one piece after another
#: where its result is needed: over a link with 50 ms each way the bundled two-deployment
#: report's critical path was 40 requests with 32 threads and 31 with 128
#: (``benchmarks/live_link.py``, one recorded run each on a loaded machine).
WORKERS = 128


class ReportTimeout(InferenceObsError, TimeoutError):
    """The report's time budget ran out before every analysis was done."""


def _stepper(progress: Progress | None, budget_s: float | None) -> Callable[[str], None]:
    """What runs as each piece of work starts: the time budget checked, its progress line said
    (one at a time, from whichever thread)."""
    started = time.monotonic()
    say = progress or (lambda _: None)
    saying = threading.Lock()

    def step(what: str) -> None:
        if budget_s is not None and time.monotonic() - started > budget_s:
            raise ReportTimeout(f"the report's time budget of {budget_s:g} s ran out before {what}")
        with saying:
            say(what)

    return step


def _asked(
    source: Source,
    deployments: Sequence[Deployment],
    windows: Mapping[str, Window],
    step: Callable[[str], None],
    workers: int | None,
    **options: Any,
) -> tuple[list[DeploymentResults], ValidityResult | None, EngineInfo]:
    """Every analysis once per deployment, then the comparison checks: all that asks the
    source, through one :class:`RememberingSource`, in one :class:`Pool` of threads
    (``options`` go to :func:`run`)."""
    asked = RememberingSource(source)
    # The engine is asked first: its kind chooses the default number of threads.
    local = asked.info().kind == "dataset"
    with Pool(workers if workers is not None else 1 if local else WORKERS):

        def start(what: str, work: Callable[[], Any]) -> Pending[Any]:
            def stepped() -> Any:
                step(what)
                return work()

            return soon(stepped)

        runs = run(asked, deployments, windows, start=start, **options)
        verdicts = None
        if len(deployments) > 1:
            step("comparison checks")
            verdicts = compare(asked, runs)
        return runs, verdicts, asked.info()


def build_report(
    source: Source,
    deployments: Sequence[Deployment],
    window: Window | Mapping[str, Window],
    *,
    title: str,
    source_name: str,
    scrape_interval_seconds: float | None = None,
    methodology: Sequence[str] = (),
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
    budget_s: float | None = None,
    resolution: Resolution = "auto",
    workers: int | None = None,
) -> Report:
    """Run every registered analysis once per deployment, and the comparison checks.

    Parameters
    ----------
    source
        Where the series come from (read-only).
    deployments
        What to report on; two or more are also compared. Cost per token is
        shown for those with a ``hardware.gpu_hour_price``, the wiring
        checked for those with a ``topology``.
    window
        One window for all, or one per deployment name.
    title, source_name
        The report's title, and how it names its source (a URL without
        credentials, or a dataset path).
    scrape_interval_seconds, methodology
        The scrape interval and methodology notes, when known (datasets record them).
    settings
        Analysis settings by analysis name, then setting
        (``{"queueing": {"busy_threshold": 60}}``; see
        :mod:`~inference_obs.analyses.registry`); checked before anything is read.
    progress
        Called with a short line as each analysis starts (from the thread
        that runs it, one call at a time).
    budget_s
        Seconds the whole run may take; :class:`ReportTimeout` when exceeded.
    resolution
        How queueing, the stage boundaries and the sampled shares read each
        deployment: ``auto`` (every app scrape while that fits
        :data:`~inference_obs.reading.resolution.ROWS`, else tiles),
        ``scrape``, or a tile width in seconds (see
        :mod:`~inference_obs.reading.resolution`).
    workers
        Threads the analyses and their independent questions run in (module
        docs); 1 runs everything in order in the calling thread. Default:
        :data:`WORKERS` for a server, 1 for an engine in this process (kind
        ``dataset``), where threads would only take turns at the interpreter.
        The report is the same for any number.
    """
    windows = windows_by_name(deployments, window)
    step = _stepper(progress, budget_s)
    runs, verdicts, info = _asked(
        source,
        deployments,
        windows,
        step,
        workers,
        resolution=resolution,
        settings=settings,
    )
    scope = Scope(
        source=source_name,
        engine=info.kind,
        rules=info.rules.value,
        windows=windows,
        scrape_interval_seconds=scrape_interval_seconds,
    )
    # The judging analyses: they read the results above, and ask the source nothing.
    happened = timeline(runs)
    seen = judged(runs, verdicts, happened, ScopeFacts.of(methodology))
    return Report(
        title=title,
        scope=scope,
        deployments=tuple(runs),
        timeline=happened,
        fleet=seen.fleets,
        validity=verdicts,
        conclusions=conclusions(seen),
        cautions=cautions(seen),
        methodology=tuple(methodology),
    )
