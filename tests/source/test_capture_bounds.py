"""``inference-obs capture`` never hangs, never blows up and never loses what it captured.

Each case runs the real command against fake ``/metrics`` endpoints on
127.0.0.1 (:mod:`tests.source.fake_exporters`), most of them in a child process
so that a capture that would not end is killed at a bounded time and fails the
test instead of hanging it. Wall times are asserted with wide margins (the
machine may be shared); memory is the child's own peak (``VmHWM``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from inference_obs.cli import main
from inference_obs.source.capture import capture
from inference_obs.source.dataset.reader import Dataset, read_dataset
from inference_obs.source.http import Limits
from inference_obs.source.scrape import ScrapeClient, parse_target
from inference_obs.source.transport import PooledTransport
from tests.source.fake_exporters import FakeExporter, advancing, real_text

VLLM = real_text("vllm_v0_metrics_paste.prom")
# Prints, last, the seconds the command took (imports excluded: they take seconds on a
# loaded machine) and the child's own peak resident size: VmHWM, not ru_maxrss, which
# Linux carries across exec from the (large) test process.
# Its first argument is a file size limit in bytes (RLIMIT_FSIZE), or "-" for none.
_CHILD = (
    "import resource, sys, time\n"
    "if sys.argv[1] != '-':\n"
    "    limit = int(sys.argv[1])\n"
    "    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "from inference_obs.cli import main\n"
    "began = time.monotonic()\n"
    "status = main(sys.argv[2:])\n"
    "took = time.monotonic() - began\n"
    "print(took, max(int(line.split()[1]) * 1024 for line in open('/proc/self/status')"
    " if line.startswith('VmHWM:')))\n"
    "sys.exit(status)\n"
)


def run_capture(
    argv: list[str], *, timeout_s: float, file_size_limit: int | None = None
) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """``inference-obs capture ARGV`` in a child: its result, the command's seconds, its peak bytes.

    ``file_size_limit`` (RLIMIT_FSIZE, bytes, set before the package is imported)
    makes every file write past it fail with EFBIG, as a full disk fails it
    (Python ignores SIGXFSZ, so the write raises). A child still running at
    ``timeout_s`` is killed and the test fails.
    """
    limit = "-" if file_size_limit is None else str(file_size_limit)
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, limit, "capture", *argv],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"capture {' '.join(argv)} still ran after {timeout_s} s")
    *_, took, peak = ["0", "0", *done.stdout.split()]
    return done, float(took), int(peak)


def up_values(dataset: Dataset) -> list[float]:
    (up,) = [s for s in dataset.samples if s.name == "up"]
    return [float(v) for v in up.values]


def test_sigterm_ends_capture_with_a_valid_dataset(tmp_path: Path) -> None:
    # A CronJob's activeDeadlineSeconds, or a pod deleted, ends a capture with SIGTERM.
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
            proc.send_signal(signal.SIGTERM)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        served = len(engine.served)
    assert proc.returncode == 0, stderr
    assert f"wrote {out}" in stdout
    dataset = read_dataset(out)
    assert "ended early by the user" in " ".join(dataset.manifest.methodology)
    # Every scrape the exporter answered is kept (the round under way finishes first).
    assert len(up_values(dataset)) == served


def test_a_read_only_out_is_refused_before_any_scrape(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # /proc takes no new directory, for root too (the tests may run as root, whom
    # file permissions do not stop).
    with FakeExporter(lambda n: VLLM) as engine:
        argv = ["capture", "--url", engine.url, "--duration", "1s", "--interval", "0.2"]
        status = main([*argv, "--out", "/proc/inference-obs-capture"])
        served = list(engine.served)
    err = capsys.readouterr().err
    assert status == 2
    assert served == []
    assert len(err.splitlines()) == 1, err
    assert "--out /proc/inference-obs-capture: cannot be written" in err


def test_a_full_out_is_refused_before_any_scrape(tmp_path: Path) -> None:
    # No byte can be written (RLIMIT_FSIZE 0 fails every write as a full disk does).
    out = tmp_path / "ds"
    with FakeExporter(lambda n: VLLM) as engine:
        argv = ["--url", engine.url, "--interval", "0.2", "--duration", "1s", "--out", str(out)]
        done, _, _ = run_capture(argv, timeout_s=60, file_size_limit=0)
        served = list(engine.served)
    assert done.returncode == 2, done.stderr
    assert served == []
    assert done.stderr.splitlines() == [
        f"inference-obs: --out {out}: cannot be written (File too large)"
    ]
    assert not out.exists()


def test_a_write_that_fails_after_the_scrapes_is_one_line(tmp_path: Path) -> None:
    # The probe (4 KiB) fits; the dataset (samples.om alone is larger) does not.
    out = tmp_path / "ds"
    with FakeExporter(lambda n: advancing(VLLM, n)) as engine:
        argv = ["--url", engine.url, "--interval", "0.2", "--duration", "600ms", "--out", str(out)]
        done, _, _ = run_capture(argv, timeout_s=60, file_size_limit=6000)
        served = len(engine.served)
    assert served >= 1
    assert done.returncode == 2, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if not x.startswith("inference-obs: capture:")]
    assert line == f"inference-obs: {out}: cannot be written (File too large)"
    assert not (out / "manifest.json").exists()


def test_a_token_file_that_is_a_pipe_is_refused(tmp_path: Path) -> None:
    # A named pipe nobody writes to: reading it would wait for ever, on every scrape.
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    with FakeExporter(lambda n: VLLM) as engine:
        argv = ["--url", engine.url, "--interval", "0.2", "--duration", "1s"]
        done, took, _ = run_capture(
            [*argv, "--token-file", str(fifo), "--out", str(tmp_path / "ds")], timeout_s=30
        )
        served = list(engine.served)
    assert done.returncode == 2, done.stderr
    assert served == []
    assert "--token-file: token file" in done.stderr
    assert "not a regular file" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert took < 20


def test_a_token_file_too_large_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = tmp_path / "token"
    token.write_text("a" * (64 * 1024 + 1), encoding="ascii")  # one byte past 64 KiB
    with FakeExporter(lambda n: VLLM) as engine:
        argv = ["capture", "--url", engine.url, "--duration", "1s", "--interval", "0.2"]
        status = main([*argv, "--token-file", str(token), "--out", str(tmp_path / "ds")])
        served = list(engine.served)
    assert status == 2
    assert served == []
    assert "holds more than 65,536 bytes" in capsys.readouterr().err


def test_an_interval_below_the_minimum_is_refused(tmp_path: Path) -> None:
    # 1e-6 s asked a million rounds per second of --duration: the capture never ended.
    with FakeExporter(lambda n: VLLM) as engine:
        argv = ["--url", engine.url, "--interval", "1e-6", "--duration", "1s"]
        done, took, _ = run_capture([*argv, "--out", str(tmp_path / "ds")], timeout_s=30)
        served = list(engine.served)
    assert done.returncode == 2, done.stderr
    assert served == []
    assert done.stderr.splitlines() == [
        "inference-obs: --interval '1e-6': at least 100ms between scrapes"
    ]
    assert took < 20


def test_the_duration_holds_against_a_slow_exporter(tmp_path: Path) -> None:
    # An exporter that takes 6 s to answer, a 1 s capture: the scrape is given up at 1 s
    # (not at the 10 s scrape timeout), recorded as failed, and the dataset written.
    out = tmp_path / "ds"
    with FakeExporter(lambda n: VLLM, delay_s=6.0) as engine:
        argv = ["--url", engine.url, "--interval", "15s", "--duration", "1s", "--out", str(out)]
        done, took, _ = run_capture(argv, timeout_s=60)
    assert done.returncode == 0, done.stderr
    assert took < 4.0, took
    assert up_values(read_dataset(out)) == [0.0]


def _large_answer(series: int) -> str:
    """A valid answer of ``series`` gauge series, about 100 bytes each."""
    head = "# TYPE vllm:gpu_cache_usage_perc gauge\n"
    return head + "".join(
        f'vllm:gpu_cache_usage_perc{{model_name="meta-llama/Llama-3.1-8B",pod="p-{i % 997}",'
        f'replica="{i}"}} 0.5\n'
        for i in range(series)
    )


def test_an_answer_past_the_default_size_is_a_failed_scrape_not_gigabytes(tmp_path: Path) -> None:
    # 24 MiB of valid text, 274,000 series: once 1.3 GiB and 20 s for a 1 s capture.
    body = _large_answer(274_000)
    assert len(body) > 24 * 2**20  # three times the default limit, 8 MiB
    out = tmp_path / "ds"
    with FakeExporter(lambda n: body) as engine:
        argv = ["--url", engine.url, "--interval", "15s", "--duration", "1s", "--out", str(out)]
        done, took, peak = run_capture(argv, timeout_s=120)
    assert done.returncode == 0, done.stderr
    assert took < 10.0, took
    assert 0 < peak < 300 * 2**20, peak  # a fresh CLI process alone is some 150 MiB
    dataset = read_dataset(out)
    assert up_values(dataset) == [0.0]
    assert "larger than 8,388,608 bytes" in " ".join(dataset.manifest.methodology)


def test_a_raised_size_limit_still_ends_with_the_duration(tmp_path: Path) -> None:
    # The same answer accepted (--max-answer-mb 32): reading it would outlast the 1 s
    # capture, so reading stops at the deadline and the scrape is recorded as failed.
    body = _large_answer(274_000)
    out = tmp_path / "ds"
    with FakeExporter(lambda n: body) as engine:
        argv = ["--url", engine.url, "--interval", "15s", "--duration", "1s", "--out", str(out)]
        done, took, _ = run_capture([*argv, "--max-answer-mb", "32"], timeout_s=120)
    assert done.returncode == 0, done.stderr
    assert took < 10.0, took
    dataset = read_dataset(out)
    assert up_values(dataset) == [0.0]
    assert "the deadline passed while reading" in " ".join(dataset.manifest.methodology)


def _capture(exporter: FakeExporter, out: Path, *, duration_s: float) -> Dataset:
    """The library's capture of ``exporter`` every 0.25 s, each scrape tried once."""
    target, _ = parse_target(f"vllm={exporter.url}")
    client = ScrapeClient(
        target, PooledTransport(target.endpoint), limits=Limits(timeout=0.25, retries=0)
    )
    try:
        return capture([client], out, interval_s=0.25, duration_s=duration_s)
    finally:
        client.close()


def test_exposed_timestamps_outside_the_capture_are_dropped_and_counted(tmp_path: Path) -> None:
    # One series stamped 1970 (1 s after the epoch), one stamped by the scrape.
    body = "vllm:stale_gauge 5 1000\nvllm:num_requests_running 3\n"
    with FakeExporter(lambda n: body) as exporter:
        dataset = _capture(exporter, tmp_path / "ds", duration_s=1.0)
        served = len(exporter.served)
    names = {s.name for s in dataset.samples}
    assert "vllm:stale_gauge" not in names
    assert "vllm:num_requests_running" in names
    window = dataset.manifest.window
    assert window.start.year >= 2024  # the window is the capture's, not 1970's
    method = " ".join(dataset.manifest.methodology)
    # One dropped per scrape served.
    assert f"{served} samples dropped whose exposed timestamp lay more than 60 s outside" in method


def test_a_targets_own_up_cannot_overwrite_the_captures_record(tmp_path: Path) -> None:
    # The target exposes up 0 itself; its second scrape fails (HTTP 500).
    with FakeExporter(lambda n: "up 0\nvllm:num_requests_running 3\n", fail={1}) as exporter:
        dataset = _capture(exporter, tmp_path / "ds", duration_s=1.0)
    # Scrapes at 0, 0.25, 0.5 and 0.75 s: the second failed, the others answered.
    assert up_values(dataset) == [1.0, 0.0, 1.0, 1.0]
    (theirs,) = [s for s in dataset.samples if s.name == "exported_up"]
    assert theirs.values.tolist() == [0.0, 0.0, 0.0]
    assert "3 samples of a target's own up/" in " ".join(dataset.manifest.methodology)
