"""``inference-obs capture`` against fake exporters serving real text, then a report on the result.

Three exporters on 127.0.0.1 serve real ``/metrics`` text (tests/fixtures/real):
a vLLM whose counters and histograms grow with every request, a dcgm-exporter
4.x with ``pod_uid=""``, and a second vLLM (another model) that answers HTTP
500 to its 4th and 5th requests. A capture of a few seconds at 0.5 s must
store exactly what was served, record the failure as ``up 0``, and give a
report whose numbers are those the served values imply.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from inference_obs.cli import main
from inference_obs.errors import ConfigurationError
from inference_obs.samples import Labels
from inference_obs.source.capture import Recording, capture, propose_deployments
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.openmetrics.exposition import parse_exposition
from inference_obs.source.scrape import ScrapeClient, parse_target
from inference_obs.source.transport import PooledTransport
from tests.source.fake_exporters import FakeExporter, advancing, real_text

VLLM = real_text("vllm_v0_metrics_paste.prom")
DCGM = real_text("dcgm_4x_pod_uid_empty.prom")
FAILING = {3, 4}  # the first scrape that meets these fails, its retry too
INTERVAL_S, DURATION_S = 0.5, 3.0


@dataclass(frozen=True)
class Captured:
    dataset: Dataset
    engine: FakeExporter
    gpus: FakeExporter
    flaky: FakeExporter
    report: dict[str, dict[str, object]]


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Captured:
    out = tmp_path_factory.mktemp("capture") / "ds"
    with (
        FakeExporter(lambda n: advancing(VLLM, n)) as engine,
        FakeExporter(lambda n: DCGM) as gpus,
        FakeExporter(
            lambda n: advancing(VLLM.replace("mymodelname", "other-model"), n), fail=FAILING
        ) as flaky,
    ):
        status = main(
            [
                "capture",
                *("--url", f"vllm={engine.url}", "--url", f"dcgm={gpus.url}"),
                *("--url", f"vllm={flaky.url}"),
                *("--interval", "500ms", "--duration", "3s"),
                *("--out", str(out)),
            ]
        )
        assert status == 0
    report_dir = tmp_path_factory.mktemp("report")
    status = main(
        ["report", "--dataset", str(out), "--format", "json", "--out", str(report_dir), "--quiet"]
    )
    assert status == 0
    document = json.loads((report_dir / "report.json").read_text())
    report = {m["key"]: m for m in document["measurements"]}
    return Captured(read_dataset(out), engine, gpus, flaky, report)


def _series(dataset: Dataset, name: str, **labels: str) -> tuple[list[int], list[float]]:
    (one,) = [
        s for s in dataset.samples if s.name == name and Labels(labels).items() <= s.labels.items()
    ]
    return one.t_ms.tolist(), one.values.tolist()


def _served(text: str | None, name: str, **labels: str) -> float:
    assert text is not None
    (value,) = [
        s.value
        for s in parse_exposition(text.encode(), source="served").samples
        if s.name == name and Labels(labels).items() <= s.labels.items()
    ]
    return value


def test_every_round_is_stored_as_served(captured: Captured) -> None:
    # Six rounds: 0, 0.5, ..., 2.5 s. Every served answer of the steady vLLM is a scrape.
    rounds = round(DURATION_S / INTERVAL_S)
    assert len(captured.engine.served) == rounds
    assert set(captured.engine.requests) == {"GET /metrics"}
    for labels in ({"le": "0.25"}, {}):
        name = "vllm:time_to_first_token_seconds_bucket" if labels else "vllm:prompt_tokens_total"
        t_ms, values = _series(
            captured.dataset, name, instance=captured.engine.instance, job="vllm", **labels
        )
        assert len(t_ms) == rounds
        assert values == [_served(text, name, **labels) for text in captured.engine.served]
    # Scrapes are one interval apart, give or take the scheduler.
    gaps = np.diff(t_ms) / 1000
    assert np.all(np.abs(gaps - INTERVAL_S) < 0.45), gaps


def test_labels_are_added_as_a_prometheus_scrape_adds_them(captured: Captured) -> None:
    series = {s.labels.get("instance") for s in captured.dataset.samples}
    assert series == {captured.engine.instance, captured.gpus.instance, captured.flaky.instance}
    # pod_uid="" is dropped; the workload's pod labels stay.
    _, values = _series(
        captured.dataset, "DCGM_FI_DEV_POWER_USAGE", gpu="6", pod="llama-3-2-1b-7577f87fc7-dhb97"
    )
    assert values[0] == 112.67
    assert not any("pod_uid" in s.labels for s in captured.dataset.samples)


def test_the_failed_scrape_is_in_the_data(captured: Captured) -> None:
    _, up = _series(captured.dataset, "up", instance=captured.flaky.instance)
    assert up == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    _, steady = _series(captured.dataset, "up", instance=captured.engine.instance)
    assert steady == [1.0] * 6
    # Its series have a gap where the scrape failed.
    t_ms, _ = _series(
        captured.dataset, "vllm:prompt_tokens_total", instance=captured.flaky.instance
    )
    assert len(t_ms) == 5
    method = " ".join(captured.dataset.manifest.methodology)
    assert f"{captured.flaky.url} (job vllm, instance {captured.flaky.instance})" in method
    assert "6 scrapes, 1 failed" in method
    assert "HTTP 500" in method


def test_the_manifest_says_what_was_observed(captured: Captured) -> None:
    manifest = captured.dataset.manifest
    assert manifest.synthetic is False
    assert manifest.scrape_interval_seconds == INTERVAL_S
    assert [d.name for d in manifest.deployments] == ["mymodelname", "other-model"]
    assert manifest.deployments[0].selector == {"model_name": "mymodelname"}
    # The GPUs name the pod llama-3-2-1b-7577f87fc7-dhb97, which no engine series names: they
    # are not taken as either model's, so the GPU model stays unknown.
    assert manifest.deployments[0].hardware.gpu_model == "unknown"
    method = " ".join(manifest.methodology)
    assert "every 0.5 s" in method
    assert captured.engine.url in method
    assert captured.gpus.url in method


def test_report_means_are_those_of_the_served_values(captured: Captured) -> None:
    first, last = captured.engine.served[0], captured.engine.served[-1]
    for family in ("time_to_first_token", "e2e_request_latency"):
        name = f"vllm:{family}_seconds"
        change = _served(last, f"{name}_sum") - _served(first, f"{name}_sum")
        count = _served(last, f"{name}_count") - _served(first, f"{name}_count")
        key = "ttft_mean" if family == "time_to_first_token" else "e2e_mean"
        got = captured.report[f"mymodelname/latency/{key}"]
        assert got["status"] == "ok"
        assert got["value"] == pytest.approx(change / count, rel=1e-9)


def test_report_request_counts_follow_the_served_counters(captured: Captured) -> None:
    first, last = captured.engine.served[0], captured.engine.served[-1]
    for reason in ("stop", "length", "abort"):
        name = "vllm:request_success_total"
        exact = _served(last, name, finished_reason=reason) - _served(
            first, name, finished_reason=reason
        )
        got = captured.report[f"mymodelname/shapes/finished_{reason}"]["value"]
        # increase() extrapolates the exact change to the window's edges (a few ms here).
        assert isinstance(got, float)
        assert exact <= got <= exact * 1.01


def test_sigint_ends_capture_with_a_valid_dataset(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    with FakeExporter(lambda n: advancing(VLLM, n)) as engine:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "inference_obs.cli", "capture", "--url", engine.url),
                *("--interval", "0.2", "--duration", "1h", "--out", str(out)),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while len(engine.served) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(engine.served) >= 3
            proc.send_signal(signal.SIGINT)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, stderr
    assert "scrapes, 0 failed" in stderr
    assert f"wrote {out}" in stdout
    dataset = read_dataset(out)
    assert "ended early by the user" in " ".join(dataset.manifest.methodology)
    t_ms, _ = _series(dataset, "up")
    assert len(t_ms) >= 3


def test_exposed_job_and_instance_move_to_exported_labels() -> None:
    # A /federate answer (real, tests/fixtures/real) already carries job and instance.
    text = real_text("federate_untyped_ms_timestamps.prom").encode()
    target, _ = parse_target("federate=http://127.0.0.1:9090/federate")
    recording = Recording()
    # Scraped 3 s after the latest timestamp it exposes (1601919222492 ms), its oldest 9 s old.
    recording.add(target, 1_601_919_225_500, parse_exposition(text, source="federate"))
    (first, *_) = [s for s in recording.series() if s.name == "cadvisor_version_info"]
    assert first.labels["job"] == "federate"
    assert first.labels["instance"] == "127.0.0.1:9090"
    assert first.labels["exported_job"] == "cadvisor"
    assert first.labels["exported_instance"] == "tks-node-3.sol.milkyway:8080"
    # Exposed timestamps are honoured, as Prometheus honours them by default.
    assert first.t_ms.tolist() == [1601919222492]


def test_no_model_name_means_a_placeholder_proposal() -> None:
    target, _ = parse_target("http://127.0.0.1:9400/metrics")
    recording = Recording()
    recording.add(target, 1_700_000_000_000, parse_exposition(DCGM.encode(), source="dcgm"))
    (deployment,), notes = propose_deployments(recording.series())
    # Every target it scraped (only the dcgm-exporter here), hardware unknown.
    assert deployment.name == "unnamed"
    assert deployment.selector == {"instance": "~127\\.0\\.0\\.1:9400"}
    assert deployment.hardware.gpu_model == "unknown"
    assert "--deployments" in notes[0]


def test_one_model_gets_its_gpus(tmp_path: Path) -> None:
    engine, _ = parse_target("vllm=http://10.0.0.1:8000/metrics")
    # The engine's pod, as Kubernetes service discovery labels its target: the pod the
    # dcgm-exporter 4.x GPUs name.
    engine = replace(engine, labels=Labels({"pod": "llama-3-2-1b-7577f87fc7-dhb97"}))
    gpus, _ = parse_target("dcgm=http://10.0.0.1:9400/metrics")
    recording = Recording()
    for at in (1_700_000_000_000, 1_700_000_015_000):
        recording.add(engine, at, parse_exposition(VLLM.encode(), source="vllm"))
        recording.add(gpus, at, parse_exposition(DCGM.encode(), source="dcgm"))
    (deployment,), _ = propose_deployments(recording.series())
    assert deployment.hardware.gpus_per_replica == 3  # GPUs 5, 6 and 7 of one engine
    assert deployment.hardware.gpu_model == "NVIDIA H100 80GB HBM3"
    assert deployment.gpu_selector == {"instance": "~10\\.0\\.0\\.1:9400"}
    dataset = recording.write(tmp_path / "ds", interval_s=15, title="t", method=["m"])
    assert dataset.manifest.window.end > dataset.manifest.window.start
    assert math.isclose(dataset.manifest.scrape_interval_seconds, 15)


def test_gpus_naming_no_pod_are_the_one_models() -> None:
    engine, _ = parse_target("vllm=http://10.0.0.1:8000/metrics")
    gpus, _ = parse_target("dcgm=http://10.0.0.1:9400/metrics")
    recording = Recording()
    recording.add(engine, 1_700_000_000_000, parse_exposition(VLLM.encode(), source="vllm"))
    text = real_text("dcgm_3x_quickstart_v100.prom").encode()
    recording.add(gpus, 1_700_000_000_000, parse_exposition(text, source="dcgm"))
    (deployment,), _ = propose_deployments(recording.series())
    # Four V100s (UUIDs of gpu 0 to 3; gpu 0 has two series) outside Kubernetes, one engine.
    assert deployment.hardware.gpus_per_replica == 4
    assert deployment.hardware.gpu_model == "Tesla V100-SXM2-32GB"


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--url", "ftp://h/metrics"], "--url number 1: base URL: only http and https"),
        (["--url", "http://h/metrics?x=1"], "has a query string"),
        (["--url", "http://h:1/m", "--url", "http://h:1/n"], "same job and instance"),
        (["--url", "http://h:1/m", "--interval", "0"], "--interval '0'"),
        (["--url", "http://h:1/m", "--interval", "1s", "--timeout", "2"], "longer than"),
        (["--url", "http://h:1/m", "--retries", "-1"], "--retries -1"),
    ],
)
def test_options_are_checked_before_any_scrape(
    argv: list[str], problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["capture", *argv, "--out", str(tmp_path / "ds"), "--duration", "1s"])
    assert status == 2
    assert problem in capsys.readouterr().err
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize(
    ("targets", "interval_s", "duration_s", "message"),
    [
        (0, 1.0, 1.0, "capture needs at least one target"),
        (1, 0.0, 1.0, r"the interval \(0\.0 s\) and the duration \(1\.0 s\) of a capture"),
        (1, 1.0, math.nan, r"the interval \(1\.0 s\) and the duration \(nan s\)"),
    ],
)
def test_bad_capture_arguments_are_refused_before_any_scrape(
    tmp_path: Path, targets: int, interval_s: float, duration_s: float, message: str
) -> None:
    target, _ = parse_target("vllm=http://127.0.0.1:9/metrics")
    clients = [ScrapeClient(target, PooledTransport(target.endpoint))] * targets
    with pytest.raises(ConfigurationError, match=message):
        capture(clients, tmp_path / "ds", interval_s=interval_s, duration_s=duration_s)
    assert not (tmp_path / "ds").exists()


def test_an_answer_that_does_not_parse_is_a_failed_scrape(tmp_path: Path) -> None:
    def body(n: int) -> str:
        return advancing(VLLM, n) if n != 1 else "vllm:x 1\nvllm:x{a=} 2\n"

    with FakeExporter(body) as exporter:
        target, _ = parse_target(f"vllm={exporter.url}")
        client = ScrapeClient(target, PooledTransport(target.endpoint))
        dataset = capture([client], tmp_path / "ds", interval_s=0.25, duration_s=1.0)
    (up,) = [s for s in dataset.samples if s.name == "up"]
    assert up.values.tolist() == [1.0, 0.0, 1.0, 1.0]
    method = " ".join(dataset.manifest.methodology)
    assert "4 scrapes, 1 failed" in method
    assert "answer line 2: series vllm:x: expected label" in method
