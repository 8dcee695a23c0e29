"""A run asks every analysis's declared first questions in one batch, and the analyses take
their answers from it: fewer requests, the same results as each analysis run alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from inference_obs.analyses.gpu import gpu
from inference_obs.analyses.latency import latency
from inference_obs.analyses.run import run_one
from inference_obs.analyses.throughput import throughput
from inference_obs.analyses.unit import Analysis
from inference_obs.query import Expr, to_promql
from inference_obs.reading.context import Reading
from inference_obs.reading.joined import PART
from inference_obs.reading.schedule import Pool
from inference_obs.samples import Instant
from inference_obs.source.base import EngineInfo
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.remembering import RememberingSource

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "h100-vs-h200"
DECLARING: tuple[Analysis[Any, Any], ...] = (latency, throughput, gpu)


class AsServer:
    """Delegates to a dataset source but answers as a server would (engine kind
    ``prometheus``, so several questions are joined into one query); records the number of
    parts of every instant query (1: asked alone)."""

    def __init__(self, source: DatasetSource) -> None:
        self.source = source
        self.parts: list[int] = []

    def info(self) -> EngineInfo:
        return replace(self.source.info(), kind="prometheus")

    def instant(self, expr: Expr, at: float) -> Instant:
        # joined() marks each part with one label_replace writing PART.
        self.parts.append(max(1, to_promql(expr).count(f'"{PART}"') // 2))
        return self.source.instant(expr, at)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)


@pytest.fixture(scope="module")
def source() -> DatasetSource:
    return DatasetSource(DATASET)


def test_declared_first_questions_are_one_request_and_answer_as_alone(
    source: DatasetSource,
) -> None:
    manifest = source.dataset.manifest
    deployment, window = manifest.deployments[0], manifest.window.window()
    declared = {
        expr
        for a in DECLARING
        if a.questions is not None
        for expr in a.questions(Reading(source, deployment, window, a.name), a.settings())
    }
    # latency: 7 histograms x (buckets, 4 quantiles, observations); throughput: 3 totals
    # and 2 maxima; GPUs: 4 means.
    assert len(declared) == 7 * 6 + 5 + 4
    server = AsServer(source)
    with Pool(4):
        ran = run_one(RememberingSource(server), deployment, window, analyses=DECLARING)
    # One request holds every declared question; none holds one analysis's first round alone.
    assert server.parts.count(len(declared)) == 1
    assert 7 * 6 not in server.parts
    for a in DECLARING:
        alone = a(AsServer(source), deployment, window)  # each asks its own first round
        assert ran.of(a).model_dump_json() == alone.model_dump_json()
