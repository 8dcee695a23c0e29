"""Bad options end before any work: exit 2, one line naming the option, no traceback.

"Before any work" is checked by naming a dataset directory that does not
exist: had the command read it before checking the options, it would have
failed on the dataset instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_USAGE, main

ROOT = Path(__file__).resolve().parents[1]
END = ["--end", "2026-10-19T18:40:00+08:00"]


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


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--dataset", "no-dataset", *END, "--window", "3000y"],
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
