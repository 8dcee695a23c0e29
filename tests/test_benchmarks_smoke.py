"""The benchmark runners that need no server, at a size of seconds: they run and print their
medians, ratios and mode (their timings are not checked here; benchmarks/README.md records
them); sides are timed interleaved, every side run before any is timed; the latency relay
adds its delay both ways and keeps connections."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import engine, envelope, fleet, fleet_scale, frames, report
from benchmarks.common import interleave, rotation
from benchmarks.fleet_gpus import DCGM_FIELDS
from benchmarks.fleet_series import VLLM_FAMILIES
from benchmarks.relay import LatencyRelay
from inference_obs.engine.evaluate import Evaluator
from inference_obs.engine.rules import Rules
from inference_obs.metrics.family import MetricType
from inference_obs.source.dataset.reader import read_dataset

TINY = ["--replicas", "2", "--gpus-per-replica", "2", "--hours", "0.25", "--interval", "15"]


def test_fleet_writes_a_dataset_of_every_family(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.main(["--out", str(tmp_path / "fleet"), *TINY])
    assert "wrote" in capsys.readouterr().out
    dataset = read_dataset(tmp_path / "fleet", cache=None)
    names = set(dataset.samples.names)
    for family in VLLM_FAMILIES:
        parts = ("_bucket", "_sum", "_count") if family.type is MetricType.HISTOGRAM else ("",)
        assert {family.name + part for part in parts} <= names
    assert {f.name for f in DCGM_FIELDS} <= names
    assert [d.name for d in dataset.manifest.deployments] == ["H100", "H200"]
    # Replica 1 (the first H200 one here) restarts: its counters drop once.
    samples = dataset.samples
    i = next(
        k
        for k, (name, labels) in enumerate(zip(samples.names, samples.labels, strict=True))
        if name == "vllm:generation_tokens_total" and labels["pod"] == "fleet-h200-01"
    )
    values = samples.values[samples.offsets[i] : samples.offsets[i + 1]]
    assert int(np.sum(np.diff(values) < 0)) == 1


def test_fleet_is_the_same_for_the_same_seed(tmp_path: Path) -> None:
    shape = fleet.FleetShape(replicas=2, gpus_per_replica=1, hours=0.1)
    one = fleet.write_fleet(tmp_path / "a", shape)
    two = fleet.write_fleet(tmp_path / "b", shape)
    assert one.manifest.files == two.manifest.files


def test_report_prints_medians_and_its_goals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.main(["--out", str(tmp_path / "fleet"), *TINY])
    report.main(["--dataset", str(tmp_path / "fleet"), "--repeats", "1", "--no-peer"])
    out = capsys.readouterr().out
    assert "median s" in out
    assert "report, empty cache (cold)" in out
    assert "report, cache filled (warm)" in out
    assert "(goal < 60 s)" in out
    assert "(goal < 4 GiB)" in out
    assert "spread s" in out
    assert "mode: each report a fresh process" in out
    assert "load average" in out


def test_fleet_scale_prints_each_size_mode_and_the_fits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--sizes", "2,3", "--gpus-per-replica", "1", "--hours", "0.25", "--repeats", "1"]
    fleet_scale.main(
        [*argv, "--largest-repeats", "1", "--modes", "cold,warm", "--fleets", str(tmp_path)]
    )
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.split()[2:3] in (["cold"], ["warm"])]
    # One row per size and mode: replicas, GPUs (1 each here), mode, median s, spread, runs 1.
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [
        ("2", "2", "cold", "1"), ("2", "2", "warm", "1"),
        ("3", "3", "cold", "1"), ("3", "3", "warm", "1"),
    ]  # fmt: skip
    assert "cold: wall s = " in out
    assert " x replicas; peak MiB = " in out
    assert "(goal: flat)" in out
    assert "load average" in out
    # The fleets are kept for the next run, under names that say their shape.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "fleet-2x1-0.25h-15s",
        "fleet-3x1-0.25h-15s",
    ]


def test_fleet_scale_rotates_the_order_of_the_modes_each_round() -> None:
    # Written out by hand: each round starts one mode later than the round before.
    assert list(fleet_scale.rounds(["cold", "warm", "live"], 4)) == [
        "cold", "warm", "live",
        "warm", "live", "cold",
        "live", "cold", "warm",
        "cold", "warm", "live",
    ]  # fmt: skip


def test_fleet_scale_counts_the_body_before_the_appendix(tmp_path: Path) -> None:
    report_md = tmp_path / "report.md"
    report_md.write_text("# Report\n\nline\n## Appendix\nmore\n", encoding="utf-8")
    assert fleet_scale.body_lines(report_md) == 3
    report_md.write_text("# Report\nline\n", encoding="utf-8")
    assert fleet_scale.body_lines(report_md) == 2


def test_engine_runner_times_both_modes_without_kept_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet.main(["--out", str(tmp_path / "fleet"), *TINY])
    argv = ["--dataset", str(tmp_path / "fleet"), "--repeats", "2", "--warmup", "1", "--no-peer"]
    engine.main(argv)
    out = capsys.readouterr().out
    assert "mode cold: one Evaluator, kept answers emptied before each call" in out
    assert "mode new evaluator: Evaluator(samples) built in each call" in out
    assert "kept answers used by timed calls: cold 0, new evaluator 0 (must be 0)" in out
    assert "load average at start" in out
    assert "load average at end" in out
    # One row per query: 8 standard queries over 1 h and over the whole window.
    rows = [line for line in out.splitlines() if line.startswith(engine.QUERIES)]
    assert len(rows) == 16
    # A runner whose evaluator kept its answers between timed calls (as it did
    # when every call after the first was a lookup) must not print a timing.
    monkeypatch.setattr(Evaluator, "forget", lambda self: None)
    with pytest.raises(SystemExit, match="kept answers"):
        engine.main(argv)


def test_engine_runner_cold_calls_use_no_answer_an_earlier_call_kept(tmp_path: Path) -> None:
    dataset = fleet.write_fleet(tmp_path / "fleet", fleet.FleetShape(2, 1, 0.25))
    at = dataset.manifest.window.window().end_s
    _, expr = engine.queries(dataset.manifest.deployments[0].matchers, 0.25)[0]
    evaluator = Evaluator(dataset.samples)
    evaluator.evaluate(expr, at)
    before = evaluator.kept_hits
    evaluator.evaluate(expr, at)  # the same query again, nothing emptied: a lookup
    assert evaluator.kept_hits > before
    assert engine.cold_call(evaluator, expr, at)[1] == 0
    assert engine.new_evaluator_call(dataset.samples, Rules.PROMETHEUS_2, expr, at)[1] == 0


def test_engine_runner_warms_and_times_each_side_in_rotating_order() -> None:
    seen: list[str] = []

    def call(side: str) -> tuple[float, int]:
        seen.append(side)
        return 0.001, 0

    runs = engine.interleaved({s: partial(call, s) for s in "abc"}, repeats=3, warmup=1)
    # Written out by hand: one warm-up round, then each timed round starts one side later.
    assert seen == [*"abc", *"abc", *"bca", *"cab"]
    assert runs.seconds == {s: [0.001] * 3 for s in "abc"}


class _Echo(BaseHTTPRequestHandler):
    """Answers every request with a fixed 1 MB body (and the request's body after it)."""

    protocol_version = "HTTP/1.1"  # keep-alive
    BODY = bytes(range(256)) * 4096

    def do_POST(self) -> None:
        sent = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.BODY) + len(sent)))
        self.end_headers()
        self.wfile.write(self.BODY + sent)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_latency_relay_delays_both_ways_in_order_over_kept_connections() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    serving = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    serving.start()
    delay = 0.05
    try:
        with LatencyRelay(f"http://127.0.0.1:{server.server_address[1]}", delay) as relay:
            port = int(relay.url.rsplit(":", 1)[1])
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            times = []
            for body in (b"first", b"second" * 10_000):
                started = time.perf_counter()
                connection.request("POST", "/", body=body)
                answer = connection.getresponse().read()
                times.append(time.perf_counter() - started)
                assert answer == _Echo.BODY + body
            connection.close()
            assert (relay.connections, relay.requests) == (1, 2)
    finally:
        server.shutdown()
        server.server_close()
    # A new connection waits a round trip more (the handshake); then a round trip each.
    assert times[0] >= 4 * delay * 0.95
    assert times[1] >= 2 * delay * 0.95


def test_envelope_compares_validation_with_decoding(capsys: pytest.CaptureFixture[str]) -> None:
    envelope.main(["--series", "100", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "100 series" in out
    assert "validation / decoding = " in out
    assert "mode: 2 sides interleaved in one process" in out


def test_rotation_starts_each_round_one_side_later() -> None:
    # Written out by hand: a, b, c; then b, c, a; then c, a, b; then a, b, c again.
    assert rotation(["a", "b", "c"], 4) == [*"abc", *"bca", *"cab", *"abc"]
    # A side with fewer runs takes part in the first rounds only, in its place.
    assert rotation(["a", "b", "c"], 3, runs={"a": 1}) == [*"abc", *"bc", *"cb"]


def test_interleave_runs_every_side_before_it_times_any() -> None:
    calls: list[str] = []

    def side(name: str) -> Callable[[], None]:
        return lambda: calls.append(name)

    found = interleave({name: side(name) for name in "xyz"}, 3, 2)
    # Two untimed rounds, then three timed ones, each round's order rotated by one.
    assert calls == [*"xyz", *"yzx", *"xyz", *"yzx", *"zxy"]
    assert [timed for _, timed in found.schedule] == [False] * 6 + [True] * 9
    assert [name for name, _ in found.schedule] == calls
    assert {name: len(t.seconds) for name, t in found.sides.items()} == {"x": 3, "y": 3, "z": 3}
    assert all(len(t.cpu_seconds) == 3 for t in found.sides.values())


def _matrix_body(series: int, points: int) -> bytes:
    """A range answer in Prometheus's compact encoding (as the server writes it)."""
    result = ",".join(
        f'{{"metric":{{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"{k}"}},"values":['
        + ",".join(f'[{1_700_000_000 + 15 * i},"{(k + i) % 100}"]' for i in range(points))
        + "]}"
        for k in range(series)
    )
    return (
        b'{"status":"success","data":{"resultType":"matrix","result":[' + result.encode() + b"]}}"
    )


def test_frames_times_no_side_before_every_side_has_run() -> None:
    # Ours once took 11 ms in a fresh process and 13-18 ms once the peer had run: a
    # runner that timed ours first flattered it. Every side, the peer included, must
    # have run before any side is timed, and each timed round must start elsewhere.
    body = _matrix_body(series=4, points=30)
    found = frames.measure(body, rounds=len(frames.SIDES), warmup_rounds=1)
    first_timed = next(k for k, (_, timed) in enumerate(found.schedule) if timed)
    assert {name for name, _ in found.schedule[:first_timed]} == set(frames.SIDES)
    timed = [name for name, was_timed in found.schedule if was_timed]
    rounds = [timed[k : k + len(frames.SIDES)] for k in range(0, len(timed), len(frames.SIDES))]
    assert all(sorted(one) == sorted(frames.SIDES) for one in rounds)
    assert sorted(one[0] for one in rounds) == sorted(frames.SIDES)  # each side leads once
    assert found.sides["ours"].median > 0
    assert len(found.ratios("peer", "ours")) == len(frames.SIDES)
