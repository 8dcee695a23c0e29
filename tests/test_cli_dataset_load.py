"""``inference-obs dataset load``: its help, and the options refused before any request.

Loading into real stores is tested in ``tests/integration/test_dataset_load.py``.
Every URL here points at a port nothing listens on: a refusal must come first.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from inference_obs.cli import main

DATASET = Path(__file__).parents[1] / "datasets" / "pro5000-vs-h20"


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_help_says_how_the_protocol_is_chosen(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["dataset", "load", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for needed in (
        "vm-import",
        "remote-write",
        "--web.enable-remote-write-receiver",
        "/insert/0/prometheus/api/v1/import",
        "--existing {refuse,write}",
        "-dedup.minScrapeInterval",
        "report --prometheus URL",
    ):
        assert needed in text, needed


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--into", "http://127.0.0.1:{port}/api/v1/query"], "--into: .* not a write URL"),
        (
            ["--into", "http://127.0.0.1:{port}/api/v1/write", "--protocol", "vm-import"],
            "--protocol vm-import: the --into URL's path is a remote-write path",
        ),
        (
            ["--into", "http://127.0.0.1:{port}/insert/0/prometheus/api/v1/import"],
            "give --query-url",
        ),
        (["--into", "http://127.0.0.1:{port}/api/v1/push"], "give --query-url"),
        (["--into", "http://127.0.0.1:{port}", "--batch-samples", "0"], "--batch-samples 0"),
        (["--into", "ftp://127.0.0.1:{port}"], "only http and https"),
    ],
)
def test_bad_options_are_refused_before_any_request(
    args: list[str], problem: str, closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    filled = [a.format(port=closed_port) for a in args]
    assert main(["dataset", "load", str(DATASET), *filled]) == 2
    err = capsys.readouterr().err
    assert re.search(problem, err), err


def test_a_missing_dataset_is_named_before_the_store_is_asked(
    tmp_path: Path, closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nothing"
    assert main(["dataset", "load", str(missing), "--into", f"http://127.0.0.1:{closed_port}"]) == 2
    assert f"{missing}: no dataset directory there" in capsys.readouterr().err


def test_an_unreachable_store_is_a_source_error_without_credentials(
    closed_port: int, capsys: pytest.CaptureFixture[str]
) -> None:
    into = f"http://ann:s3cret@127.0.0.1:{closed_port}/api/v1/write"
    assert main(["dataset", "load", str(DATASET), "--into", into]) == 4
    err = capsys.readouterr().err
    assert f"127.0.0.1:{closed_port}" in err
    assert "s3cret" not in err
