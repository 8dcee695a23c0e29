"""Recompute a dataset's published numbers from its samples, and say where they differ.

``aggregates.json`` comes in two layouts, and :func:`verify_published` checks both
(:func:`~inference_obs.report.verify.verify_dataset` reads a dataset directory for it):

**Measurements** (``"schema": "inference-obs-aggregates/1"``, described in
:mod:`inference_obs.analyses.published`), written by
:func:`~inference_obs.source.dataset.export.export_dataset` with
:func:`~inference_obs.analyses.published.published_aggregates`. Every
measurement is recomputed by the same analyses over the dataset's samples
under the same rules; each value, and each bound, is one row.

**Simulated** (``"synthetic": true`` with ``realised`` and ``targets``), written
by the simulator (:mod:`inference_obs.simulate.aggregates`). Its ``realised``
numbers mostly come from the ground truth (request records over the whole
window) or count engine events up to the window's edges; the samples hold
only counters and buckets between the first and last scrape in the window,
which bound such numbers but cannot reproduce them. Those that are
statistics of the sampled series are recomputed (:data:`FROM_ANALYSES`,
:data:`FROM_SAMPLES`); the request figures are recomputed from the ground
truth where the dataset ships it (``requests.csv``,
:mod:`~inference_obs.analyses.verify_requests`); every other number (engine
events), and every ``targets`` number, is listed as ``not_recomputable`` with
the reason. The simulator keeps 6 significant digits, so half a unit of the
sixth digit is added to the tolerance.

Any other layout lists its numbers as ``not_recomputable``.

Whatever the layout, a dataset that ships ``requests.csv`` also has every
latency mean and quantile bound of a report checked against it
(:mod:`~inference_obs.analyses.verify_truth`; rows keyed ``truth.``). A number
with no value on either side is ``absent``, never ``ok``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from inference_obs.analyses.published import (
    ANALYSES,
    FIRST_SCHEMA,
    SCHEMA,
    published_aggregates,
)
from inference_obs.analyses.run import run_one
from inference_obs.analyses.verify_requests import FROM_REQUESTS, request_figures
from inference_obs.analyses.verify_rows import RowStatus, VerifyRow
from inference_obs.analyses.verify_truth import truth_rows
from inference_obs.deployment import Deployment
from inference_obs.engine.rules import Rules
from inference_obs.errors import DatasetError
from inference_obs.metrics import dcgm, vllm
from inference_obs.metrics.family import Family
from inference_obs.query import Matcher
from inference_obs.reading.context import Source
from inference_obs.reading.measurement import number_from_json
from inference_obs.samples import Window

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FROM_ANALYSES",
    "FROM_SAMPLES",
    "Published",
    "RowStatus",
    "VerifyResult",
    "VerifyRow",
    "verify_published",
]

#: Simulator ``realised`` keys that an analysis measures, by ``analysis/statistic``.
FROM_ANALYSES: Mapping[str, str] = {
    "max_sampled_waiting": "throughput/waiting_max",
    "gpu_util_mean_percent": "gpu/utilization_mean",
    "gpu_power_mean_watts": "gpu/power_mean_watts",
}
#: Simulator ``realised`` keys that are the max or mean of a gauge's raw samples.
FROM_SAMPLES: Mapping[str, tuple[Family, tuple[tuple[str, str], ...], str]] = {
    "max_sampled_running": (vllm.NUM_REQUESTS_RUNNING, (), "max"),
    "max_sampled_waiting_capacity": (
        vllm.NUM_REQUESTS_WAITING_BY_REASON,
        (("reason", "capacity"),),
        "max",
    ),
    "max_sampled_waiting_deferred": (
        vllm.NUM_REQUESTS_WAITING_BY_REASON,
        (("reason", "deferred"),),
        "max",
    ),
    "gpu_dram_active_mean": (dcgm.PROF_DRAM_ACTIVE, (), "mean"),
    "gpu_tensor_active_mean": (dcgm.PROF_PIPE_TENSOR_ACTIVE, (), "mean"),
}
_GROUND_TRUTH = (
    "from the ground-truth request records, which the samples do not hold and this dataset "
    "does not ship (requests.csv)"
)
_FROM_TRUTH = "recomputed from requests.csv"
_ENGINE_EVENTS = (
    "counts engine events up to the window's edges; counters are sampled only at the scrapes, "
    "and requests.csv holds requests, not engine steps"
)
_NOT_RECOMPUTABLE: Mapping[str, str] = {
    **dict.fromkeys(
        (
            "requests_finished",
            "finish_reason_shares",
            "client_aborts_unrecorded",
            "ttft_seconds",
            "tpot_seconds",
            "e2e_seconds",
            "queue_seconds",
            "prefill_seconds",
            "decode_seconds",
            "mean_prompt_tokens",
            "mean_output_tokens",
            "mean_max_tokens",
            "share_max_tokens_le_20",
            "share_max_tokens_le_50",
            "prefix_cache_hit_rate",
            "external_cache_hit_rate",
            "mean_in_flight_requests",
        ),
        _GROUND_TRUTH,
    ),
    **dict.fromkeys(
        (
            "generated_tokens",
            "output_tokens_per_second",
            "output_tokens_per_second_per_replica",
            "mean_acceptance_length",
            "preemptions",
            "inter_token_latency_seconds",
        ),
        _ENGINE_EVENTS,
    ),
}
_TARGETS = "a target of the scenario (the observation it is shaped after), not of the samples"
# Significant digits the simulator keeps in aggregates.json.
_SIMULATED_DIGITS = 6


class VerifyResult(BaseModel):
    """Every published number of a dataset, recomputed from its samples.

    Attributes
    ----------
    passed
        True when at least one number was recomputed and none differs or is missing.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    layout: str = Field(description="'measurements', 'simulated', 'unknown' or 'none'.")
    rules: str
    rows: tuple[VerifyRow, ...]

    @property
    def failures(self) -> tuple[VerifyRow, ...]:
        """Rows that differ, are missing, or whose bound excludes the ground truth."""
        failing = (RowStatus.DIFFERS, RowStatus.MISSING, RowStatus.OUTSIDE)
        return tuple(r for r in self.rows if r.status in failing)

    @property
    def passed(self) -> bool:
        """Whether something was recomputed and everything recomputed agrees."""
        unchecked = (RowStatus.NOT_RECOMPUTABLE, RowStatus.ABSENT)
        checked = any(r.status not in unchecked for r in self.rows)
        return checked and not self.failures

    def to_frame(self) -> pd.DataFrame:
        """One row per number: key, published, recomputed, difference, tolerance, status, reason."""
        import pandas as pd  # here, not at the top: `import inference_obs` stays free of pandas

        columns = list(VerifyRow.model_fields)
        return pd.DataFrame([r.model_dump(mode="json") for r in self.rows], columns=columns)

    def _repr_html_(self) -> str:
        def cell(value: object) -> str:
            text = "—" if value is None else f"{value:.6g}" if isinstance(value, float) else value
            return f"<td>{html.escape(str(text))}</td>"

        head = "".join(f"<th>{name}</th>" for name in VerifyRow.model_fields)
        body = "".join(
            "<tr>" + "".join(cell(getattr(r, name)) for name in VerifyRow.model_fields) + "</tr>"
            for r in self.rows
        )
        return f"<table><tr>{head}</tr>{body}</table>"


@dataclass(frozen=True)
class Published:
    """What a dataset publishes beside its samples, as :func:`verify_published` reads it.

    Attributes
    ----------
    path
        The dataset directory, as it is to be named.
    aggregates
        The published numbers (``aggregates.json``), or None.
    where
        How a problem in ``aggregates`` is located (the file's path).
    window, deployments
        The dataset's window and deployments (its manifest).
    requests
        The ground-truth request records (``requests.csv``), or None.
    """

    path: str
    aggregates: Mapping[str, Any] | None
    where: str
    window: Window
    deployments: Sequence[Deployment]
    requests: pd.DataFrame | None


def verify_published(
    published: Published, samples: Callable[[Rules | None], Source], *, rel_tol: float = 1e-9
) -> VerifyResult:
    """Recompute the numbers ``published`` holds from the dataset's samples.

    Parameters
    ----------
    published
        The dataset's published numbers and what they cover.
    samples
        The dataset's samples as a source, under the given rules (None: the
        dataset's own).
    rel_tol
        Relative tolerance: a difference up to ``rel_tol`` times the larger
        magnitude counts as equal (plus the rounding of simulated numbers).

    Returns
    -------
    VerifyResult
        One row per published number; no rows when there are none.

    Raises
    ------
    DatasetError
        If the aggregates name an unknown rule set or an invalid window.
    NotSupportedOffline
        If the aggregates name ``victoriametrics`` rules, whose
        histogram_quantile the local engine does not model.
    """
    aggregates, where = published.aggregates, published.where
    if aggregates is None:
        return VerifyResult(path=published.path, layout="none", rules="", rows=())
    window, deployments = published.window, published.deployments
    if aggregates.get("schema") in (SCHEMA, FIRST_SCHEMA):
        rules = _rules(aggregates.get("rules"), where)
        window = _window(aggregates.get("window"), where)
        rows = _verify_measurements(samples(rules), deployments, window, aggregates, rel_tol)
        layout = "measurements"
    elif aggregates.get("synthetic") is True and isinstance(aggregates.get("realised"), dict):
        source = samples(None)
        rules = source.info().rules
        rows = _verify_simulated(
            source, deployments, window, aggregates, rel_tol, published.requests
        )
        layout = "simulated"
    else:
        rules = Rules.PROMETHEUS_2
        reason = f"unknown layout: neither 'schema': {SCHEMA!r} nor the simulator's 'realised'"
        rows = [_unrecomputable(k, v, reason) for k, v in _leaves(aggregates, "")]
        layout = "unknown"
    requests = published.requests
    if requests is not None and not requests.empty:
        rows += truth_rows(samples(rules), deployments, window, requests, rel_tol)
    return VerifyResult(path=published.path, layout=layout, rules=rules.value, rows=tuple(rows))


def _verify_measurements(
    source: Source,
    deployments: Sequence[Deployment],
    window: Window,
    published: Mapping[str, Any],
    rel_tol: float,
) -> list[VerifyRow]:
    again = published_aggregates(source, deployments, window)["measurements"]
    entries = published.get("measurements")
    if not isinstance(entries, dict):
        return []
    rows = []
    for key, entry in sorted(entries.items()):
        if not isinstance(entry, dict):
            rows.append(_missing(key, None, "not an object with a value"))
            continue
        if key not in again:
            rows.append(
                _missing(
                    key, number_from_json(entry.get("value")), "no such measurement is recomputed"
                )
            )
            continue
        other = again[key]
        value, value_again = number_from_json(entry.get("value")), number_from_json(other["value"])
        row = _compare(key, value, value_again, rel_tol, 0.0)
        if row.status is RowStatus.OK and entry.get("status") != other["status"]:
            why = f"status published {entry.get('status')!r}, recomputed {other['status']!r}"
            row = row.model_copy(update={"status": RowStatus.DIFFERS, "reason": why})
        rows.append(row)
        bounds, bounds_again = _bounds(entry.get("bounds")), _bounds(other["bounds"])
        for name, a, b in zip(("lower", "upper"), bounds, bounds_again, strict=True):
            if a is not None or b is not None:
                rows.append(_compare(f"{key}.{name}", a, b, rel_tol, 0.0))
    return rows


def _bounds(written: object) -> tuple[float | None, float | None]:
    """Bounds as written: ``{"lower", "upper"}``, ``[lower, upper]`` (the first layout), or null."""
    if isinstance(written, dict):
        return number_from_json(written.get("lower")), number_from_json(written.get("upper"))
    if isinstance(written, list) and len(written) == 2:
        return number_from_json(written[0]), number_from_json(written[1])
    return None, None


def _measured(source: Source, deployment: Deployment, window: Window) -> dict[str, float | None]:
    """The published analyses' values for ``deployment``, by Measurement key."""
    ran = run_one(source, deployment, window, analyses=ANALYSES)
    return {m.key: m.value for m in ran.measurements()}


def _verify_simulated(
    source: Source,
    deployments: Sequence[Deployment],
    window: Window,
    published: Mapping[str, Any],
    rel_tol: float,
    requests: pd.DataFrame | None,
) -> list[VerifyRow]:
    rows = [
        _unrecomputable(k, v, _TARGETS) for k, v in _leaves(published.get("targets"), "targets")
    ]
    by_name = {d.name: d for d in deployments}
    figures = request_figures(requests, window.seconds) if requests is not None else {}
    for name, numbers in sorted(published["realised"].items()):
        deployment = by_name.get(name)
        measured = _measured(source, deployment, window) if deployment else {}
        prefix = f"realised.{name}"
        truth = dict(_leaves(figures.get(name, {}), prefix))
        for key, value in _leaves(numbers, prefix):
            statistic = key[len(prefix) + 1 :].split(".")[0]
            if deployment is None:
                rows.append(_unrecomputable(key, value, f"no deployment {name} in the manifest"))
            elif statistic in FROM_ANALYSES:
                again = measured[f"{name}/{FROM_ANALYSES[statistic]}"]
                rows.append(_compare(key, value, again, rel_tol, _rounding(value)))
            elif statistic in FROM_SAMPLES:
                again = _sampled(source, deployment, window, *FROM_SAMPLES[statistic])
                rows.append(_compare(key, value, again, rel_tol, _rounding(value)))
            elif statistic in FROM_REQUESTS and requests is not None:
                row = _compare(key, value, truth.get(key), rel_tol, _rounding(value))
                rows.append(row.model_copy(update={"reason": row.reason or _FROM_TRUTH}))
            else:
                reason = _NOT_RECOMPUTABLE.get(statistic, "no recipe recomputes it from samples")
                rows.append(_unrecomputable(key, value, reason))
    return rows


def _sampled(
    source: Source,
    deployment: Deployment,
    window: Window,
    family: Family,
    labels: tuple[tuple[str, str], ...],
    reduce: str,
) -> float | None:
    """Max or mean of every raw sample of ``family`` in the window (None without samples)."""
    base = deployment.gpu_matchers if family.exporter == "dcgm" else deployment.matchers
    matchers = (*base, *(Matcher.equal(k, v) for k, v in labels))
    values = source.raw(family.select(matchers), window).values
    values = values[~np.isnan(values)]
    if not values.size:
        return None
    return float(values.max() if reduce == "max" else values.mean())


def _compare(
    key: str, published: float | None, recomputed: float | None, rel_tol: float, rounding: float
) -> VerifyRow:
    if recomputed is not None and math.isnan(recomputed):
        recomputed = None
    if published is not None and recomputed is not None and math.isinf(published + recomputed):
        status = RowStatus.OK if published == recomputed else RowStatus.DIFFERS
        return VerifyRow(key=key, published=published, recomputed=recomputed, status=status)
    if published is None or recomputed is None:
        if published is None and recomputed is None:
            # Agreeing absence is not a comparison: said as such, neither ok nor a failure.
            why = "neither published nor recomputed has a number"
            return VerifyRow(
                key=key, published=None, recomputed=None, status=RowStatus.ABSENT, reason=why
            )
        side = "published" if published is None else "recomputed"
        return _missing(key, published, f"no {side} number", recomputed)
    difference = recomputed - published
    tolerance = rel_tol * max(abs(published), abs(recomputed)) + rounding
    status = RowStatus.OK if abs(difference) <= tolerance else RowStatus.DIFFERS
    return VerifyRow(
        key=key,
        published=published,
        recomputed=recomputed,
        difference=difference,
        tolerance=tolerance,
        status=status,
    )


def _missing(
    key: str, published: float | None, reason: str, recomputed: float | None = None
) -> VerifyRow:
    status = RowStatus.MISSING
    return VerifyRow(
        key=key, published=published, recomputed=recomputed, status=status, reason=reason
    )


def _unrecomputable(key: str, published: float | None, reason: str) -> VerifyRow:
    status = RowStatus.NOT_RECOMPUTABLE
    return VerifyRow(key=key, published=published, recomputed=None, status=status, reason=reason)


def _rounding(value: float | None) -> float:
    """Half a unit of the last of the simulator's significant digits of ``value``."""
    if not value:
        return 0.0
    exponent = math.floor(math.log10(abs(value))) - (_SIMULATED_DIGITS - 1)
    # A relative 1e-12 more absorbs the binary rounding of the decimal text.
    return 0.5 * 10.0**exponent * (1 + 1e-12)


def _leaves(data: object, prefix: str) -> Iterator[tuple[str, float | None]]:
    """(dotted path, number or None) of every number and null in JSON data; text skipped."""
    if isinstance(data, Mapping):
        for key, value in sorted(data.items()):
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from _leaves(value, f"{prefix}[{i}]")
    elif data is None or (isinstance(data, int | float) and not isinstance(data, bool)):
        yield prefix, number_from_json(data)


def _rules(value: object, where: str) -> Rules:
    try:
        return Rules(str(value))
    except ValueError:
        known = ", ".join(r.value for r in Rules)
        raise DatasetError(f"{where}: rules {value!r} is not one of {known}") from None


def _window(value: object, where: str) -> Window:
    problem = f"{where}: window must be {{'start': ISO 8601, 'end': ISO 8601}} with offsets"
    if not isinstance(value, dict) or not all(
        isinstance(value.get(k), str) for k in ("start", "end")
    ):
        raise DatasetError(problem)
    try:
        return Window(datetime.fromisoformat(value["start"]), datetime.fromisoformat(value["end"]))
    except ValueError as exc:
        raise DatasetError(f"{problem} ({exc})") from None
