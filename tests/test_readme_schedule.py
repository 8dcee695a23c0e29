"""The README's scheduled-report script, run as written: ``latest`` moves on exit 0 only.

``latest`` is the next run's baseline. A run that wrote its report but found
a regression (7) or a deployment without data (3) must not become it, or a
regressed week would be the level the next week is compared against. The
script is taken from README.md and run by bash and by ``/bin/sh`` (its
shebang) with ``inference-obs`` and ``date`` replaced on ``PATH`` by stand-ins:
the stand-in report writes ``report.json`` for the statuses that write one
(0, 3, 5 and 7, as docs/report-json.md's table says) and exits with the
status it is told.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = re.search(
    r"```sh\n(#!/bin/sh\n# weekly-report:.*?)```",
    (REPO / "README.md").read_text(encoding="utf-8"),
    re.DOTALL,
)
# Statuses after which report.json is written (docs/report-json.md, exit statuses).
WRITES = {0, 3, 5, 7}

STAND_IN_REPORT = """#!/bin/sh
# inference-obs as the script calls it: log the arguments, write --out/report.json
# for the statuses that write one, exit with $STATUS.
printf '%s\\n' "$*" >> "$CALLS"
[ "$1" = report ] || exit 99
out=
while [ $# -gt 0 ]; do
    [ "$1" = --out ] && out=$2
    shift
done
case " $WRITES " in
    *" $STATUS "*) mkdir -p "$out" && printf '{"day": "%s"}\\n' "$DAY" > "$out/report.json" ;;
esac
exit "$STATUS"
"""
STAND_IN_DATE = """#!/bin/sh
[ "$*" = "-u +%F" ] || exit 99
printf '%s\\n' "$DAY"
"""


def executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    assert SCRIPT is not None, "README.md has no weekly-report script"
    executable(tmp_path / "weekly-report", SCRIPT.group(1))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    executable(bin_dir / "inference-obs", STAND_IN_REPORT)
    executable(bin_dir / "date", STAND_IN_DATE)
    (tmp_path / "reports").mkdir()
    return tmp_path


def week(home: Path, shell: str, day: str, status: int) -> tuple[int, str]:
    """One scheduled run on ``day`` whose report exits ``status``: the script's status,
    and the arguments the report was given."""
    calls = home / "calls.log"
    calls.unlink(missing_ok=True)
    env = {
        "PATH": f"{home / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "REPORTS_HOME": str(home),
        "CALLS": str(calls),
        "DAY": day,
        "STATUS": str(status),
        "WRITES": " ".join(map(str, sorted(WRITES))),
    }
    done = subprocess.run(
        [shell, str(home / "weekly-report")], env=env, capture_output=True, text=True, timeout=30
    )
    assert done.stderr == "", done.stderr
    [call] = calls.read_text().splitlines()
    return done.returncode, call


def latest(home: Path) -> str | None:
    link = home / "reports" / "latest"
    return os.readlink(link) if link.is_symlink() else None


@pytest.mark.parametrize("shell", [shutil.which("bash") or "bash", "/bin/sh"])
def test_latest_moves_only_after_a_clean_run(home: Path, shell: str) -> None:
    # The first run has nothing to compare with.
    status, call = week(home, shell, "2026-10-05", 0)
    assert status == 0
    assert "--baseline" not in call
    assert latest(home) == "2026-10-05"
    # Each run after it compares with the last clean one, and keeps its own status;
    # none but a clean one moves the link, whether it wrote a report or not.
    for day, code in [
        ("2026-10-12", 7),  # a regression: written, not a baseline
        ("2026-10-19", 3),  # no data for a deployment: written, not a baseline
        ("2026-10-26", 4),  # the source failed: nothing written
        ("2026-11-02", 6),  # out of time: nothing written
    ]:
        status, call = week(home, shell, day, code)
        assert status == code
        assert call.endswith(
            f"--out reports/{day} --baseline reports/latest/report.json --fail-on regression"
        )
        assert latest(home) == "2026-10-05", day
        assert (home / "reports" / day / "report.json").exists() == (code in WRITES)
    status, _ = week(home, shell, "2026-11-09", 0)
    assert status == 0
    assert latest(home) == "2026-11-09"
    assert (home / "reports" / "latest" / "report.json").read_text() == '{"day": "2026-11-09"}\n'
