"""The live report against a real Prometheus equals the offline report on the same dataset.

Prometheus 2.42 is loaded with a bundled dataset by promtool backfill; the
report is run through the command line twice, ``--prometheus URL`` with the
dataset's manifest as the deployments file and its window, and
``--dataset DIR``. Every Measurement of report.json has the same status,
value (1e-9 relative) and bounds; only the engine named in its provenance
differs. The comparison verdicts, and the rolling series with each point's bucket, are
the same. A live report built in threads is the one
built in order, byte for byte.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import EXIT_INVALID, main
from inference_obs.report import build_report, report_json
from inference_obs.source.dataset.reader import read_dataset
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import PrometheusServer

pytestmark = pytest.mark.integration

DATASET = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def test_live_and_offline_reports_have_equal_measurements(
    shipped_prometheus: Callable[[Path], PrometheusServer], tmp_path: Path
) -> None:
    server = shipped_prometheus(DATASET)
    window = read_dataset(DATASET).manifest.window
    live = main([
        "report", "--prometheus", server.base_url, "--deployments", str(DATASET / "manifest.json"),
        "--start", window.start.isoformat(), "--end", window.end.isoformat(),
        "--format", "json", "--out", str(tmp_path / "live"), "--quiet",
    ])  # fmt: skip
    offline = main([
        "report", "--dataset", str(DATASET), "--format", "json",
        "--out", str(tmp_path / "offline"), "--quiet", "--fail-on", "invalid-comparison",
    ])  # fmt: skip
    assert live == 0
    assert offline == EXIT_INVALID  # the dataset's throughput comparison is invalid
    a = json.loads((tmp_path / "live" / "report.json").read_text())
    b = json.loads((tmp_path / "offline" / "report.json").read_text())
    assert a["scope"]["engine"] == "prometheus"
    assert b["scope"]["engine"] == "dataset"
    mine = {m["key"]: m for m in a["measurements"]}
    theirs = {m["key"]: m for m in b["measurements"]}
    assert mine.keys() == theirs.keys()
    assert len(mine) > 200
    for key, m in mine.items():
        o = theirs[key]
        assert (m["status"], m["unit"]) == (o["status"], o["unit"]), key
        assert _same(m["value"], o["value"]), (key, m["value"], o["value"])
        assert _same(m["bounds"], o["bounds"]), key
        assert m["provenance"]["promql"] == o["provenance"]["promql"], key
    assert _same(a["comparisons"], b["comparisons"])
    # The rolling series, each point with its bucket, from Prometheus's own range queries.
    rolling = [d["rolling"] for d in a["deployments"]]
    assert _same(rolling, [d["rolling"] for d in b["deployments"]])
    assert any(q["points"] for one in rolling for r in one for q in r["quantiles"])


def test_a_live_report_built_in_threads_is_the_one_built_in_order(
    shipped_prometheus: Callable[[Path], PrometheusServer],
) -> None:
    server = shipped_prometheus(DATASET)
    manifest = read_dataset(DATASET).manifest

    def built(workers: int) -> str:
        report = build_report(
            PrometheusSource(server.base_url), manifest.deployments, manifest.window.window(),
            title=manifest.title, source_name="live", workers=workers,
        )  # fmt: skip
        return json.dumps(report_json(report))

    in_order = built(1)
    assert built(16) == in_order
    assert built(16) == in_order
