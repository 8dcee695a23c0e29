"""Export an observation dataset from any source: read-only, sanitised, with methodology.

:func:`export_dataset` fetches the raw samples of the deployments' series
through :meth:`Source.raw <inference_obs.source.base.Source.raw>` only (so a
live Prometheus is read, never written), renames identifying labels with
:func:`~inference_obs.source.dataset.sanitise.sanitise`, and writes a dataset with
:func:`~inference_obs.source.dataset.writer.write_dataset`: the manifest says what was
read, over which window, at which observed scrape interval and what was
renamed; ``aggregates.json`` holds the numbers an ``aggregates`` function
computes from the written samples.

The aggregates are computed by the caller's function because analyses sit
above sources in the layers: pass
:func:`inference_obs.analyses.verify.published_aggregates`, which
:func:`~inference_obs.report.verify.verify_dataset` can recompute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from inference_obs.deployment import Deployment
from inference_obs.engine.rules import Rules
from inference_obs.errors import DatasetError, NoDataError
from inference_obs.metrics import MetricType
from inference_obs.metrics.family import Family
from inference_obs.query import Matcher, Selector
from inference_obs.samples import Labels, SampleSet, Series, Window, is_stale
from inference_obs.source.base import EngineInfo, Source
from inference_obs.source.dataset.manifest import Manifest, ManifestWindow
from inference_obs.source.dataset.reader import Dataset
from inference_obs.source.dataset.redaction import RedactionRules
from inference_obs.source.dataset.sanitise import sanitise
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.dataset.writer import write_dataset
from inference_obs.version import __version__

__all__ = ["Aggregates", "Export", "export_dataset"]

#: Computes published numbers from a source holding the exported samples.
Aggregates = Callable[[Source, Sequence[Deployment], Window], Mapping[str, Any]]


@dataclass(frozen=True, slots=True, eq=False)
class Export:
    """A written dataset, and the pseudonyms it was written with (in memory only).

    Attributes
    ----------
    dataset
        The dataset as written.
    pseudonyms
        Label -> original value -> published value. Not in the dataset: keep
        it private to map published names back to your own.
    """

    dataset: Dataset
    pseudonyms: Mapping[str, Mapping[str, str]]

    def __repr__(self) -> str:
        return f"Export({str(self.dataset.path)!r}, renamed labels {sorted(self.pseudonyms)})"


def export_dataset(
    source: Source,
    deployments: Sequence[Deployment],
    window: Window,
    out: Path,
    *,
    title: str,
    rules: RedactionRules | None = None,
    families: Sequence[Family] | None = None,
    methodology: Sequence[str] = (),
    aggregates: Aggregates | None = None,
) -> Export:
    """Read the deployments' raw samples in ``window``, sanitise them and write a dataset.

    Parameters
    ----------
    source
        Where the samples come from; only :meth:`~Source.raw` and
        :meth:`~Source.info` are called.
    deployments
        What was observed; their selectors pick the series, and the manifest
        holds them with selectors rewritten to the published label values.
    window
        Every sample with ``start <= t <= end`` (unix ms) is exported.
    out
        A new or empty directory.
    title
        One line saying what was observed (checked for original label values).
    rules
        What to rename, drop and keep (default :class:`RedactionRules()`).
    families
        Catalogue families to export (every part of a histogram, every alias;
        DCGM families by each deployment's GPU selector). ``None`` exports
        every series each deployment's selectors match.
    methodology
        Lines appended to the manifest's methodology.
    aggregates
        Computes ``aggregates.json`` from a source over the sanitised samples
        and the rewritten deployments; ``None`` writes no aggregates. That
        source follows the rules of ``source``'s engine (Prometheus 2 rules
        for VictoriaMetrics, whose histogram_quantile has no local model).

    Returns
    -------
    Export
        The dataset written, and the pseudonyms (never written).

    Raises
    ------
    NoDataError
        If no selected series has a sample in the window.
    DatasetError
        If sanitisation is impossible (see
        :func:`~inference_obs.source.dataset.sanitise.sanitise`), free text holds an
        original value of a renamed label, or ``out`` is not empty.
    """
    deployments = tuple(deployments)
    info = source.info()
    # The local engine has no model of MetricsQL's histogram_quantile: numbers
    # from VictoriaMetrics data follow Prometheus 2 rules, and say so.
    engine_rules = Rules.PROMETHEUS_2 if info.rules is Rules.VICTORIAMETRICS else info.rules
    samples, stale = _fetch(source, _selectors(deployments, families), window)
    if not len(samples):
        names = ", ".join(d.name for d in deployments)
        raise NoDataError(f"no series of {names} has a sample in the window")
    scrapes = _scrape_interval(samples)
    clean = sanitise(samples, deployments, rules)
    method = _methodology(info, families, window, samples, stale, engine_rules, scrapes)
    manifest = Manifest(
        title=title,
        synthetic=False,
        window=ManifestWindow(start=window.start, end=window.end),
        scrape_interval_seconds=scrapes[0],
        deployments=clean.deployments,
        methodology=(*method, *methodology),
        sanitisation=clean.notes,
    )
    numbers = None
    if aggregates is not None:
        written = Dataset(Path(out), manifest, clean.samples, None, None)
        numbers = aggregates(DatasetSource(written, rules=engine_rules), clean.deployments, window)
    clean.check_published(_texts(manifest.model_dump(mode="json")), "the manifest")
    clean.check_published(_texts(numbers), "the aggregates")
    dataset = write_dataset(Path(out), manifest, clean.samples, aggregates=numbers)
    return Export(dataset, clean.pseudonyms)


def _methodology(
    info: EngineInfo,
    families: Sequence[Family] | None,
    window: Window,
    samples: SampleSet,
    stale: int,
    rules: Rules,
    scrapes: tuple[float, tuple[float, float]],
) -> tuple[str, ...]:
    """How the export was read, in the manifest's words: source, window, scrape gaps, rules."""
    interval, gaps = scrapes
    read = (
        f"the catalogue families {', '.join(f.name for f in families)}"
        if families is not None
        else "every series matching a deployment's selector or GPU selector"
    )
    dropped = f"{stale:,} staleness markers dropped (OpenMetrics text cannot carry them)."
    return (
        f"Exported read-only with inference_obs {__version__} from a {info.kind} source"
        + (f" (version {info.version})" if info.version else "")
        + f": raw samples of {read}, fetched with range selectors; nothing was written to it.",
        f"Window {window.start.isoformat()} to {window.end.isoformat()} ({window.seconds:g} s), "
        "both ends included: "
        f"{len(samples)} series, {int(samples.offsets[-1]):,} samples.",
        f"Scrape interval observed: {interval:g} s, the median gap between consecutive samples "
        f"of a series (gaps from {gaps[0]:g} s to {gaps[1]:g} s).",
        *([dropped] if stale else []),
        f"Numbers in aggregates.json follow the local engine's {rules.value} rules.",
    )


def _selectors(
    deployments: Sequence[Deployment], families: Sequence[Family] | None
) -> list[Selector]:
    """Every selector to fetch, each once, in a stable order."""
    out: dict[Selector, None] = {}
    for deployment in deployments:
        sets = dict.fromkeys((deployment.matchers, deployment.gpu_matchers))
        if families is None:
            out.update((Selector(None, m), None) for m in sets)
            continue
        for family in families:
            matchers: tuple[Matcher, ...] = (
                deployment.gpu_matchers if family.exporter == "dcgm" else deployment.matchers
            )
            parts = ("_bucket", "_sum", "_count") if family.type is MetricType.HISTOGRAM else ("",)
            out.update(
                (Selector(name + part, matchers), None) for name in family.names for part in parts
            )
    return list(out)


def _fetch(source: Source, selectors: Sequence[Selector], window: Window) -> tuple[SampleSet, int]:
    """The union of the selected series (each once, staleness markers dropped) and how
    many markers were dropped."""
    found: dict[tuple[str, Labels], Series] = {}
    stale = 0
    for selector in selectors:
        for one in source.raw(selector, window):
            marker = is_stale(one.values)
            stale += int(marker.sum()) if (one.name, one.labels) not in found else 0
            keep = ~marker
            if keep.any():
                found.setdefault(
                    (one.name, one.labels),
                    Series(one.name, one.labels, one.timestamps[keep], one.values[keep]),
                )
    return SampleSet.from_series(found[key] for key in sorted(found, key=_order)), stale


def _order(key: tuple[str, Labels]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return key[0], tuple(key[1].items())


def _scrape_interval(samples: SampleSet) -> tuple[float, tuple[float, float]]:
    """Median gap between consecutive samples of a series, and the smallest and largest, s."""
    gaps = np.diff(samples.t_ms)
    # Gaps across two series' boundaries are not gaps of a series.
    inside = np.ones(gaps.size, dtype=bool)
    bounds = samples.offsets[1:-1] - 1
    inside[bounds[(bounds >= 0) & (bounds < gaps.size)]] = False
    gaps = gaps[inside]
    if not gaps.size:
        raise DatasetError(
            "no series has two samples in the window, so no scrape interval can be observed; "
            "widen the window"
        )
    median = float(np.median(gaps)) / 1000
    return median, (float(gaps.min()) / 1000, float(gaps.max()) / 1000)


def _texts(data: object) -> list[str]:
    """Every string in JSON-like data: keys and values."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, Mapping):
        return [s for k, v in data.items() for s in (*_texts(k), *_texts(v))]
    if isinstance(data, list | tuple):
        return [s for item in data for s in _texts(item)]
    return []
