"""Every quantile bound a report publishes holds the true quantile of the window's requests.

The truth is the dataset's ``requests.csv``: for TTFT the requests whose first
token falls in the window, for the finish-time histograms the finished
requests whose finish falls in it (client aborts are absent from vLLM's
finished-request histograms). A bound annotated ``bounds_counted_requests``
says it holds for the requests counted between each series' first and last
scrape only, and is checked against those (tests/analyses/ground_truth.py).
Bundled datasets, and each scenario simulated afresh at a new seed.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from inference_obs.cli import main
from inference_obs.simulate.scenario import load_scenario, scenario_names
from inference_obs.source.dataset.source import DatasetSource
from tests.analyses.ground_truth import (
    BUNDLED,
    COLUMNS,
    DATASETS,
    deployment,
    requests_of,
    scrapes,
    true_quantile,
    truth,
    window_of,
)

QUANTILE = re.compile(r"^(ttft|tpot|e2e|queue|prefill|decode)_p(\d+)(?:\[(.+)\])?$")


def _window_values(
    requests: pd.DataFrame, name: str, metric: str, seconds: float, replica: str | None
) -> Any:
    column, event, finished = COLUMNS[metric]
    rows = requests[requests["deployment"] == name]
    if replica is not None:
        rows = rows[rows["replica"] == replica]
    keep = (rows[event] > 0) & (rows[event] <= seconds) & rows[column].notna()
    if finished:
        keep &= rows["outcome"] == "finished"
    return rows.loc[keep, column].to_numpy(np.float64)


def _replicas(source: DatasetSource, doc: dict[str, Any]) -> dict[str, str]:
    """Replica label value (``pod``) -> the replica name requests.csv uses: both sorted, in
    order, as the simulator names them (``pro-model-01`` serves ``PRO-01``)."""
    out: dict[str, str] = {}
    for dep in source.dataset.manifest.deployments:
        pods = sorted(
            {
                found.group(3)
                for m in doc["measurements"]
                if m["deployment"] == dep.name
                and m["analysis"] == "replicas"
                and (found := QUANTILE.match(m["statistic"]))
            }
        )
        assert len(pods) == len(dep.replicas)
        out.update(zip(pods, sorted(dep.replicas), strict=True))
    return out


def _check(data: Path, out: Path) -> tuple[list[str], int]:
    """Every latency quantile bound in ``out``'s report.json (the deployments' and each
    replica's) that excludes its truth, and how many bounds were checked."""
    assert main(["report", "--dataset", str(data), "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "report.json").read_text())
    source = DatasetSource(data)
    requests = pd.read_csv(data / "requests.csv")
    seconds = source.dataset.manifest.window.window().seconds
    replicas = _replicas(source, doc)
    misses, checked = [], 0
    for m in doc["measurements"]:
        found = QUANTILE.match(m["statistic"])
        if m["analysis"] not in ("latency", "replicas") or not found or not m["bounds"]:
            continue
        metric, q, pod = found.group(1), int(found.group(2)) / 100, found.group(3)
        assert (pod is None) == (m["analysis"] == "latency")
        replica = None if pod is None else replicas[pod]
        column, event, finished = COLUMNS[metric]
        counted_only = any(a["kind"] == "bounds_counted_requests" for a in m["annotations"])
        if counted_only:
            values = truth(source, m["deployment"], column, event, finished)
            if replica is not None:
                values = _counted_on(source, m["deployment"], replica, column, event, finished)
        else:
            values = _window_values(requests, m["deployment"], metric, seconds, replica)
        expected = true_quantile(values, q)
        low, high = float(m["bounds"]["lower"]), float(m["bounds"]["upper"])
        checked += 1
        if not low <= expected <= high:
            misses.append(f"{m['key']}: truth {expected:.6g} outside [{low:g}, {high:g}]")
    return misses, checked


def _counted_on(
    source: DatasetSource, name: str, replica: str, column: str, event: str, finished: bool
) -> Any:
    """The requests of one replica its counters recorded (ground_truth.truth, one replica)."""
    dep = deployment(source, name)
    window = window_of(source)
    offsets = scrapes(source, dep, window)[list(dep.replicas).index(replica)]
    rows = requests_of(source)
    rows = rows[rows["replica"] == replica]
    keep = (rows[event] > offsets[0]) & (rows[event] <= offsets[-1]) & rows[column].notna()
    if finished:
        keep &= rows["outcome"] == "finished"
    return rows.loc[keep, column].to_numpy(np.float64)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_quantile_bounds_hold_the_windows_quantile(name: str, tmp_path: Path) -> None:
    misses, checked = _check(DATASETS / name, tmp_path / "report")
    assert misses == []
    assert checked >= 16  # at least TTFT, TPOT, E2E and one more, four quantiles each


@pytest.mark.parametrize("scenario", scenario_names())
def test_fresh_simulation_quantile_bounds_hold(scenario: str, tmp_path: Path) -> None:
    shipped = load_scenario(scenario).seed
    while (seed := random.SystemRandom().randrange(1, 2**31)) == shipped:
        pass
    data = tmp_path / "data"
    assert main(["simulate", scenario, "--seed", str(seed), "--out", str(data)]) == 0
    # The GPU-boundary scenarios serve no latency histograms: nothing to check there.
    misses, _ = _check(data, tmp_path / "report")
    assert misses == [], f"{scenario} at seed {seed} (rerun: inference-obs simulate): {misses}"
