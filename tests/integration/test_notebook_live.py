"""The live-prometheus notebook against a real Prometheus loaded with a bundled dataset.

Prometheus 2.42 holds the dataset (promtool backfill); the notebook's URL,
deployments file and window are passed as its environment parameters. Without
a deployments file, as a new user runs it, the notebook discovers them. Run
where Jupyter runs it (in notebooks/), it writes the report into the folder
named by ``INFERENCE_OBS_REPORT_DIR`` or, without one, a new temporary
folder, never into the checkout.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from inference_obs.source.dataset.reader import read_dataset
from tests.integration.servers import PrometheusServer
from tests.test_notebooks import (
    NOTEBOOK_BYTES,
    NOTEBOOKS,
    checkout,
    output_text,
    run_notebook,
    saved_bytes,
)

pytestmark = pytest.mark.integration

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"


@pytest.mark.parametrize("deployments", ["manifest", "discovered"])
def test_live_prometheus_runs_against_a_loaded_server(
    shipped_prometheus: Callable[[Path], PrometheusServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    deployments: str,
) -> None:
    server = shipped_prometheus(DATASET)
    window = read_dataset(DATASET).manifest.window.window()
    monkeypatch.setenv("INFERENCE_OBS_PROMETHEUS", server.base_url)
    if deployments == "manifest":
        monkeypatch.setenv("INFERENCE_OBS_DEPLOYMENTS", str(DATASET / "manifest.json"))
    else:  # a new user's run: no deployments file, so the notebook finds them
        monkeypatch.delenv("INFERENCE_OBS_DEPLOYMENTS", raising=False)
    monkeypatch.setenv("INFERENCE_OBS_WINDOW_END", window.end.isoformat())
    assert window.seconds == 3600.0
    monkeypatch.setenv("INFERENCE_OBS_WINDOW", "1h")
    assert os.environ["INFERENCE_OBS_PROMETHEUS"].startswith("http://127.0.0.1:")
    if deployments == "manifest":  # the folder the user names
        monkeypatch.setenv("INFERENCE_OBS_REPORT_DIR", str(tmp_path / "named"))
        out = tmp_path / "named"
    else:  # none named: a new temporary folder (the kernel's temporary directory is TMPDIR)
        monkeypatch.delenv("INFERENCE_OBS_REPORT_DIR", raising=False)
        (tmp_path / "tmp").mkdir()
        monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    before = checkout()
    book = run_notebook("live-prometheus", NOTEBOOKS)
    assert checkout() == before  # nothing written beside the notebook
    assert saved_bytes(book) < NOTEBOOK_BYTES
    text = output_text(book)
    assert "prometheus prometheus-2" in text
    if deployments == "discovered":
        (out,) = (tmp_path / "tmp").glob("inference-obs-*")
    written = json.loads((out / "live-report" / "report.json").read_text())
    for span in written["scope"]["windows"].values():
        assert (span["start"], span["end"]) == (window.start.isoformat(), window.end.isoformat())
    assert "<h4>More, when asked</h4>" in text  # the figures named, not embedded
    assert "data:image/png" not in text
    if deployments == "manifest":  # the offline report's headline numbers, read live
        assert "<td>H20</td><td>11,674</td>" in text
    if deployments == "discovered":
        assert 'pod: {regex: "h20-model-.*"}' in text
        assert "DeepSeek-V4.1-Flash-1017-H20" in text
