"""Files written whole, links replaced not followed, killed writers' leftovers removed."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from inference_obs.outputs import real_directory, remove_stale, staging_directory, write_file

ROOT = Path(__file__).resolve().parents[1]

# A writer that takes a staging directory for ``sys.argv[1]``, says where, and waits
# until its standard input closes (then it is killed by the test, or leaves).
_HOLDER = """
import sys
from pathlib import Path
from inference_obs.outputs import staging_directory
with staging_directory(Path(sys.argv[1])) as stage:
    (stage / "report.md").write_text("half")
    print(stage, flush=True)
    sys.stdin.read()
"""


def _holder(target: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(target)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_link_is_replaced_and_its_target_kept(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("the user's")
    (tmp_path / "out").mkdir()
    link = tmp_path / "out" / "vllm.json"
    link.symlink_to(elsewhere)
    write_file(link, b"new")
    assert not link.is_symlink()
    assert link.read_bytes() == b"new"
    assert elsewhere.read_text() == "the user's"


def test_a_full_disk_leaves_the_previous_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A full disk simulated at the boundary: os.write, which write_file calls, writes
    # the first 10 bytes and then fails with ENOSPC, as a file system does when full.
    path = tmp_path / "sglang.json"
    path.write_text("previous")
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if os.fstat(fd).st_size >= 10:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, bytes(data)[:10])

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError, match="No space left"):
        write_file(path, b"x" * 1000)
    assert path.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["sglang.json"]


def test_a_file_is_made_with_the_umask(tmp_path: Path) -> None:
    umask = os.umask(0o027)
    try:
        write_file(tmp_path / "a", b"x")
    finally:
        os.umask(umask)
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o640


def test_a_linked_directory_becomes_a_directory_of_its_own(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.png").write_bytes(b"the user's")
    (tmp_path / "figures").symlink_to(elsewhere)
    assert real_directory(tmp_path / "figures")
    assert not (tmp_path / "figures").is_symlink()
    assert list((tmp_path / "figures").iterdir()) == []
    assert (elsewhere / "a.png").read_bytes() == b"the user's"
    assert not real_directory(tmp_path / "figures")  # already one


def test_a_staging_directory_in_use_stays_and_a_killed_ones_goes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with _holder(out) as child:
        assert child.stdout is not None
        stage = Path(child.stdout.readline().strip())
        assert stage.name.startswith(".out.partial-")
        assert stage.is_dir()
        with staging_directory(out) as mine:  # another writer of the same directory
            assert mine != stage
        assert stage.is_dir()  # locked by a live process: in use, kept
        remove_stale(out)
        assert (stage / "report.md").read_text() == "half"
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert stage.is_dir()  # a killed writer cleans nothing up
    remove_stale(out)
    assert not stage.exists()
    assert list(tmp_path.iterdir()) == []


def test_only_temporaries_are_removed(tmp_path: Path) -> None:
    # Named like a temporary but not one (no 16 hex digits; a link): the user's, kept.
    kept = [".out.partial-notes", ".out.partial-0123", ".out.partial-0123456789abcdef"]
    (tmp_path / kept[0]).write_text("mine")
    (tmp_path / kept[1]).mkdir()
    (tmp_path / kept[2]).symlink_to(tmp_path / kept[1])
    (tmp_path / ".out.partial-fedcba9876543210").mkdir()  # a temporary, unlocked
    (tmp_path / ".other.partial-fedcba9876543210").mkdir()  # another target's
    remove_stale(tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*kept, ".other.partial-fedcba9876543210"]
    )
