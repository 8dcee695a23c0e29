"""Support for the fault suite: raw-socket fakes on 127.0.0.1, a CLI run, shared answers.

:class:`RawServer` writes whatever bytes a broken or hostile server would (a
status line and then one header a second, a body of a gigabyte, a connection
closed between two requests), which the scripted HTTP fake of
:mod:`tests.source.test_prometheus_fakes` cannot. Every loop here is bounded:
a server stops serving ``lifetime_s`` after it starts, or when stopped.

:func:`run_cli` runs ``inference-obs`` in a child process with a hard time
limit and reports its exit status, output, wall time and peak memory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from inference_obs.source.http import ALLOWED_PATHS
from tests.source.test_prometheus_fakes import Answer, Recorded, envelope

__all__ = [
    "REPORT_WINDOW",
    "ROOT",
    "CliRun",
    "Head",
    "RawServer",
    "allowlist_violations",
    "api_answer",
    "gzip_bomb",
    "raw_server",
    "response",
    "run_cli",
    "small_deployments",
    "startup_s",
]

ROOT = Path(__file__).resolve().parents[2]
# A request head larger than this is not from the client under test.
_MAX_HEAD = 1 << 16


@dataclass(frozen=True)
class Head:
    """A request as a raw fake received it: method, target, lower-cased headers, body."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when its head was in


class RawServer:
    """A TCP server on 127.0.0.1 handing each connection to ``serve(server, conn)``.

    Each connection runs in its own daemon thread; ``serve`` uses
    :meth:`read_request` and :meth:`pause` so that it stops by itself when the
    server is stopped (leaving its ``with`` block) or its ``lifetime_s`` has passed.
    """

    def __init__(
        self, serve: Callable[[RawServer, socket.socket], None], *, lifetime_s: float = 10.0
    ) -> None:
        self._serve = serve
        self.ends = time.monotonic() + lifetime_s
        self.stopping = threading.Event()
        self.requests: list[Head] = []
        self.connections = 0
        self.log: list[str] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self.stopping.is_set() and time.monotonic() < self.ends:
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # listener closed by stop()
            self.connections += 1
            thread = threading.Thread(target=self._run, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _run(self, conn: socket.socket) -> None:
        with conn:
            try:
                self._serve(self, conn)
            except OSError as exc:  # the client hung up: expected in these tests
                self.log.append(f"connection ended: {type(exc).__name__}")

    def pause(self, seconds: float) -> bool:
        """Wait ``seconds``; False when the server is stopping or past its lifetime."""
        wait = min(seconds, self.ends - time.monotonic())
        return wait > 0 and not self.stopping.wait(wait) and time.monotonic() < self.ends

    def read_request(self, conn: socket.socket) -> Head | None:
        """The next request on ``conn`` (recorded), or None when the client closed it."""
        conn.settimeout(max(0.1, self.ends - time.monotonic()))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk or len(data) > _MAX_HEAD:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        line, *fields = head.decode("latin-1").split("\r\n")
        method, target, _ = line.split(" ", 2)
        headers = {}
        for field in fields:
            name, _, value = field.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            body += chunk
        request = Head(method, target, headers, body, time.monotonic())
        self.requests.append(request)
        self.log.append(f"{method} {target}")
        return request

    def __enter__(self) -> RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.stopping.set()
        self._listener.close()
        self._acceptor.join(timeout=5)
        for thread in self._threads:
            thread.join(timeout=5)


def response(
    status: int = 200, body: bytes = b"", headers: Sequence[tuple[str, str]] = ()
) -> bytes:
    """A whole HTTP/1.1 answer with a Content-Length (kept alive unless a header says)."""
    lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def raw_server(
    serve: Callable[[RawServer, socket.socket], None], *, lifetime_s: float = 10.0
) -> Iterator[RawServer]:
    """A :class:`RawServer` for the length of a test (use with ``yield from``)."""
    server = RawServer(serve, lifetime_s=lifetime_s)
    try:
        yield server
    finally:
        server.stop()


def api_answer(request: Recorded) -> Answer:
    """A well-formed answer to any allowlisted request, chosen by its API path.

    Instant queries of a range selector (``raw``) get a matrix, other
    instant queries a vector, as a real server would answer them.
    """
    path = urllib.parse.urlsplit(request.path).path
    api = path[path.rfind("/api/v1/") :]
    fields = urllib.parse.parse_qs(request.body.decode())
    if api == "/api/v1/status/buildinfo":
        return Answer(body=envelope({"version": "2.53.0"}))
    if api == "/api/v1/query_range" or (
        api == "/api/v1/query" and fields.get("query", [""])[0].endswith("]")
    ):
        result = [{"metric": {}, "values": [[1767225600, "1"]]}]
        return Answer(body=envelope({"resultType": "matrix", "result": result}))
    if api == "/api/v1/query":
        return Answer(body=envelope({"resultType": "vector", "result": []}))
    if api == "/api/v1/metadata":
        return Answer(body=envelope({}))
    return Answer(body=envelope([]))  # series, labels, label values


# The allowlist as a server sees it; the label name is the one hole, and Prometheus' own
# rule for it (model.LabelNameRE) admits nothing a path could hide in.
_ALLOWED = {
    re.compile(re.escape(path).replace(r"\{\}", "[a-zA-Z_][a-zA-Z0-9_]*")): method
    for path, method in ALLOWED_PATHS.items()
}
# What a server or proxy could read as a step out of the prefix, or as a new part of the URL.
_STRAY = re.compile(r"(^|/)\.\.?(;[^/]*)?(/|$)|[\\?#]|[^\x21-\x7e]")


def allowlist_violations(requests: Sequence[Recorded], prefix: str) -> list[str]:
    """Each request that is not an allowlisted (method, path) under ``prefix``, in words.

    The path must be the prefix and one allowlisted API path, its method that
    path's one method, a POST must carry no query string, and the path must
    mean the same once percent-decoded (no dot segment, no backslash, ``?``,
    ``#``, space, control or non-ASCII character appears).
    """
    problems = []
    for request in requests:
        path, _, query = request.path.partition("?")
        api = path[len(prefix) :] if path.startswith(prefix) else ""
        method = next((m for rule, m in _ALLOWED.items() if rule.fullmatch(api)), None)
        if method is None:
            problems.append(f"{request.method} {request.path}: not an allowlisted path")
        elif request.method != method:
            problems.append(f"{request.method} {request.path}: {api} takes {method}")
        elif method == "POST" and query:
            problems.append(f"{request.method} {request.path}: a query string on a POST")
        if _STRAY.search(urllib.parse.unquote(path)):
            problems.append(f"{request.method} {request.path}: changes once decoded")
    return problems


def gzip_bomb(prefix: bytes, mib: int) -> bytes:
    """A valid one-member gzip body: ``prefix`` and then ``mib`` MiB of spaces, decoded.

    Built without compressing all of it: after a full flush deflate starts
    afresh, so one compressed MiB of spaces repeats byte for byte (about
    1 KiB each: a GiB is about 1 MB of gzip).
    """
    chunk = b" " * (1 << 20)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = deflate.compress(prefix) + deflate.flush(zlib.Z_FULL_FLUSH)
    block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = zlib.crc32(prefix)
    for _ in range(mib):
        crc = zlib.crc32(chunk, crc)
    size = len(prefix) + mib * len(chunk)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"  # gzip, deflate, no name, unix
    trailer = struct.pack("<II", crc, size & 0xFFFFFFFF)
    return header + head + block * mib + deflate.flush() + trailer


@dataclass(frozen=True)
class CliRun:
    """How a child ``inference-obs`` ended."""

    code: int
    stdout: str
    stderr: str
    elapsed_s: float
    ended: float  # time.monotonic() when it had exited
    peak_rss_bytes: int


def run_cli(args: Sequence[str], tmp: Path, *, timeout_s: float = 30.0) -> CliRun:
    """Run ``python -m inference_obs.cli *args`` from this checkout, killed past ``timeout_s``.

    The child's peak resident memory comes from :func:`os.wait4` (its own,
    not that of every child this test process ever waited for).
    """
    out, err = tmp / "cli.stdout", tmp / "cli.stderr"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    write = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    started = time.monotonic()
    pid = os.posix_spawn(
        sys.executable,
        [sys.executable, "-m", "inference_obs.cli", *args],
        env,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(out), write, 0o600),
            (os.POSIX_SPAWN_OPEN, 2, str(err), write, 0o600),
        ],
    )
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > timeout_s:
            os.kill(pid, signal.SIGKILL)
            os.wait4(pid, 0)
            raise AssertionError(f"inference-obs {' '.join(args)} ran past {timeout_s} s")
        time.sleep(0.02)
    ended = time.monotonic()
    return CliRun(
        code=os.waitstatus_to_exitcode(status),
        stdout=out.read_text(errors="replace"),
        stderr=err.read_text(errors="replace"),
        elapsed_s=ended - started,
        ended=ended,
        peak_rss_bytes=usage.ru_maxrss * 1024,  # Linux reports KiB
    )


def startup_s(tmp: Path) -> float:
    """Seconds a child ``inference-obs --version`` takes: Python's start, the library's
    imports and the exit, on this machine under its present load.

    A run with a time budget cannot end sooner: the budget counts from the
    process's start, and the run ends as soon as it has started when the
    start alone outlasts the budget.
    """
    run = run_cli(["--version"], tmp)
    assert run.code == 0, run.stderr
    return run.elapsed_s


def small_deployments(tmp: Path) -> Path:
    """A deployments file with one deployment (the bundled dataset's first)."""
    manifest = json.loads((ROOT / "datasets" / "pro5000-vs-h20" / "manifest.json").read_text())
    path = tmp / "deployments.yaml"
    path.write_text(yaml.safe_dump({"deployments": manifest["deployments"][:1]}))
    return path


#: The live report options every CLI run here shares, after --prometheus URL.
REPORT_WINDOW = ("--end", "2026-10-19T18:40:00+08:00", "--window", "1h", "--quiet")
