"""Answer size: a gigabyte on the wire or out of a 1 MB gzip body is refused, never held.

Fakes (:mod:`tests.source.fault_servers` and the scripted HTTP fake) because a
real Prometheus cannot be made to stream a gigabyte of whitespace, announce a
body it never sends, or answer with a gzip bomb. The gigabyte is generated as
it is sent (one MiB buffer written again and again); the bomb is about 1 MB.
"""

from __future__ import annotations

import gzip
import socket
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference_obs.cli import EXIT_SOURCE
from inference_obs.errors import AnswerTooLarge, SourceUnavailable
from inference_obs.query import Selector
from inference_obs.samples import Vector
from inference_obs.source.http import MAX_ANSWER_BYTES
from inference_obs.source.prometheus import PrometheusSource
from tests.source.fault_servers import (
    REPORT_WINDOW,
    RawServer,
    gzip_bomb,
    run_cli,
    small_deployments,
)
from tests.source.test_prometheus_fakes import Answer, FakeServer, envelope, fake_server

UP = Selector("up")
GIB = 1 << 30
MIB = 1 << 20
LIMIT = 8 * MIB  # in-process limit: small, so a test reads little before refusing
PREFIX = b'{"status":"success","data":{"resultType":"vector","result":[]}'
VECTOR = envelope({"resultType": "vector", "result": [{"metric": {"job": "a"}, "value": [1, "2"]}]})
# A child process holding one 256 MiB answer stays far below this; a whole GiB does not.
RSS_BOUND = 1.5 * GIB


def stream_gib(server: RawServer, conn: socket.socket, *, chunked: bool) -> None:
    """A 200 whose body is PREFIX and then a GiB of spaces, made while it is sent."""
    if server.read_request(conn) is None:
        return
    framing = "Transfer-Encoding: chunked" if chunked else "Connection: close"
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}\r\n\r\n".encode())
    spaces = b" " * MIB
    sent = 0
    while sent < GIB and not server.stopping.is_set() and time.monotonic() < server.ends:
        piece = PREFIX if sent == 0 else spaces
        if chunked:
            conn.sendall(f"{len(piece):x}\r\n".encode())
        conn.sendall(piece)
        if chunked:
            conn.sendall(b"\r\n")
        sent += len(piece)


def announce_too_much(server: RawServer, conn: socket.socket) -> None:
    """Headers announcing LIMIT + 1 bytes, then no body at all."""
    if server.read_request(conn) is None:
        return
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {LIMIT + 1}\r\n\r\n".encode())
    while server.pause(0.1):
        pass


@pytest.fixture(scope="module")
def bomb() -> bytes:
    body = gzip_bomb(PREFIX, GIB // MIB)
    assert len(body) < 1.1e6  # about 1 MB on the wire for a GiB decoded
    return body


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    yield from fake_server()


def assert_names_the_limit(error: AnswerTooLarge, limit: int, where: str) -> None:
    text = str(error)
    assert f"larger than {limit:,} bytes ({where})" in text
    assert "max_answer_bytes" in text
    assert "--max-answer-mb" in text
    assert text.endswith("(query: up)")


@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "until-close"])
def test_a_gigabyte_body_is_refused_at_the_limit(chunked: bool) -> None:
    with RawServer(lambda s, c: stream_gib(s, c, chunked=chunked)) as server:
        tracemalloc.start()
        try:
            with pytest.raises(AnswerTooLarge) as info:
                PrometheusSource(server.url, max_answer_bytes=LIMIT, retries=2).instant(UP, 0)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert_names_the_limit(info.value, LIMIT, "on the wire")
        assert peak < 4 * LIMIT  # the answer so far and one read, never the gigabyte
        assert len(server.requests) == 1  # a size limit is not a transient failure


def test_a_gzip_bomb_is_refused_while_decompressing(fake: FakeServer, bomb: bytes) -> None:
    fake.script = [Answer(body=bomb, headers={"Content-Encoding": "gzip"})]
    tracemalloc.start()
    try:
        with pytest.raises(AnswerTooLarge) as info:
            PrometheusSource(fake.url, max_answer_bytes=LIMIT).instant(UP, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_names_the_limit(info.value, LIMIT, "decompressed")
    assert peak < 4 * LIMIT
    assert len(fake.requests) == 1


def test_a_bomb_split_into_gzip_members_is_refused_too(fake: FakeServer) -> None:
    """Each member decodes to half the limit plus one MiB: only their sum is too large."""
    member = gzip_bomb(PREFIX, (LIMIT // 2 + MIB) // MIB)
    fake.script = [Answer(body=member * 2, headers={"Content-Encoding": "gzip"})]
    with pytest.raises(AnswerTooLarge) as info:
        PrometheusSource(fake.url, max_answer_bytes=LIMIT).instant(UP, 0)
    assert_names_the_limit(info.value, LIMIT, "decompressed")


def test_an_announced_length_over_the_limit_is_refused_before_reading() -> None:
    """The body never comes: reading it would time out, refusing is at once."""
    with RawServer(announce_too_much) as server:
        started = time.monotonic()
        with pytest.raises(AnswerTooLarge) as info:
            PrometheusSource(server.url, max_answer_bytes=LIMIT, timeout=5).instant(UP, 0)
        assert time.monotonic() - started < 1.0
        assert_names_the_limit(info.value, LIMIT, "announced")


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_an_answer_of_exactly_the_limit_is_accepted(fake: FakeServer, gzipped: bool) -> None:
    """JSON may end in whitespace: the answer padded to LIMIT bytes is still the answer."""
    body = VECTOR + b" " * (LIMIT - len(VECTOR))
    headers = {"Content-Encoding": "gzip"} if gzipped else {}
    fake.script = [Answer(body=gzip.compress(body) if gzipped else body, headers=headers)]
    value = PrometheusSource(fake.url, max_answer_bytes=LIMIT).instant(UP, 0).value
    assert isinstance(value, Vector)
    assert value.values.tolist() == [2.0]
    # One byte more is refused, on the wire or once decoded.
    body += b" "
    fake.script = [Answer(body=gzip.compress(body) if gzipped else body, headers=headers)]
    with pytest.raises(AnswerTooLarge, match="decompressed" if gzipped else "announced"):
        PrometheusSource(fake.url, max_answer_bytes=LIMIT).instant(UP, 0)


def test_a_body_of_several_gzip_members_is_decoded_whole(fake: FakeServer) -> None:
    """RFC 1952 allows members one after another; each holds part of the answer."""
    cut = len(VECTOR) // 2
    members = gzip.compress(VECTOR[:cut]) + gzip.compress(VECTOR[cut:])
    fake.script = [Answer(body=members, headers={"Content-Encoding": "gzip"})]
    value = PrometheusSource(fake.url, retries=0).instant(UP, 0).value
    assert isinstance(value, Vector)
    assert value.values.tolist() == [2.0]
    # Bytes after the last member that are no gzip member: not silently dropped.
    fake.script = [
        Answer(body=gzip.compress(VECTOR) + b"junk", headers={"Content-Encoding": "gzip"})
    ]
    with pytest.raises(SourceUnavailable, match="invalid or truncated gzip body"):
        PrometheusSource(fake.url, retries=0).instant(UP, 0)


@pytest.mark.parametrize("kind", ["gigabyte", "bomb"])
def test_cli_refuses_a_huge_answer_with_bounded_memory(
    kind: str, bomb: bytes, fake: FakeServer, tmp_path: Path
) -> None:
    """The default limit (256 MiB) holds in a child process: exit 4, one line, peak RSS bounded."""
    fake.script = [Answer(body=bomb, headers={"Content-Encoding": "gzip"})]
    with RawServer(lambda s, c: stream_gib(s, c, chunked=True)) as gigabyte:
        run = run_cli(
            [
                "report",
                "--prometheus",
                gigabyte.url if kind == "gigabyte" else fake.url,
                "--deployments",
                str(small_deployments(tmp_path)),
                *REPORT_WINDOW,
                "--out",
                str(tmp_path / "out"),
            ],
            tmp_path,
            timeout_s=60,
        )
    assert run.code == EXIT_SOURCE, run.stderr
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    where = "on the wire" if kind == "gigabyte" else "decompressed"
    assert line.startswith("inference-obs: source error: ")
    assert f"larger than {MAX_ANSWER_BYTES:,} bytes ({where})" in line
    assert "--max-answer-mb" in line
    assert "(query: " in line  # whichever request the report sent first
    assert run.peak_rss_bytes < RSS_BOUND, f"peak RSS {run.peak_rss_bytes / MIB:.0f} MiB"
