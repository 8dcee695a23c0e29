"""Per-replica latency against each replica's own requests, and questions that do not grow.

Expected numbers come from the bundled dataset's ``requests.csv`` (its
ground truth), per replica: the requests whose event falls between the
replica's first and last scrape in the window (:mod:`.ground_truth`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from inference_obs.analyses.replicas import ReplicasResult, replicas
from inference_obs.deployment import Deployment
from inference_obs.source.base import EngineInfo
from inference_obs.source.dataset.source import DatasetSource

from .fleets import fleet_scenario, simulated
from .ground_truth import EXACT, deployment, requests_of, scrapes, true_quantile, window_of

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
#: metric -> (event time column, value column, only requests vLLM finished?)
TRUTH = {"ttft": ("first_token", "ttft", False), "e2e": ("finish", "e2e", True)}


def _own(source: DatasetSource, name: str, replica: str, metric: str) -> npt.NDArray[np.float64]:
    """The true values of ``metric`` of ``replica``'s requests its counters recorded."""
    time, column, finished = TRUTH[metric]
    dep, requests = deployment(source, name), requests_of(source)
    offsets = scrapes(source, dep, window_of(source))[dep.replicas.index(replica)]
    rows = requests[requests["replica"] == replica]
    keep = (rows[time] > offsets[0]) & (rows[time] <= offsets[-1]) & rows[column].notna()
    if finished:
        keep &= rows["outcome"] == "finished"
    values: npt.NDArray[np.float64] = rows.loc[keep, column].to_numpy(np.float64)
    return values


@pytest.mark.parametrize("metric", sorted(TRUTH))
@pytest.mark.parametrize("name", ["PRO", "H20"])
def test_each_replicas_mean_is_exact_and_its_bucket_holds_its_own_quantiles(
    source: DatasetSource, name: str, metric: str
) -> None:
    dep = deployment(source, name)
    result = replicas(source, dep, window_of(source))
    # Pods sorted follow the replicas' order (as the ground truth pairs them).
    pods = sorted(result.statistics[f"{metric}_mean"])
    assert len(pods) == len(dep.replicas)
    for pod, replica in zip(pods, dep.replicas, strict=True):
        truth = _own(source, name, replica, metric)
        mean = result.statistics[f"{metric}_mean"][pod]
        assert mean.key == f"{name}/replicas/{metric}_mean[{pod}]"
        assert mean.value == pytest.approx(float(truth.mean()), rel=EXACT)
        for tag, q in (("p50", 0.5), ("p95", 0.95)):
            m = result.statistics[f"{metric}_{tag}"][pod]
            assert m.bounds is not None, m.key
            true = true_quantile(truth, q)
            assert m.bounds.lower <= true <= m.bounds.upper, (m.key, true, m.bounds)
            assert m.bounds.lower <= (m.value or 0.0) <= m.bounds.upper


def test_the_queue_share_is_the_replicas_own_ratio_of_means(source: DatasetSource) -> None:
    result = replicas(source, deployment(source, "H20"), window_of(source))
    for pod, share in result.statistics["queue_share_of_ttft"].items():
        queue = result.statistics["ttft_mean"][pod]
        assert share.value is not None
        assert queue.value is not None
        # The share is a ratio 0-1 of this replica's means, not another replica's.
        assert 0 <= share.value < 1
        assert share.key.endswith(f"[{pod}]")


class Counting:
    """Delegates to a dataset source, answering as a server would say it does (engine kind
    ``prometheus``: questions joined as for a server), and counts each kind of request
    (instant queries, series, raw samples)."""

    def __init__(self, source: DatasetSource) -> None:
        self.source = source
        self.asked: Counter[str] = Counter()

    def info(self) -> EngineInfo:
        return replace(self.source.info(), kind="prometheus")

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.source, name)
        if name in ("instant", "range", "raw", "series") and callable(found):

            def counted(*args: Any, **kwargs: Any) -> Any:
                self.asked[name] += 1
                return found(*args, **kwargs)

            return counted
        return found


def _asked(source: DatasetSource, dep: Deployment) -> tuple[Counter[str], ReplicasResult]:
    counting = Counting(source)
    result = replicas(counting, dep, window_of(source))
    return counting.asked, result


def test_the_requests_do_not_grow_with_the_replicas(
    source: DatasetSource, tmp_path_factory: pytest.TempPathFactory
) -> None:
    one, alone = _asked(source, deployment(source, "PRO"))
    four, _ = _asked(source, deployment(source, "H20"))
    assert len(alone.statistics["ttft_p50"]) == 1
    assert one == four
    # Two lean fleets (no queue-time histogram: its means are no_data, named once).
    asked = []
    for size in (2, 24):
        fleet = DatasetSource(
            simulated(fleet_scenario(size, minutes=3, lean=True), tmp_path_factory.mktemp("f"))
        )
        counted, result = _asked(fleet, deployment(fleet, "FLEET"))
        assert len(result.statistics["ttft_p50"]) == size
        assert {m.status.value for m in result.statistics["queue_share_of_ttft"].values()} == {
            "no_data"
        }
        asked.append(counted)
    # The same requests for 2 and 24 replicas, and never a replica's raw samples.
    assert asked[0] == asked[1]
    assert asked[1]["raw"] == 0
