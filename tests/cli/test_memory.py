"""Freed memory handed back between a report's phases (:mod:`inference_obs.cli.memory`)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import EXIT_OK, main

# A fresh interpreter: 240 MB of 4 KB buffers in the C heap, 15 in 16 freed, so every
# freed stretch lies between kept buffers, where free() alone never returns a page.
FRAGMENTED = """
from inference_obs.cli.memory import hand_back_freed

def rss_mib():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) // 1024

junk = [bytearray(4000) for _ in range(60_000)]
kept = junk[::16]
del junk
before = rss_mib()
trimmed = hand_back_freed()
print(trimmed, before, rss_mib(), len(kept))
"""


def test_the_freed_pages_of_a_fragmented_heap_go_back_to_the_system() -> None:
    done = subprocess.run(
        [sys.executable, "-c", FRAGMENTED], capture_output=True, text=True, check=True
    )
    trimmed, before, after, _ = done.stdout.split()
    assert trimmed == "True"  # glibc, as on every machine this project is tested on
    assert int(before) - int(after) > 150, done.stdout


def test_the_report_command_hands_back_the_analyses_memory_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    command = importlib.import_module("inference_obs.cli.report")
    package = importlib.import_module("inference_obs.report")
    write_report = package.write_report

    def handing_back() -> bool:
        calls.append("hand back")
        return True

    monkeypatch.setattr(command, "hand_back_freed", handing_back)

    def writing(*args: Any, **kwargs: Any) -> dict[str, Path]:
        calls.append("write")
        written: dict[str, Path] = write_report(*args, **kwargs)
        return written

    monkeypatch.setattr(package, "write_report", writing)
    dataset = Path(__file__).resolve().parents[2] / "datasets" / "r1-decode"
    out = tmp_path / "out"
    status = main(["report", "--dataset", str(dataset), "--format", "json", "--out", str(out)])
    assert status == EXIT_OK
    assert calls == ["hand back", "write"]
    assert (out / "report.json").is_file()
