"""Every analysis gives the same Measurements offline and from a real Prometheus.

For each bundled dataset and each of its deployments, ``latency``, ``replicas``
(each replica's quantiles and exact means), ``shapes``, ``cache``,
``throughput``, ``gpu``, ``cost`` (at a fixed GPU-hour price,
with SLAs and token prices) and ``slo`` (its default targets) run twice over
the manifest window: through
:class:`~inference_obs.source.dataset.source.DatasetSource` and through
:class:`~inference_obs.source.prometheus.PrometheusSource` on Prometheus 2.42
holding the same samples (backfilled with promtool). Every Measurement, by
key, has the same status, the same value to 1e-9 relative (NaN and None
equal to themselves) and the same bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from inference_obs.analyses.cache import cache
from inference_obs.analyses.cost import TokenPrices, cost
from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import latency
from inference_obs.analyses.replicas import replicas
from inference_obs.analyses.shapes import shapes
from inference_obs.analyses.slo import slo
from inference_obs.analyses.throughput import throughput
from inference_obs.analyses.validity.verdicts import validity
from inference_obs.deployment import Deployment
from inference_obs.engine.rules import Rules
from inference_obs.reading.measurement import Bounds, Measurement
from inference_obs.reading.result import AnalysisResult
from inference_obs.samples import Window
from inference_obs.source.base import Source
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import PrometheusServer

pytestmark = pytest.mark.integration

DATASETS = sorted(
    p for p in (Path(__file__).resolve().parents[2] / "datasets").iterdir() if p.is_dir()
)
RELATIVE = 1e-9
PRICES = TokenPrices(
    input_per_million=0.14, cached_input_per_million=0.028, output_per_million=0.28
)
Analysis = Callable[[Source, Deployment, Window], AnalysisResult]


def _cost(source: Source, deployment: Deployment, window: Window) -> AnalysisResult:
    return cost(
        source, deployment.with_facts(gpu_hour_price=2.5), window, sla_ttft_s=1.0, sla_e2e_s=12.0,
        prices=PRICES,
    )  # fmt: skip


ANALYSES: dict[str, Analysis] = {
    "latency": latency,
    "replicas": replicas,
    "shapes": shapes,
    "slo": slo,
    "cache": cache,
    "throughput": throughput,
    "gpu": gpu,
    "cost": _cost,
}


@pytest.fixture(scope="module", params=DATASETS, ids=lambda p: p.name)
def backfilled(
    request: pytest.FixtureRequest, shipped_prometheus: Callable[[Path], PrometheusServer]
) -> tuple[Dataset, PrometheusSource]:
    path: Path = request.param
    return read_dataset(path), PrometheusSource(shipped_prometheus(path).base_url)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=RELATIVE)


def _same_bounds(a: Bounds | None, b: Bounds | None) -> bool:
    if a is None or b is None:
        return a is b
    return _close(a.lower, b.lower) and _close(a.upper, b.upper)


def _by_key(result: AnalysisResult) -> dict[str, Measurement]:
    out: dict[str, Measurement] = {}
    for m in result.measurements():
        assert m.key not in out, f"duplicate key {m.key}"
        out[m.key] = m
    return out


def _disagreements(local: AnalysisResult, remote: AnalysisResult) -> list[str]:
    a, b = _by_key(local), _by_key(remote)
    wrong = [f"{k}: only {'offline' if k in a else 'server'}" for k in sorted(a.keys() ^ b.keys())]
    for key in sorted(a.keys() & b.keys()):
        x, y = a[key], b[key]
        if x.status != y.status or not _close(x.value, y.value):
            wrong.append(f"{key}: offline {x.status} {x.value!r}, server {y.status} {y.value!r}")
        elif not _same_bounds(x.bounds, y.bounds):
            wrong.append(f"{key}: bounds offline {x.bounds}, server {y.bounds}")
    return wrong


def test_analyses_agree_with_prometheus(backfilled: tuple[Dataset, PrometheusSource]) -> None:
    dataset, server = backfilled
    local = DatasetSource(dataset, rules=Rules.PROMETHEUS_2)
    window = dataset.manifest.window.window()
    wrong: list[str] = []
    compared = answered = 0
    for deployment in dataset.manifest.deployments:
        for name, analysis in ANALYSES.items():
            offline = analysis(local, deployment, window)
            remote = analysis(server, deployment, window)
            wrong += [f"{name}: {line}" for line in _disagreements(offline, remote)]
            measurements = offline.measurements()
            compared += len(measurements)
            answered += sum(m.ok for m in measurements)
    assert not wrong, f"{len(wrong)} of {compared} disagree:\n" + "\n".join(wrong)
    # Agreement on no_data alone would prove little: most Measurements have values.
    assert answered > compared / 2, f"only {answered} of {compared} have a value"


#: The bundled datasets with deployments to compare.
COMPARED = [p for p in DATASETS if len(read_dataset(p).manifest.deployments) > 1]


@pytest.mark.parametrize("path", COMPARED, ids=lambda p: p.name)
def test_validity_agrees_with_prometheus(
    path: Path, shipped_prometheus: Callable[[Path], PrometheusServer]
) -> None:
    server_process = shipped_prometheus(path)
    server, dataset = PrometheusSource(server_process.base_url), read_dataset(path)
    deployments = dataset.manifest.deployments
    assert len(COMPARED) >= 2
    local = DatasetSource(dataset, rules=Rules.PROMETHEUS_2)
    window = dataset.manifest.window.window()
    offline = validity(local, deployments, window)
    remote = validity(server, deployments, window)
    assert [f.code for p in offline.pairs for f in p.findings] == [
        f.code for p in remote.pairs for f in p.findings
    ]
    for mine, theirs in zip(offline.pairs, remote.pairs, strict=True):
        for key, verdict in mine.verdicts.items():
            other = theirs.verdicts[key]
            assert (verdict.verdict, verdict.findings) == (other.verdict, other.findings), key
            for name, value in verdict.values.items():
                assert _close(value, other.values[name]), (key, name)
        for f, g in zip(mine.findings, theirs.findings, strict=True):
            assert f.affects == g.affects, f.code
            for e, h in zip(f.evidence, g.evidence, strict=True):
                for name, shown in e.values.items():
                    other_shown = h.values[name]
                    if isinstance(shown, float) and isinstance(other_shown, float):
                        assert _close(shown, other_shown), (f.code, e.statistic, name)
                    else:
                        assert shown == other_shown, (f.code, e.statistic, name)
