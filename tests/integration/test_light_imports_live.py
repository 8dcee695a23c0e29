"""``discover`` against Prometheus 2.42 loads neither pandas, matplotlib nor scipy.

The live path of tests/test_light_imports.py: the bundled dataset backfilled by
promtool, ``discover --prometheus`` run in a fresh interpreter over its window.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inference_obs.source.dataset.reader import SAMPLES, read_manifest
from inference_obs.source.deployments_file import load_deployments
from tests.integration.servers import PrometheusFactory
from tests.test_light_imports import run_cli

pytestmark = pytest.mark.integration

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"


def test_discover_on_prometheus_loads_none(
    prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    server = prometheus_factory((DATASET / SAMPLES).read_bytes().decode("utf-8"))
    window = read_manifest(DATASET).window.window()
    found = tmp_path / "deployments.yaml"
    status, loaded, _ = run_cli(
        "discover", "--prometheus", server.base_url, "--out", str(found),
        "--start", window.start.isoformat(), "--end", window.end.isoformat(),
    )  # fmt: skip
    assert status == 0
    # The manifest's two deployments are found (named after model and GPU).
    assert len(load_deployments(found)) == len(read_manifest(DATASET).deployments)
    assert loaded == []
