"""Moving one request and its answer: kept-alive connections, a deadline, a size limit.

:class:`Transport` is what :class:`~inference_obs.source.http.Client` sends
through; tests inject their own. :class:`PooledTransport`, the default, keeps
HTTP/1.1 connections to one :class:`~inference_obs.source.endpoint.Endpoint`
open between requests (a live report makes hundreds; over a link with 50 ms
each way a new connection per request costs a round trip each, two with TLS).

Why not ``requests``, ``urllib3`` or ``httpx``: their timeouts bound each
socket operation, not an attempt. A server that sends a status line and
then one header a second never trips a 5 s read timeout and holds the
caller for as long as it likes. Here every attempt has one deadline for
connect, headers and body together, enforced by a watchdog thread that shuts
the socket down when the deadline passes, wherever the exchange is blocked.
The answer's size is limited while it is read and while it is
decompressed, so neither a huge body nor a gzip bomb is ever held whole.

Contract of :meth:`Transport.send`: return a :class:`Response` whose body is
decoded (no ``Content-Encoding`` left), or raise

- :class:`TimeoutError` when ``request.deadline`` passed;
- :class:`AnswerTooBig` when the body, on the wire or decoded, is larger than
  ``request.max_bytes``;
- :class:`BadEncoding` when a compressed body does not decode (cut off);
- :class:`OSError` or :class:`http.client.HTTPException` for anything else
  on the connection.
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import socket
import ssl
import threading
import time
import weakref
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from inference_obs.source.endpoint import Endpoint

__all__ = [
    "AnswerTooBig",
    "BadEncoding",
    "PooledTransport",
    "Request",
    "Response",
    "Transport",
]

# Read size: large enough that big answers take few system calls.
_CHUNK = 1 << 18
# How often the watchdog looks again at a connection it could not abort yet
# (no socket: still resolving or connecting, itself bounded by the timeout).
_RECHECK_S = 0.01


@dataclass(frozen=True, slots=True)
class Request:
    """One request as it goes on the wire.

    Attributes
    ----------
    method
        ``GET`` or ``POST``.
    target
        Path and query string (``/api/v1/series?match[]=...``), already
        allowlisted by the client.
    headers
        Headers to send (Host and Content-Length are added by the transport).
    body
        Form-encoded body of a POST, else empty.
    deadline
        :func:`time.monotonic` time by which the whole answer must be in.
    max_bytes
        Largest body accepted, on the wire and decoded.
    """

    method: Literal["GET", "POST"]
    target: str
    headers: Mapping[str, str]
    body: bytes
    deadline: float
    max_bytes: int


@dataclass(frozen=True, slots=True)
class Response:
    """An answer: status, headers (names lower-cased) and the decoded body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class Transport(Protocol):
    """Sends a :class:`Request` and returns its :class:`Response` (see the module's contract)."""

    def send(self, request: Request) -> Response:
        """Send ``request`` and read its whole answer before ``request.deadline``."""
        ...

    def close(self) -> None:
        """Close every connection held."""
        ...


class AnswerTooBig(Exception):
    """The body is larger than the request's ``max_bytes``; ``where`` says at which stage."""

    def __init__(self, where: Literal["on the wire", "decompressed", "announced"]) -> None:
        super().__init__(f"answer larger than the limit ({where})")
        self.where = where


class BadEncoding(Exception):
    """A compressed body does not decode: cut off in transit, or not what it claims."""


class PooledTransport:
    """HTTP/1.1 with kept-alive connections to one endpoint, at most ``size`` idle.

    Parameters
    ----------
    endpoint
        Where every request goes.
    tls
        Context for ``https`` (the system's default when None).
    proxy
        An ``http://`` forward proxy: plain requests go through it with an
        absolute URI, ``https`` ones through a CONNECT tunnel.
    size
        Idle connections kept for reuse (the client's parallelism).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        tls: ssl.SSLContext | None = None,
        proxy: Endpoint | None = None,
        size: int = 8,
    ) -> None:
        self._endpoint = endpoint
        self._tls = tls
        self._proxy = proxy
        self._size = size
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        # Idle sockets are closed when the transport is dropped unclosed too.
        weakref.finalize(self, _close_all, self._idle)

    def send(self, request: Request) -> Response:
        """Send ``request`` on an idle connection, or a new one (see the module's contract)."""
        conn = self._checkout()
        reused = conn is not None
        if conn is None:
            conn = self._connection()
        try:
            response, keep = self._exchange(conn, request)
        except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
            conn.close()
            if not reused:
                raise
            # A kept-alive connection the server had closed meanwhile: the
            # request never arrived, so one fresh connection may take it.
            conn = self._connection()
            try:
                response, keep = self._exchange(conn, request)
            except BaseException:
                conn.close()
                raise
        except BaseException:
            conn.close()
            raise
        if keep:
            self._checkin(conn)
        else:
            conn.close()
        return response

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle = self._idle[:]
            self._idle.clear()
        _close_all(idle)

    # --- connections -----------------------------------------------------------

    def _checkout(self) -> http.client.HTTPConnection | None:
        with self._lock:
            return self._idle.pop() if self._idle else None

    def _checkin(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._size:
                self._idle.append(conn)
                return
        conn.close()

    def _connection(self) -> http.client.HTTPConnection:
        target, hop = self._endpoint, self._proxy or self._endpoint
        conn: http.client.HTTPConnection
        if target.scheme == "https":
            conn = http.client.HTTPSConnection(hop.host, hop.port, context=self._tls)
        else:
            conn = http.client.HTTPConnection(hop.host, hop.port)
        if self._proxy is not None and target.scheme == "https":
            conn.set_tunnel(target.host, target.port)
        return conn

    def _exchange(
        self, conn: http.client.HTTPConnection, request: Request
    ) -> tuple[Response, bool]:
        with _WATCHDOG.guard(conn, request.deadline) as expired:
            try:
                remaining = _remaining(request.deadline)
                if conn.sock is None:
                    conn.timeout = remaining
                    conn.connect()
                else:
                    conn.sock.settimeout(remaining)
                target = request.target
                if self._proxy is not None and self._endpoint.scheme == "http":
                    target = self._endpoint.url.removesuffix(self._endpoint.prefix) + target
                conn.putrequest(request.method, target, skip_accept_encoding=True)
                for name, value in request.headers.items():
                    conn.putheader(name, value)
                if request.method == "POST":
                    conn.putheader("Content-Length", str(len(request.body)))
                conn.endheaders(request.body or None)
                resp = conn.getresponse()
                try:
                    body = _read_body(resp, request.max_bytes)
                finally:
                    # Releases the response's file on the socket; the
                    # connection keeps the socket itself for the next request.
                    resp.close()
            except (OSError, http.client.HTTPException, ValueError) as exc:
                if expired.is_set():
                    raise TimeoutError("deadline passed") from exc
                raise
            if expired.is_set():
                raise TimeoutError("deadline passed")
        headers = {k.lower(): v for k, v in resp.getheaders()}
        return Response(resp.status, headers, body), not resp.will_close


def _close_all(connections: list[http.client.HTTPConnection]) -> None:
    for conn in connections:
        conn.close()


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def _read_body(resp: http.client.HTTPResponse, limit: int) -> bytes:
    """The body, decoded when gzipped, never more than ``limit`` bytes at any stage."""
    announced = resp.getheader("Content-Length")
    if announced is not None and announced.isdigit() and int(announced) > limit:
        raise AnswerTooBig("announced")
    gzipped = (resp.getheader("Content-Encoding") or "").strip().lower() == "gzip"
    inflater = zlib.decompressobj(wbits=31) if gzipped else None
    out = bytearray()
    wire = 0
    while chunk := resp.read1(_CHUNK):
        wire += len(chunk)
        if wire > limit:
            raise AnswerTooBig("on the wire")
        if inflater is None:
            out += chunk
            continue
        try:
            # max_length bounds what one call may produce: a bomb stops at limit + 1.
            out += inflater.decompress(chunk, limit + 1 - len(out))
            # RFC 1952 lets a body hold several gzip members, one after another:
            # each is decoded in turn (zlib stops at the end of the first).
            while inflater.eof and inflater.unused_data and len(out) <= limit:
                rest, inflater = inflater.unused_data, zlib.decompressobj(wbits=31)
                out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise BadEncoding(f"invalid gzip body ({exc})") from None
        if len(out) > limit or inflater.unconsumed_tail:
            raise AnswerTooBig("decompressed")
    if inflater is not None and not inflater.eof:
        raise BadEncoding("truncated gzip body")
    return bytes(out)


class _Watchdog:
    """One thread that shuts down the socket of every attempt that outlives its deadline.

    Shutting a socket down wakes whatever read or write is blocked on it, in
    any thread; the attempt then sees its ``expired`` event set and reports a
    timeout. An attempt still without a socket (resolving, connecting) is
    looked at again shortly: connecting is bounded by the socket timeout.
    """

    def __init__(self) -> None:
        self._wake = threading.Condition()
        self._heap: list[tuple[float, int, http.client.HTTPConnection, threading.Event]] = []
        self._active: set[int] = set()
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def guard(self, conn: http.client.HTTPConnection, deadline: float) -> Iterator[threading.Event]:
        expired = threading.Event()
        key = next(self._ids)
        with self._wake:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="inference-obs-deadlines", daemon=True
                )
                self._thread.start()
            self._active.add(key)
            heapq.heappush(self._heap, (deadline, key, conn, expired))
            self._wake.notify()
        try:
            yield expired
        finally:
            with self._wake:
                self._active.discard(key)

    def _run(self) -> None:
        with self._wake:
            while True:
                while self._heap and self._heap[0][1] not in self._active:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._wake.wait()
                    continue
                deadline, key, conn, expired = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                heapq.heappop(self._heap)
                expired.set()
                sock = conn.sock
                if sock is None:
                    heapq.heappush(self._heap, (deadline + _RECHECK_S, key, conn, expired))
                    continue
                with contextlib.suppress(OSError):  # already closed
                    sock.shutdown(socket.SHUT_RDWR)


_WATCHDOG = _Watchdog()
