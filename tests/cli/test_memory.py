"""Fewer heaps for a report's threads, and freed memory handed back between its phases
(:mod:`inference_obs.cli.memory`)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from inference_obs.cli import EXIT_OK, main
from inference_obs.cli.memory import ARENAS

# A fresh interpreter: 16 threads each allocate from the C heap (100 kB, under glibc's
# threshold for a mapping of its own) and wait for the others; then glibc lists its heaps.
THREADED = """
import ctypes, sys, threading
from inference_obs.cli.memory import share_heaps

print(share_heaps() if sys.argv[1] == "shared" else None, flush=True)
held = []
together = threading.Barrier(16)

def work():
    held.append(bytearray(100_000))
    together.wait()

threads = [threading.Thread(target=work) for _ in range(16)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()  # one "Arena N:" block per heap, on stderr
"""


def _heaps(how: str, **environment: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", THREADED, how],
        capture_output=True,
        text=True,
        check=True,
        env={**env, **environment},
    )
    arenas = sum(line.startswith("Arena ") for line in done.stderr.splitlines())
    return done.stdout.strip(), arenas


def test_threads_started_after_share_heaps_allocate_from_at_most_two_heaps() -> None:
    assert _heaps("shared") == ("True", ARENAS)
    # Left to glibc, each thread that allocates gets a heap of its own (up to 8 a core).
    said, arenas = _heaps("default")
    assert said == "None"
    assert arenas > ARENAS


def test_malloc_arena_max_in_the_environment_rules() -> None:
    assert _heaps("shared", MALLOC_ARENA_MAX="3") == ("False", 3)


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


def test_the_report_command_shares_heaps_before_the_analyses_and_hands_back_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    command = importlib.import_module("inference_obs.cli.report")
    package = importlib.import_module("inference_obs.report")
    build = importlib.import_module("inference_obs.report.build")
    write_report, build_report = package.write_report, build.build_report

    def sharing() -> bool:
        calls.append("share heaps")
        return True

    def handing_back() -> bool:
        calls.append("hand back")
        return True

    def building(*args: Any, **kwargs: Any) -> Any:
        calls.append("build")
        return build_report(*args, **kwargs)

    def writing(*args: Any, **kwargs: Any) -> dict[str, Path]:
        calls.append("write")
        written: dict[str, Path] = write_report(*args, **kwargs)
        return written

    monkeypatch.setattr(command, "share_heaps", sharing)
    monkeypatch.setattr(command, "hand_back_freed", handing_back)
    monkeypatch.setattr(build, "build_report", building)
    monkeypatch.setattr(package, "write_report", writing)
    dataset = Path(__file__).resolve().parents[2] / "datasets" / "r1-decode"
    out = tmp_path / "out"
    status = main(["report", "--dataset", str(dataset), "--format", "json", "--out", str(out)])
    assert status == EXIT_OK
    assert calls == ["share heaps", "build", "hand back", "write"]
    assert (out / "report.json").is_file()
