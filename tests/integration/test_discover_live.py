"""``discover`` against Prometheus 2.42 holding each bundled dataset: the manifest found again.

promtool backfills the dataset; ``discover --prometheus`` writes a
deployments file over the dataset's window. Its deployments must select the
same replicas (vLLM pods) and GPUs (DCGM UUIDs) as the manifest's, and the
live report from it must equal the live report from the manifest: every
measurement, its status, value and bounds, once deployment names are mapped
(discover names them after model and GPU; the manifest's are short).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import main
from inference_obs.deployment import Deployment
from inference_obs.query import Selector
from inference_obs.samples import Window
from inference_obs.source.dataset.reader import read_manifest
from inference_obs.source.deployments_file import load_deployments
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import PrometheusServer

pytestmark = pytest.mark.integration

DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def _selected(source: PrometheusSource, d: Deployment, window: Window) -> tuple[set[str], set[str]]:
    pods = source.series(Selector("vllm:num_requests_running", d.matchers), window)
    gpus = source.series(Selector("DCGM_FI_DEV_GPU_UTIL", d.gpu_matchers), window)
    return {p["pod"] for p in pods}, {g["UUID"] for g in gpus}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _report(url: str, deployments: Path, window: Window, out: Path) -> dict[str, Any]:
    argv = [
        "report", "--prometheus", url, "--deployments", str(deployments),
        "--start", window.start.isoformat(), "--end", window.end.isoformat(),
        "--format", "json", "--out", str(out), "--quiet",
    ]  # fmt: skip
    assert main(argv) == 0
    data: dict[str, Any] = json.loads((out / "report.json").read_text())
    return data


@pytest.mark.parametrize("name", ["pro5000-vs-h20", "h100-vs-h200", "r1-decode"])
def test_discover_finds_the_manifest_and_its_report_is_the_same(
    shipped_prometheus: Callable[[Path], PrometheusServer], tmp_path: Path, name: str
) -> None:
    dataset = DATASETS / name
    server = shipped_prometheus(dataset)
    window = read_manifest(dataset).window.window()
    found = tmp_path / "deployments.yaml"
    argv = ["discover", "--prometheus", server.base_url, "--out", str(found)]
    span = ["--start", window.start.isoformat(), "--end", window.end.isoformat()]
    assert main([*argv, *span]) == 0
    source = PrometheusSource(server.base_url)
    declared = load_deployments(dataset)
    mine = load_deployments(found)
    assert len(mine) == len(declared)
    names = {}
    for d in declared:
        selected = _selected(source, d, window)
        assert all(selected), d.name
        (match,) = (m for m in mine if _selected(source, m, window) == selected)
        assert len(match.replicas) == len(d.replicas)
        assert match.hardware.gpus_per_replica == d.hardware.gpus_per_replica
        names[match.name] = d.name
    a = _report(server.base_url, found, window, tmp_path / "discovered")
    b = _report(server.base_url, dataset / "manifest.json", window, tmp_path / "manifest")

    def renamed(key: str) -> str:
        # The deployment, and a partner named in a key; longest first, so no name
        # is replaced inside a longer one.
        for new, old in sorted(names.items(), key=lambda n: -len(n[0])):
            key = key.replace(new, old)
        return key

    mine_m = {renamed(m["key"]): m for m in a["measurements"]}
    theirs = {m["key"]: m for m in b["measurements"]}
    assert mine_m.keys() == theirs.keys()
    assert len(theirs) > 100
    for key, m in mine_m.items():
        o = theirs[key]
        assert (m["status"], m["unit"]) == (o["status"], o["unit"]), key
        assert _same(m["value"], o["value"]), (key, m["value"], o["value"])
        assert _same(m["bounds"], o["bounds"]), key
    for pa, pb in zip(a["comparisons"], b["comparisons"], strict=True):
        values = {v["comparison"]: v["values"] for v in pb["verdicts"]}
        for v in pa["verdicts"]:
            again = {names[k]: x for k, x in v["values"].items()}
            assert _same(again, values[v["comparison"]]), v["comparison"]
