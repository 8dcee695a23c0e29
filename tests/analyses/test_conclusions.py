"""The judgement is an analysis: the Summary and the cautions come from the typed results of
the other analyses (runs, verdicts, time line, regimes), without a report, and are what the
report renders."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

from inference_obs.analyses.conclusions import (
    ScopeFacts,
    cautions,
    cited,
    conclusions,
    judged,
)
from inference_obs.analyses.regime import judge
from inference_obs.analyses.run import DeploymentResults, run
from inference_obs.analyses.timeline import timeline
from inference_obs.analyses.validity.verdicts import ValidityResult, compare
from inference_obs.report import build_report
from inference_obs.report.report_json import report_json
from inference_obs.source.dataset.source import DatasetSource

ROOT = Path(__file__).parents[2]
DATASET = ROOT / "datasets" / "pro5000-vs-h20"


@pytest.fixture(scope="module")
def analysed(source: DatasetSource) -> tuple[list[DeploymentResults], ValidityResult]:
    window = source.dataset.manifest.window.window()
    deployments = source.dataset.manifest.deployments
    runs = run(source, deployments, {d.name: window for d in deployments})
    return runs, compare(source, runs)


def test_the_judgement_imports_nothing_of_the_report() -> None:
    # Type-only imports included: the judgement reads typed results, never a Report.
    graph = grimp.build_graph("inference_obs", cache_dir=None)
    assert not graph.chain_exists(
        importer="inference_obs.analyses.conclusions",
        imported="inference_obs.report",
        as_packages=True,
    )


def test_the_summary_judged_from_typed_results_is_the_reports(
    source: DatasetSource, analysed: tuple[list[DeploymentResults], ValidityResult]
) -> None:
    # The analyses' results alone, judged, say what the report's Summary and "What not to
    # conclude" say, in that order ...
    runs, verdicts = analysed
    manifest = source.dataset.manifest
    facts = ScopeFacts.of(manifest.methodology)
    seen = judged(runs, verdicts, timeline(runs), facts)
    built = build_report(
        source,
        manifest.deployments,
        manifest.window.window(),
        title="t",
        source_name="dataset",
        methodology=manifest.methodology,
    )
    written = report_json(built)
    assert [c.model_dump(mode="json") for c in conclusions(seen).entries] == [
        {k: v for k, v in c.items() if k not in ("rank", "anchor")} for c in written["summary"]
    ]
    assert [c.model_dump(mode="json") for c in cautions(seen).entries] == written["cautions"]
    # ... the first caution saying the data are synthetic: a scope fact, not a run's.
    assert written["cautions"][0]["kind"] == "synthetic"


def test_conclusions_rest_on_the_typed_results_they_were_given(
    source: DatasetSource, analysed: tuple[list[DeploymentResults], ValidityResult]
) -> None:
    runs, verdicts = analysed
    seen = judged(runs, verdicts, timeline(runs))
    # Each deployment's one reading is judged once, as regime.judge reads its run.
    assert seen.regimes == {d.deployment.name: judge(d) for d in runs}
    found = conclusions(seen).entries
    keys = {m.key for m in cited(runs, verdicts)}
    assert found
    assert all(set(c.keys) <= keys for c in found)
    # H20's TTFT P95 bucket (0.5, 1] lies wholly below PRO's (20, 40] (the latency table):
    # H20 is called lower, its verdict the pair's.
    (ttft,) = [c for c in found if c.comparison == "ttft_p95"]
    assert (ttft.kind, ttft.deployments) == ("latency_lower", ("H20", "PRO"))
    assert ttft.verdict == verdicts.pairs[0].verdicts["ttft_p95"].verdict.value
    # Without the methodology's "Synthetic" note, no caution says the data are synthetic.
    kinds = [c.kind for c in cautions(seen).entries]
    assert "synthetic" not in kinds
    facts = ScopeFacts.of(source.dataset.manifest.methodology)
    assert facts.synthetic
    with_facts = cautions(judged(runs, verdicts, timeline(runs), facts)).entries
    assert [c.kind for c in with_facts] == ["synthetic", *kinds]
