"""A live report asks a store the same requests whatever the fleet's size: 4 and 12 replicas.

Two simulated fleets (:mod:`tests.analyses.fleets`, lean: no host series, so
every replica lacks the container CPU families) differ only in their
replica count. Each is loaded with ``inference-obs dataset load`` into a
VictoriaMetrics 1.79 of its own, and the whole report is read from it. The
requests are the store's own count (``vm_http_requests_total``, per API
path, before and after): every path is asked as often at 12 replicas as at
4, the discovery paths (``series``, ``labels``, label values) included.
Both fleets are read per scrape (a few replicas over five minutes), so the
report asks the same questions of each; a question asked once per replica
(a per-replica statistic without series naming its missing families replica
by replica, as it did) makes the counts differ.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from inference_obs.cli import main
from inference_obs.source.dataset.reader import MANIFEST, read_manifest
from tests.analyses.fleets import fleet_scenario, simulated
from tests.integration.servers import VictoriaMetricsServer, require_binary

pytestmark = pytest.mark.integration

SIZES = (4, 12)
_SERVED = re.compile(r'^vm_http_requests_total\{path="(/api/v1/[^"]+)"\} (\d+)$', re.M)


def served(store: VictoriaMetricsServer) -> Counter[str]:
    """The store's count of requests served so far, per read API path."""
    with urllib.request.urlopen(f"{store.base_url}/metrics", timeout=30) as answer:
        text = answer.read().decode("utf-8")
    counts = Counter({path: int(n) for path, n in _SERVED.findall(text)})
    return Counter({p: n for p, n in counts.items() if not p.startswith("/api/v1/import")})


def requests_of_a_report(replicas: int, tmp: Path, binary: str) -> Counter[str]:
    """The requests a whole live report of a fleet of ``replicas`` sends, per path."""
    scenario = fleet_scenario(replicas, minutes=5, rate_per_second=4.0, lean=True, halves=True)
    data = simulated(scenario, tmp / "dataset")
    manifest = read_manifest(data)
    with VictoriaMetricsServer(tmp / "vm", binary=binary) as store:
        assert main(["dataset", "load", str(data), "--into", store.base_url]) == 0
        store.flush()
        before = served(store)
        # The report as a user runs it: a process of its own, so that nothing one
        # size's report kept can answer the other's questions.
        window = manifest.window.window()
        argv = ["report", "--prometheus", store.base_url, "--deployments", str(data / MANIFEST)]
        span = ["--start", window.start.isoformat(), "--end", window.end.isoformat()]
        out = ["--format", "json", "--out", str(tmp / "report"), "--quiet"]
        command = [sys.executable, "-m", "inference_obs.cli", *argv, *span, *out]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        asked = served(store) - before
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp / "report" / "report.json").read_text())
    # Both deployments read: the counts are of a report, not of an empty one.
    names = {d.name for d in manifest.deployments}
    assert {d["name"] for d in written["deployments"]} == names
    assert len(written["measurements"]) > 100
    return asked


@pytest.fixture(scope="module")
def asked(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Counter[str]]:
    binary = require_binary("victoria-metrics")
    return {n: requests_of_a_report(n, tmp_path_factory.mktemp(f"fleet{n}"), binary) for n in SIZES}


def test_the_discovery_requests_do_not_grow_with_the_replicas(
    asked: dict[int, Counter[str]],
) -> None:
    small, large = (asked[n] for n in SIZES)
    discovery = ("/api/v1/series", "/api/v1/labels", "/api/v1/label/")

    def of(counts: Counter[str]) -> dict[str, int]:
        return {p: n for p, n in counts.items() if p.startswith(discovery)}

    assert of(small)["/api/v1/series"] > 0
    assert of(large) == of(small)


def test_the_whole_reports_requests_do_not_grow_with_the_replicas(
    asked: dict[int, Counter[str]],
) -> None:
    small, large = (asked[n] for n in SIZES)
    assert small["/api/v1/query"] > 0
    assert large == small
