"""Bad options end before any work: exit 2, one line naming the option, no traceback.

"Before any work" is checked two ways. Live runs point ``--prometheus`` at a
fake server that records requests: it must receive none. Offline runs name a
dataset directory that does not exist: had the command read it before checking
the options, it would have failed on the dataset instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_USAGE, main
from tests.source.test_prometheus_fakes import FakeServer, fake_server

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "datasets" / "pro5000-vs-h20" / "manifest.json"
TOPOLOGY = ROOT / "tests" / "fixtures" / "topology" / "h100-pairs.txt"
DEPLOYMENTS = ["--deployments", str(MANIFEST)]
END = ["--end", "2026-10-19T18:40:00+08:00"]
HOUR = [*END, "--window", "1h"]  # the bundled dataset's window
SECRET = "s3cret"  # planted in URLs, headers and token files; no message may show it


@pytest.fixture
def server() -> Iterator[FakeServer]:
    yield from fake_server()


def closed_port() -> int:
    """A port nothing listens on once the probe is closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def refused(argv: list[str], capsys: pytest.CaptureFixture[str], *named: str) -> str:
    """Run the command line: exit 2, one line on stderr holding each of ``named``."""
    # In process, a traceback would be an exception out of main(), failing here.
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == EXIT_USAGE, err
    assert out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith("inference-obs: ")
    assert "Traceback" not in err
    assert SECRET not in err
    for text in named:
        assert text in err, (text, err)
    return err


@pytest.mark.parametrize(
    ("command", "args", "named"),
    [
        # Past what datetime arithmetic can hold.
        ("report", ["--window", "1000000000d", *END], ["--window '1000000000d'", "year 1"]),
        ("report", ["--window", "3000y", *END], ["--window '3000y'", "year 1"]),
        ("compare", ["--window", "3000y", *END], ["--window '3000y'"]),
        # Valid local times with no UTC equivalent.
        (
            "report",
            ["--end", "9999-12-31T23:59:59-14:00", "--window", "1h"],
            ["--end '9999-12-31T23:59:59-14:00'", "UTC"],
        ),
        (
            "report",
            ["--start", "0001-01-01T00:00:00+14:00", *END],
            ["--start '0001-01-01T00:00:00+14:00'"],
        ),
        ("report", ["--start", END[1], *END], ["--start", "is not before --end"]),
        ("report", ["--window", "", *END], ["--window ''"]),
        *(
            (command, ["--resolution", value], [f"--resolution {value!r}"])
            for command in ("report", "compare")
            for value in ("nan", "inf", "0", "-60", "0.0001", "1e400", "\N{SUPERSCRIPT TWO}")
        ),
        *(
            (command, ["--gpu-hour-price", f"H20={value}"], [f"--gpu-hour-price 'H20={value}'"])
            for command in ("report", "compare")
            for value in ("nan", "inf", "-inf", "-1", "0", "1e30")
        ),
        (
            "report",
            ["--gpu-hour-price", "H20=1", "--gpu-hour-price", "H20=2"],
            ["--gpu-hour-price 'H20=2'", "H20"],
        ),
        (
            "report",
            ["--topology", f"H20={TOPOLOGY}", "--topology", f"H20={TOPOLOGY}"],
            ["--topology", "H20 has a topology already"],
        ),
        *(
            ("report", ["--time-budget", value], [f"--time-budget {value!r}"])
            for value in ("nan", "inf", "-1", "0", "soon")
        ),
        ("report", ["--format", ","], ["--format ','"]),
        ("report", ["--format", "md,pdf"], ["--format 'md,pdf'"]),
        ("report", ["--dataset", ""], ["--dataset"]),
        ("compare", ["--dataset", ""], ["--dataset"]),
        # Live-only options without --prometheus would quietly read a dataset.
        ("report", ["--token-env", "HOME"], ["--token-env", "--prometheus"]),
        ("compare", ["--header", f"X-Key: {SECRET}"], ["--header", "--prometheus"]),
    ],
)
def test_a_bad_offline_option_is_refused_before_the_dataset_is_read(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    args: list[str],
    named: list[str],
) -> None:
    out = ["--out", str(tmp_path / "out"), "--quiet"] if command == "report" else []
    refused([command, "--dataset", str(tmp_path / "no-dataset"), *out, *args], capsys, *named)
    assert not (tmp_path / "out").exists()


def live_argv(command: str, url: str, tmp_path: Path) -> list[str]:
    """``command`` reading ``url`` for the bundled deployments and window, writing under tmp."""
    given = ["--prometheus", url, *DEPLOYMENTS, *HOUR]
    out = ["--out", str(tmp_path / "out")]
    if command == "dataset export":
        return ["dataset", "export", *given, *out]
    return [command, *given, *([*out, "--quiet"] if command == "report" else [])]


LIVE = ["report", "compare", "dataset export"]


@pytest.mark.parametrize("command", LIVE)
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--prometheus", ""], ["--prometheus", "empty"]),
        (["--prometheus", "http://"], ["--prometheus", "no host"]),
        (["--prometheus", "http://127.0.0.1:99999"], ["--prometheus", "port"]),
        (["--ca-file", "{tmp}/missing.pem"], ["--ca-file {tmp}/missing.pem", "No such file"]),
        (["--ca-file", "{tmp}"], ["--ca-file {tmp}", "directory"]),
        (["--ca-file", "{tmp}/token"], ["--ca-file {tmp}/token", "not a CA bundle"]),
        (["--token-file", "{tmp}/missing"], ["--token-file {tmp}/missing", "No such file"]),
        (["--token-file", "{tmp}"], ["--token-file {tmp}", "directory"]),
        (["--token-file", ""], ["--token-file", "empty"]),
        (["--token-env", "INFERENCE_OBS_UNSET"], ["--token-env 'INFERENCE_OBS_UNSET'"]),
        (["--token-file", "{tmp}/token", "--token-env", "HOME"], ["--token-file", "--token-env"]),
        (["--header", f"X Key: {SECRET}"], ["--header number 1", "name"]),
        (["--header", f"X-Key: {SECRET}\r\nX-Other: 1"], ["--header number 1", "control"]),
        (["--header", f"X-Key: {SECRET}\N{CHECK MARK}"], ["--header number 1", "Latin-1"]),
        (["--header", "Content-Length: 0"], ["--header number 1", "set by the client"]),
        (["--parallel", "0"], ["--parallel 0"]),
        (["--max-answer-mb", "nan"], ["--max-answer-mb nan"]),
        (["--max-answer-mb", "0"], ["--max-answer-mb 0"]),
    ],
)
def test_a_bad_live_option_is_refused_before_any_request(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    server: FakeServer,
    command: str,
    args: list[str],
    named: list[str],
) -> None:
    monkeypatch.delenv("INFERENCE_OBS_UNSET", raising=False)
    (tmp_path / "token").write_text(f"{SECRET}-token\n", encoding="utf-8")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    refused(
        [*live_argv(command, server.url, tmp_path), *argv],
        capsys,
        *(n.replace("{tmp}", str(tmp_path)) for n in named),
    )
    assert server.requests == []
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", LIVE)
@pytest.mark.parametrize(
    "url",
    [
        f"ftp://reader:{SECRET}@127.0.0.1:{{port}}/prom?token={SECRET}#{SECRET}",
        f"file:///etc/{SECRET}",
        f"reader:{SECRET}@127.0.0.1:{{port}}",  # no scheme
        "127.0.0.1:{port}",
    ],
)
def test_only_http_and_https_urls_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, url: str
) -> None:
    # Nothing listens there, so an attempt would fail too, but only after the
    # source's retries and backoff: seconds, not the milliseconds of a refusal.
    started = time.monotonic()
    argv = live_argv(command, url.format(port=closed_port()), tmp_path)
    refused(argv, capsys, "--prometheus", "only http and https")
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("option", ["--gpu-hour-price NOPE=2", f"--topology NOPE={TOPOLOGY}"])
def test_a_price_or_topology_for_no_deployment_is_refused(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    server: FakeServer,
    command: str,
    option: str,
) -> None:
    err = refused(
        [*live_argv(command, server.url, tmp_path), *option.split(" ")],
        capsys,
        option.split(" ")[0],
        "'NOPE'",
    )
    assert "PRO, H20" in err  # the deployments there are
    assert server.requests == []


@pytest.mark.parametrize(
    ("out", "named"),
    [
        ("{tmp}/out", "--out {tmp}/out: not an empty directory"),
        ("/proc/inference-obs-export", "--out /proc/inference-obs-export: cannot be written"),
    ],
)
def test_an_export_that_could_not_be_written_sends_no_query(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, server: FakeServer, out: str, named: str
) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "kept.txt").write_text("a file already there\n", encoding="utf-8")
    argv = live_argv("dataset export", server.url, tmp_path)
    argv[argv.index("--out") + 1] = out.replace("{tmp}", str(tmp_path))
    refused(argv, capsys, named.replace("{tmp}", str(tmp_path)))
    assert server.requests == []
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["kept.txt"]


@pytest.mark.parametrize("value", ["nan", "inf", "-1e-9"])
def test_verify_refuses_a_nan_infinite_or_negative_tolerance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    # No dataset there: reading it first would fail naming the directory instead.
    argv = ["dataset", "verify", str(tmp_path / "no-dataset"), f"--rel-tol={value}"]
    refused(argv, capsys, f"--rel-tol {float(value)!r}")


def test_simulate_refuses_a_negative_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = ROOT / "tests" / "simulate" / "small.yaml"
    refused(
        ["simulate", str(scenario), "--out", str(tmp_path / "d"), "--seed", "-1"],
        capsys,
        "--seed -1",
    )
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--dataset", "no-dataset", *END, "--window", "3000y"],
        ["report", "--prometheus", "", *DEPLOYMENTS, *HOUR],
        ["dataset", "export", "--prometheus", "", *DEPLOYMENTS, "--out", "x", *HOUR],
    ],
)
def test_as_a_user_runs_it_the_error_is_one_line(tmp_path: Path, argv: list[str]) -> None:
    run_in = tmp_path / "cwd"
    run_in.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "inference_obs.cli", *argv],
        capture_output=True,
        text=True,
        cwd=run_in,  # nothing may be written here (a report, an export) ...
        # ... nor a bundled dataset regenerated into the cache.
        env={**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")},
        check=False,
        timeout=60,
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert list(run_in.iterdir()) == []
    assert not (tmp_path / "cache" / "inference-obs").exists()
