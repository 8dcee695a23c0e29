"""A whole report from a source in one call, its inputs resolved the one way there is.

:func:`report` is ``obs.report``::

    import inference_obs as obs

    report = obs.report(obs.DatasetSource("datasets/pro5000-vs-h20"))
    report = obs.report(prometheus, "deployments.yaml", window="1h")

:func:`resolve_inputs` decides what a report reads, for :func:`report` and for
``inference-obs report`` and ``compare`` alike, without sending a query or
reading a sample:

- the deployments: a deployments file (YAML or JSON as ``inference-obs
  discover`` writes it; a manifest or a dataset directory works too), a list
  of :class:`~inference_obs.deployment.Deployment` or of the dataset's
  deployment names, or, given nothing, the dataset's own;
- the window: a :class:`~inference_obs.samples.Window`, or a duration such as
  ``"1h"`` ending at ``end`` (by default now for a live source, the end of the
  observed window for a dataset), or, given nothing, the observed window;
- each deployment's GPU-hour price and topology, given by name (the command
  line's ``--gpu-hour-price`` and ``--topology``), set on the deployment once
  here, so every analysis reads them from it; a name that is no deployment's
  is refused;
- that a tile width cuts the window into equal tiles.

In Python, a price or a topology is the deployment's own
(:meth:`~inference_obs.deployment.Deployment.with_facts`, or
``hardware.gpu_hour_price`` in a deployments file).

A bad input raises :class:`~inference_obs.errors.ConfigurationError` naming it
(an unreadable or invalid deployments file,
:class:`~inference_obs.errors.DatasetError` naming the file). The command line
names its options instead of the parameters (:class:`InputNames`).

``inference_obs.report`` is both this subpackage and, at the top level, this
function: ``inference_obs`` binds ``report`` to the function once the
subpackage is loaded, and the import system never rebinds it. Reach the
subpackage's modules with ``from inference_obs.report.<module> import ...``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inference_obs.deployment import Deployment, check_names
from inference_obs.errors import ConfigurationError
from inference_obs.reading.resolution import Resolution, tile_ms

if TYPE_CHECKING:
    from inference_obs.report.build import Progress
    from inference_obs.report.model import Report
    from inference_obs.samples import Window
    from inference_obs.source.base import Source
    from inference_obs.source.dataset.manifest import Manifest
    from inference_obs.topology import Topology

__all__ = [
    "DEFAULT_TITLE",
    "DeploymentsInput",
    "InputNames",
    "ReportInputs",
    "report",
    "resolve_inputs",
]

#: A report's title when its source has none (a dataset has its manifest's).
DEFAULT_TITLE = "Observation report"

DeploymentsInput = str | os.PathLike[str] | Sequence[Deployment | str] | None
"""What a report is of: a deployments file, the deployments (or a dataset's
deployment names), or None for a dataset's own."""


@dataclass(frozen=True, slots=True)
class InputNames:
    """How an error names each input: the parameters of :func:`report` unless told otherwise.

    The command line passes its option names (``--deployments``,
    ``--gpu-hour-price``), so the same check speaks to each caller in its terms.
    """

    deployments: str = "deployments"
    window: str = "window"
    end: str = "end"
    gpu_hour_prices: str = "gpu_hour_prices"
    topologies: str = "topologies"
    resolution: str = "resolution"


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """What a report reads, resolved: its deployments and window, and how it is titled."""

    deployments: tuple[Deployment, ...]
    window: Window
    title: str = DEFAULT_TITLE
    scrape_interval_seconds: float | None = None
    methodology: tuple[str, ...] = ()


def resolve_inputs(
    deployments: DeploymentsInput = None,
    *,
    window: Window | str | None = None,
    end: datetime | None = None,
    dataset: Manifest | None = None,
    gpu_hour_prices: Mapping[str, float] | None = None,
    topologies: Mapping[str, Topology | str] | None = None,
    resolution: Resolution = "auto",
    names: InputNames = InputNames(),
) -> ReportInputs:
    """Decide the deployments and the window a report reads; check what names them.

    Parameters
    ----------
    deployments
        A deployments file, a list of Deployment (or of names of the
        dataset's deployments), or None: the dataset's deployments.
    window
        A Window, a duration such as ``"30m"``, ``"1h"`` or ``"6h"`` ending at
        ``end``, or None: the dataset's observed window.
    end
        Where a duration ``window`` ends, timezone-aware. Default: now (UTC,
        whole seconds) for a live source, the end of the observed window for
        a dataset.
    dataset
        The manifest of the dataset read; None for a live source, which then
        needs ``deployments`` and ``window``.
    gpu_hour_prices, topologies
        Keyed by deployment name; every key must name a deployment. Each is
        set on its deployment (over what a deployments file stated): GPU-hour
        rent, and the ``nvidia-smi topo -m`` text or its parsed Topology.
    resolution
        ``"auto"``, ``"scrape"`` or a tile width in seconds that cuts the window.
    names
        How errors name the inputs.

    Returns
    -------
    ReportInputs
        With the dataset's title, scrape interval and methodology, if any.

    Raises
    ------
    ConfigurationError
        Naming the input that is missing, of the wrong kind, or names no
        deployment; a price or topology out of range, naming its deployment.
    DatasetError
        A deployments file that is missing or invalid (naming the file).
    """
    chosen = _deployments(deployments, dataset, names)
    span = _window(window, end, dataset, names)
    chosen = _with_facts(chosen, gpu_hour_prices or {}, topologies or {}, names)
    _tiles_fit(resolution, span, names.resolution)
    if dataset is None:
        return ReportInputs(chosen, span)
    return ReportInputs(
        chosen,
        span,
        dataset.title,
        dataset.scrape_interval_seconds,
        tuple(dataset.methodology),
    )


def report(
    source: Source,
    deployments: DeploymentsInput = None,
    *,
    window: Window | str | None = None,
    end: datetime | None = None,
    title: str | None = None,
    source_name: str | None = None,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
    budget_s: float | None = None,
    resolution: Resolution = "auto",
    workers: int | None = None,
) -> Report:
    """A whole observation report of ``deployments`` over ``window``, read from ``source``.

    Parameters
    ----------
    source
        A :class:`~inference_obs.source.dataset.source.DatasetSource` (the
        deployments and the window default to its manifest's) or a live
        :class:`~inference_obs.source.prometheus.PrometheusSource`.
    deployments, window, end
        What to report on and when (see :func:`resolve_inputs`): for a live
        source a deployments file or list, and a duration (``window="1h"``,
        ending ``end``, default now) or a Window. A deployment's GPU-hour
        price and topology are its own (``hardware.gpu_hour_price`` in the
        file; :meth:`~inference_obs.deployment.Deployment.with_facts`).
    title
        Default: the dataset's title, else :data:`DEFAULT_TITLE`.
    source_name
        How the report names its source. Default: the dataset's path or the
        server's URL (never credentials).
    settings, progress, budget_s, resolution, workers
        As :func:`~inference_obs.report.build.build_report` takes them;
        ``settings`` maps an analysis name to its settings
        (``{"queueing": {"busy_threshold": 60}}``).

    Returns
    -------
    Report
        In Jupyter it shows a summary and names its figures and sections, each shown
        when asked (:meth:`Report.figure`, :meth:`Report.section`).

    Raises
    ------
    ConfigurationError
        A bad input, named, before any query (see :func:`resolve_inputs`).
    SourceError
        The source failed.

    Examples
    --------
    >>> import inference_obs as obs
    >>> report = obs.report(obs.DatasetSource("datasets/pro5000-vs-h20"))
    >>> [d.deployment.name for d in report.deployments], report.scope.windows["PRO"].seconds
    (['PRO', 'H20'], 3600.0)
    """
    # Here, not at the top: `import inference_obs` binds `report` to this function, and must
    # load neither the analyses, the sources nor numpy with it.
    from inference_obs.report.build import build_report
    from inference_obs.source.dataset.source import DatasetSource

    dataset = source.dataset.manifest if isinstance(source, DatasetSource) else None
    inputs = resolve_inputs(
        deployments,
        window=window,
        end=end,
        dataset=dataset,
        resolution=resolution,
    )
    return build_report(
        source,
        inputs.deployments,
        inputs.window,
        title=title or inputs.title,
        source_name=source_name or _source_name(source),
        scrape_interval_seconds=inputs.scrape_interval_seconds,
        methodology=inputs.methodology,
        settings=settings,
        progress=progress,
        budget_s=budget_s,
        resolution=resolution,
        workers=workers,
    )


def _source_name(source: Source) -> str:
    """The dataset's path, the server's URL (credentials already out of it), or the kind."""
    from inference_obs.source.dataset.source import DatasetSource  # not at the top: see report()
    from inference_obs.source.prometheus import PrometheusSource

    if isinstance(source, DatasetSource):
        return str(source.dataset.path)
    if isinstance(source, PrometheusSource):
        return source.url
    # Another source's repr may hold what it was opened with; its kind is safe to show.
    return type(source).__name__


def _deployments(
    given: DeploymentsInput, dataset: Manifest | None, names: InputNames
) -> tuple[Deployment, ...]:
    """The deployments ``given`` (read from a file, or picked by name), else the dataset's."""
    if given is None:
        if dataset is None:
            raise ConfigurationError(
                f"a live source needs {names.deployments}: a deployments file, as "
                "`inference-obs discover` writes it (see docs/deployments.md)"
            )
        return dataset.deployments
    if isinstance(given, str | os.PathLike):
        path = os.fspath(given)
        if not path:
            raise ConfigurationError(f"{names.deployments}: empty; give a file")
        from inference_obs.source.deployments_file import load_deployments  # see report()

        return load_deployments(Path(path))
    if isinstance(given, Deployment) or not isinstance(given, Sequence):
        raise ConfigurationError(
            f"{names.deployments}: expected a deployments file or a list of Deployment, "
            f"not {type(given).__name__}"
        )
    chosen = tuple(_one(item, i, dataset, names) for i, item in enumerate(given))
    if not chosen:
        raise ConfigurationError(f"{names.deployments}: empty; give at least one deployment")
    seen = [d.name for d in chosen]
    repeated = sorted({n for n in seen if seen.count(n) > 1})
    if repeated:
        raise ConfigurationError(f"{names.deployments}: names repeat: {', '.join(repeated)}")
    try:
        check_names(seen)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{names.deployments}: {exc}") from None
    return chosen


def _one(item: object, i: int, dataset: Manifest | None, names: InputNames) -> Deployment:
    """One entry of a deployments list: a Deployment, or a name of the dataset's."""
    if isinstance(item, Deployment):
        return item
    if not isinstance(item, str):
        raise ConfigurationError(
            f"{names.deployments}[{i}]: expected a Deployment or a deployment's name, "
            f"not {type(item).__name__}"
        )
    if dataset is None:
        raise ConfigurationError(
            f"{names.deployments}[{i}]: {item!r} is a name, and only a dataset has deployments "
            "to pick by name; give a deployments file or Deployment objects"
        )
    known = [d.name for d in dataset.deployments]
    if item not in known:
        raise ConfigurationError(
            f"{names.deployments}[{i}]: the dataset has no deployment named {item!r} "
            f"(there are {', '.join(known)})"
        )
    return dataset.deployments[known.index(item)]


def _window(
    given: Window | str | None, end: datetime | None, dataset: Manifest | None, names: InputNames
) -> Window:
    """``given`` as a Window: as is, a duration ending at ``end``, or the observed window."""
    from inference_obs.samples import Window  # not at the top: see report()

    if end is not None and not isinstance(given, str):
        kind = "a Window has its own end" if given is not None else "no duration was given"
        raise ConfigurationError(
            f"{names.end} is where a duration {names.window} such as '1h' ends, and {kind}"
        )
    if isinstance(given, Window):
        return given
    if isinstance(given, str):
        if end is None:
            end = dataset.window.end if dataset is not None else _now()
        return Window.ending(end, given)  # its errors name the window's length or end
    if given is None:
        if dataset is None:
            raise ConfigurationError(
                f"a live source needs {names.window}: how long before {names.end} to read, "
                "e.g. '1h'"
            )
        return dataset.window.window()
    raise ConfigurationError(
        f"{names.window}: expected a duration such as '1h' or a Window, not {type(given).__name__}"
    )


def _now() -> datetime:
    """Now in UTC to the whole second, as the command line's ``now``: edges that read cleanly."""
    return datetime.now(UTC).replace(microsecond=0)


def _named(given: Mapping[str, object], deployments: Sequence[Deployment], where: str) -> None:
    """Refuse a name in ``given`` that is no deployment's: its value would be ignored."""
    known = [d.name for d in deployments]
    for name in given:
        if name not in known:
            raise ConfigurationError(
                f"{where}: no deployment is named {name!r} (there are {', '.join(known)})"
            )


def _with_facts(
    deployments: tuple[Deployment, ...],
    prices: Mapping[str, float],
    topologies: Mapping[str, Topology | str],
    names: InputNames,
) -> tuple[Deployment, ...]:
    """Each deployment with the price and topology given for its name set on it."""
    _named(prices, deployments, names.gpu_hour_prices)
    _named(topologies, deployments, names.topologies)
    out = []
    for d in deployments:
        try:
            out.append(d.with_facts(gpu_hour_price=prices.get(d.name)))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{names.gpu_hour_prices}: {exc}") from None
        try:
            out[-1] = out[-1].with_facts(topology=topologies.get(d.name))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{names.topologies}: {exc}") from None
    return tuple(out)


def _tiles_fit(resolution: Resolution, window: Window, where: str) -> None:
    """Refuse a resolution that is no mode, or a tile width that does not cut ``window``."""
    if resolution in ("auto", "scrape"):
        return
    if isinstance(resolution, bool) or not isinstance(resolution, int | float):
        raise ConfigurationError(
            f"{where} {resolution!r}: expected 'auto', 'scrape' or a tile width in seconds"
        )
    try:
        tile_ms(window, resolution)
    except ValueError as exc:
        raise ConfigurationError(f"{where} {resolution:g}: {exc}") from None
