"""Export from a real Prometheus, verify, and compare with the original dataset's numbers.

A bundled dataset is backfilled into Prometheus 2.42 with promtool; the
exported dataset must verify, hold the same samples under published names,
give the same numbers as the original dataset's analyses, and hold no
identifying value and no credential of the original anywhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from inference_obs.analyses.published import published_aggregates
from inference_obs.analyses.verify import RowStatus
from inference_obs.cli import main
from inference_obs.query import Selector
from inference_obs.report.verify import verify_dataset
from inference_obs.source.auth import BearerToken
from inference_obs.source.dataset.export import export_dataset
from inference_obs.source.dataset.source import DatasetSource
from inference_obs.source.prometheus import PrometheusSource
from tests.integration.servers import PrometheusServer, free_port
from tests.source.test_export import identifying_values, renamed_key

pytestmark = pytest.mark.integration

BUNDLED = Path(__file__).resolve().parents[2] / "datasets" / "pro5000-vs-h20"
TOKEN = "tok-5ecret-0f-the-reader"


@pytest.fixture(scope="module")
def prometheus(shipped_prometheus: Callable[[Path], PrometheusServer]) -> PrometheusServer:
    return shipped_prometheus(BUNDLED)


@pytest.fixture(scope="module")
def original() -> DatasetSource:
    return DatasetSource(BUNDLED)


def _leaks(path: Path, values: set[str]) -> list[tuple[str, str]]:
    found = []
    for file in sorted(path.iterdir()):
        text = file.read_bytes().decode("utf-8")
        for value in values:
            # Alone, not inside a longer word: the namespace 'llm' is inside 'vllm:'.
            if re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text):
                found.append((file.name, value))
    return found


def test_an_export_from_prometheus_verifies_and_equals_the_original(
    prometheus: PrometheusServer, original: DatasetSource, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN, encoding="utf-8")
    source = PrometheusSource(prometheus.base_url, auth=BearerToken(file=token_file))
    manifest = original.dataset.manifest
    window = manifest.window.window()
    done = export_dataset(
        source,
        manifest.deployments,
        window,
        tmp_path / "out",
        title="PRO 5000 vs H20 from Prometheus",
        aggregates=published_aggregates,
    )
    assert "from a prometheus source (version 2.42.0" in done.dataset.manifest.methodology[0]

    result = verify_dataset(done.dataset.path)
    assert result.layout == "measurements"
    assert result.passed
    # Every number agrees; a number null on both sides is "absent", never "ok".
    assert {r.status for r in result.rows} == {RowStatus.OK, RowStatus.ABSENT}
    assert all(
        (r.status is RowStatus.ABSENT) == (r.published is None and r.recomputed is None)
        for r in result.rows
    )

    # The same numbers as the original dataset's analyses, under published names.
    before = published_aggregates(original, manifest.deployments, window)["measurements"]
    after = (done.dataset.aggregates or {})["measurements"]
    assert {renamed_key(k, done.pseudonyms): v for k, v in before.items()} == after

    # The same samples, every one, under published labels.
    for deployment in manifest.deployments:
        chosen = original.raw(Selector(None, deployment.matchers), window)
        for one in chosen:
            labels = {k: done.pseudonyms.get(k, {}).get(v, v) for k, v in one.labels.items()}
            (i,) = [
                j
                for j, (name, other) in enumerate(
                    zip(done.dataset.samples.names, done.dataset.samples.labels, strict=True)
                )
                if name == one.name and dict(other) == labels
            ]
            again = done.dataset.samples.series(i)
            np.testing.assert_array_equal(again.t_ms, one.t_ms)
            np.testing.assert_array_equal(again.values, one.values)

    assert not _leaks(done.dataset.path, identifying_values(original) | {TOKEN})


def test_the_command_line_exports_then_verifies_without_showing_credentials(
    prometheus: PrometheusServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN, encoding="utf-8")
    out = tmp_path / "out"
    status = main(
        [
            "dataset", "export", "--prometheus", prometheus.base_url,
            "--deployments", str(BUNDLED / "manifest.json"), "--out", str(out),
            "--end", "2026-10-19T18:40:00+08:00", "--window", "1h",
            "--token-file", str(token_file), "--header", "X-Scope-OrgID: tenant-5ecret",
            "--methodology", "Backfilled from the bundled synthetic dataset.",
        ]
    )  # fmt: skip
    text = capsys.readouterr()
    assert status == 0, text.err
    # 217 published: latency, shapes, cache, throughput and gpu numbers of both deployments,
    # with each one's queue share of TTFT and request rate, and the five replicas' token and
    # request rates (14 more than before those were measured).
    assert text.out.startswith(f"wrote {out}: 542 series, 32,520 samples, 217 published")
    assert "PRO: PRO-01; H20: H20-01, H20-02, H20-03, H20-04" in text.out
    assert main(["dataset", "verify", str(out)]) == 0
    shown = text.out + text.err + capsys.readouterr().out
    assert "5ecret" not in shown
    assert not _leaks(out, {TOKEN, "tenant-5ecret"})


def test_a_failed_export_names_no_credential(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Nothing listens there: the source retries, then gives up.
    url = f"http://reader:pa55-5ecret@127.0.0.1:{free_port()}"
    status = main(
        [
            "dataset", "export", "--prometheus", url, "--deployments", str(BUNDLED),
            "--out", str(tmp_path / "out"), "--end", "2026-10-19T18:40:00+08:00",
            "--window", "1h", "--header", "X-Api-Key: key-5ecret",
        ]
    )  # fmt: skip
    text = capsys.readouterr()
    assert status == 4  # the source failed: as for report, not a configuration error (2)
    assert text.err.startswith("inference-obs: source error: ")
    assert "127.0.0.1" in text.err
    assert "5ecret" not in text.out + text.err
    assert not (tmp_path / "out").exists()
