"""SLO attainment against the simulator's ground truth (``requests.csv``).

Which requests count: see ``ground_truth``. Where a target is a bucket bound
(the datasets' TTFT and E2E bounds include 1 s, 2.5 s and 5 s) the
attainment must equal the share of those requests at or below it, to
floating-point summation; elsewhere the true share must lie in ``bounds``.
Checked on the bundled dataset and on ``pro5000-vs-h20`` simulated with a
fresh seed, for the deployment and for each replica.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.slo import SloResult, SloSettings, budget_spent, slo
from inference_obs.errors import ConfigurationError
from inference_obs.metrics import vllm
from inference_obs.metrics.slo import parse_target
from inference_obs.query import Selector
from inference_obs.reading.measurement import Status
from inference_obs.simulate import simulate
from inference_obs.source.dataset.source import DatasetSource

from .ground_truth import EXACT, deployment, requests_of, scrapes, truth, window_of

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
#: metric -> (event time column, value column, only requests vLLM finished?)
TRUTH = {"ttft": ("first_token", "ttft", False), "e2e": ("finish", "e2e", True)}
#: Bucket bounds of both datasets' TTFT and E2E histograms (exact), and thresholds between
#: bounds (bounded): 2 s lies between 1 s and 2.5 s, 30 s between 20 s and 40 s.
TARGETS = "ttft<=1s@99%,ttft<=2s@95%,e2e<=5s@99%,e2e<=30s,ttft<=250ms"
EXACT_AT = {"ttft_le_1s", "e2e_le_5s", "ttft_le_250ms"}


@pytest.fixture(scope="module")
def bundled() -> DatasetSource:
    return DatasetSource(DATASET)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> DatasetSource:
    out = tmp_path_factory.mktemp("pro5000-vs-h20-slo")
    return DatasetSource(simulate("pro5000-vs-h20", out / "data", seed=404))


def _results(source: DatasetSource) -> dict[str, SloResult]:
    settings = SloSettings(targets=TARGETS)  # text is parsed
    return {
        d.name: slo(source, d, window_of(source), settings=settings)
        for d in source.dataset.manifest.deployments
    }


def _per_replica_truth(source: DatasetSource, name: str, metric: str) -> dict[str, np.ndarray]:
    """Per pod, the ground-truth values its counters recorded (as ``truth``, split by pod)."""
    time, column, finished = TRUTH[metric]
    dep, window, requests = deployment(source, name), window_of(source), requests_of(source)
    out = {}
    # scrapes() pairs the sorted pods with dep.replicas in order, as truth() does.
    for pod, replica, offsets in zip(
        _pods(source, name), dep.replicas, scrapes(source, dep, window), strict=True
    ):
        rows = requests[requests["replica"] == replica]
        keep = (rows[time] > offsets[0]) & (rows[time] <= offsets[-1]) & rows[column].notna()
        if finished:
            keep &= rows["outcome"] == "finished"
        out[pod] = rows.loc[keep, column].to_numpy(np.float64)
    return out


def _pods(source: DatasetSource, name: str) -> list[str]:
    """The pod labels of the deployment's replicas, sorted (``scrapes``'s order)."""
    dep = deployment(source, name)
    selector = Selector(f"{vllm.E2E_REQUEST_LATENCY.name}_count", dep.matchers)
    return sorted({s.labels["pod"] for s in source.raw(selector, window_of(source))})


@pytest.mark.parametrize("which", ["bundled", "fresh"])
def test_attainment_is_exact_at_bounds_and_bounded_elsewhere(
    which: str, request: pytest.FixtureRequest
) -> None:
    source: DatasetSource = request.getfixturevalue(which)
    for name, result in _results(source).items():
        assert [a.target.text for a in result.targets] == TARGETS.split(",")
        for one in result.targets:
            t = one.target
            time, column, finished = TRUTH[t.metric]
            values = truth(source, name, column, time, finished)
            share = float(np.mean(values <= t.threshold_s))  # the requests meeting the target
            m = one.attainment
            assert m.status is Status.OK
            assert m.value is not None
            assert m.bounds is not None
            assert m.key == f"{name}/slo/{t.name}_attainment"
            assert m.provenance.promql, "the attainment names its PromQL"
            if t.name in EXACT_AT:
                assert one.exact
                assert m.bounds.lower == m.bounds.upper == m.value
                assert math.isclose(m.value, share, rel_tol=EXACT), (name, t.text)
            else:
                assert not one.exact
                assert m.bounds.lower < m.bounds.upper
                assert m.bounds.lower <= share <= m.bounds.upper, (name, t.text)
            by_pod = _per_replica_truth(source, name, t.metric)
            assert set(one.replicas) == set(by_pod)
            for pod, own in by_pod.items():
                r = one.replicas[pod]
                truth_share = float(np.mean(own <= t.threshold_s))
                assert r.value is not None
                assert r.bounds is not None
                assert r.key == f"{name}/slo/{t.name}_attainment[{pod}]"
                if one.exact:
                    assert math.isclose(r.value, truth_share, rel_tol=EXACT), (name, pod)
                else:
                    assert r.bounds.lower <= truth_share <= r.bounds.upper, (name, pod)


def test_budget_spent_follows_the_objective(bundled: DatasetSource) -> None:
    result = _results(bundled)["H20"]
    by_name = {a.target.name: a for a in result.targets}
    exact = by_name["ttft_le_1s"]
    assert exact.budget_spent is not None
    a = exact.attainment.value
    assert a is not None
    assert exact.budget_spent.value is not None
    # ttft<=1s@99%: the budget is 1% of requests; spent = missed share / 1%.
    assert math.isclose(exact.budget_spent.value, (1 - a) / 0.01, rel_tol=1e-12)
    assert exact.budget_spent.key == "H20/slo/ttft_le_1s_budget_spent"
    bounded = by_name["ttft_le_2s"]
    assert bounded.budget_spent is not None
    assert bounded.budget_spent.bounds is not None
    assert bounded.attainment.bounds is not None
    # Attaining the upper bound spends the least: (1 - upper) / 5%.
    lo = (1 - bounded.attainment.bounds.upper) / 0.05
    assert math.isclose(bounded.budget_spent.bounds.lower, lo, rel_tol=1e-12)
    assert by_name["e2e_le_30s"].budget_spent is None  # no objective, no budget
    assert set(exact.replica_budget_spent) == set(exact.replicas)


def test_budget_spent_by_hand() -> None:
    from inference_obs.reading.measurement import Bounds, Measurement, Provenance

    made = Measurement(
        key="D/slo/x_attainment",
        deployment="D",
        analysis="slo",
        statistic="x_attainment",
        value=0.995,
        unit="ratio",
        window_start=0.0,
        window_end=60.0,
        status=Status.OK,
        provenance=Provenance(promql=("q",), engine="dataset", rules="prometheus-2"),
        bounds=Bounds(lower=0.99, upper=0.998),
    )
    spent = budget_spent(made, 0.99, "x_budget_spent")
    # (1 - 0.995) / 0.01 = 0.5; bounds (1 - 0.998) / 0.01 = 0.2 and (1 - 0.99) / 0.01 = 1.
    assert spent.value is not None
    assert spent.bounds is not None
    assert math.isclose(spent.value, 0.5)
    assert math.isclose(spent.bounds.lower, 0.2)
    assert math.isclose(spent.bounds.upper, 1.0)


@pytest.mark.parametrize(
    ("text", "metric", "threshold", "objective"),
    [
        ("ttft<=2s", "ttft", 2.0, None),
        ("itl<=50ms@99%", "itl", 0.05, 0.99),
        (" e2e <= 0.5m @ 0.999 ", "e2e", 30.0, 0.999),
    ],
)
def test_targets_parse(text: str, metric: str, threshold: float, objective: float | None) -> None:
    t = parse_target(text)
    assert (t.metric, t.objective) == (metric, objective)
    assert math.isclose(t.threshold_s, threshold)


@pytest.mark.parametrize(
    "text", ["ttft<2s", "ttft<=2", "nope<=2s", "ttft<=2s@100%", "ttft<=0s", "ttft<=2s@0%", ""]
)
def test_bad_targets_are_refused_with_the_text_named(text: str) -> None:
    # As --set slo.targets=TEXT and --slo reach it; "" stands for a target given twice.
    with pytest.raises(ConfigurationError, match=r"slo\.targets: .*SLO"):
        slo.configure({"targets": text or "ttft<=2s,ttft<=2000ms"})


@pytest.mark.parametrize("ms", [9, 13, 36, 51, 50, 75])
def test_a_bound_written_in_milliseconds_is_that_bound(ms: int) -> None:
    # An exact attainment needs the threshold to equal the parsed le bound: 9 * 1e-3 is
    # 0.009000000000000001, not the 0.009 of a custom le="0.009" bucket.
    assert parse_target(f"itl<={ms}ms").threshold_s == float(f"0.{ms:03d}")
