"""Files written into directories a user names: whole or not at all, never through a link.

Three rules, for every command that writes into a directory it is given:

- A file is written to a temporary beside it and moved to its name with one
  :func:`os.replace` (:func:`write_file`): a reader, a crash or a full disk
  finds the previous file or the new one, never a part of one.
- A link found where a file or directory is written is replaced, never
  written or deleted through: the link is removed and a regular file or
  directory put in its place, and the link's target is left as it was
  (:func:`os.replace` renames over the link itself; :func:`real_directory`).
- A temporary is named ``.<name>.partial-<16 hex digits>`` beside what it
  becomes, and its writer holds an exclusive :func:`fcntl.flock` on it for
  as long as it writes. The kernel drops the lock when its process ends,
  however it ends (SIGKILL included), so a temporary whose lock can be taken
  is one whose writer is gone: the next writer of the same name removes it
  (:func:`remove_stale`). A temporary being written by a live process, here
  or on another machine sharing the file system, stays (NFS locks ``flock``
  through ``fcntl`` byte ranges since Linux 2.6.12).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = [
    "PARTIAL",
    "real_directory",
    "remove_stale",
    "staging_directory",
    "write_file",
]

#: What marks a temporary: ``.<name>.partial-`` and 16 hex digits.
PARTIAL = ".partial-"
_TOKEN_BYTES = 8


def _temporary(target: Path) -> Path:
    return target.parent / f".{target.name}{PARTIAL}{secrets.token_hex(_TOKEN_BYTES)}"


def _is_temporary_of(name: str, target: Path) -> bool:
    pattern = rf"\.{re.escape(target.name)}{re.escape(PARTIAL)}[0-9a-f]{{{2 * _TOKEN_BYTES}}}"
    return re.fullmatch(pattern, name) is not None


def _claim(path: Path, fd: int) -> bool:
    """Take the exclusive lock of the open ``fd`` of ``path``, if it is free and still ``path``.

    False when the lock is held by a live process, or when ``path`` is no
    longer the file opened (removed or replaced meanwhile): the inode locked
    must be the one the name points at. Raises an OSError other than
    "locked" (a file system without locks).
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def remove_stale(target: Path) -> None:
    """Remove the temporaries of ``target`` left by writers that are gone.

    A temporary of ``target`` is a file or directory named
    ``.<target name>.partial-<16 hex digits>`` beside it; one is removed
    when its lock can be taken (its writer's process has ended). A link of
    that name is not a temporary and stays. Errors are ignored: a stale
    temporary is untidy, not a reason to fail a run.
    """
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        if not _is_temporary_of(entry.name, target) or entry.is_symlink():
            continue
        path = Path(entry.path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:  # gone meanwhile, or not ours to open
            continue
        try:
            if not _claim(path, fd):
                continue
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                shutil.rmtree(path, ignore_errors=True)  # removes links, never follows them
            else:
                path.unlink(missing_ok=True)
        except OSError:
            pass
        finally:
            os.close(fd)


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole, replacing a file or a link there.

    The bytes go to a locked temporary beside ``path`` (same directory, so
    the same file system), made with the process's umask, and are moved to
    ``path`` with one :func:`os.replace`. Temporaries of ``path`` that
    writers killed before left are removed first.

    Raises
    ------
    OSError
        The file could not be written (a full disk, a read-only file system,
        a directory at ``path``); the temporary is removed, and ``path`` holds
        the previous file, or nothing if there was none.
    """
    remove_stale(path)
    while True:
        temporary = _temporary(path)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            # Locked before anything is written; if another writer's
            # remove_stale locked it first, it removes it: a new name.
            if _claim(temporary, fd):
                break
        except BaseException:
            os.close(fd)
            temporary.unlink(missing_ok=True)
            raise
        os.close(fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.replace(temporary, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OSError) and exc.filename is None:  # os.write names no file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    finally:
        os.close(fd)


def real_directory(path: Path) -> bool:
    """Make ``path`` a directory of its own: a link there is removed (its target kept).

    Returns
    -------
    bool
        Whether a directory was made (False: one was there already).

    Raises
    ------
    OSError
        A file is at ``path`` (FileExistsError), or it cannot be made.
    """
    if path.is_symlink():
        path.unlink()
    elif path.is_dir():
        return False
    path.mkdir()
    return True


@contextlib.contextmanager
def staging_directory(target: Path) -> Iterator[Path]:
    """A new, locked, hidden directory beside ``target``, removed on leaving.

    For writing many files and moving them to ``target`` once all are
    written. The directory is made with the process's umask (unlike
    :func:`tempfile.mkdtemp`'s 0700), so it can become ``target`` itself by
    one rename; the lock goes with it. Staging directories of ``target``
    left by killed writers are removed first, and ``target``'s parent is
    made if needed.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(target)
    while True:
        stage = _temporary(target)
        stage.mkdir()
        try:
            fd = os.open(stage, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except BaseException:
            stage.rmdir()
            raise
        try:
            # As in write_file: a directory another writer locked first is its to remove.
            if _claim(stage, fd):
                break
        except BaseException:
            os.close(fd)
            stage.rmdir()
            raise
        os.close(fd)
    try:
        yield stage
    finally:
        try:
            shutil.rmtree(stage, ignore_errors=True)
        finally:
            os.close(fd)
